package mcpserver

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reflecttest"
)

// sessionToolsClient serves the session tools of a server offering langs to an MCP client of
// the SDK over an in-memory transport. The server has no Temporal client: only what is refused
// before one is needed can be called.
func sessionToolsClient(t *testing.T, langs ...string) *mcp.ClientSession {
	t.Helper()
	s := &Server{cfg: Config{Languages: langs, Wait: time.Second, ProgressInterval: time.Second}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "sandboxflow", Version: "test"}, nil)
	s.sessionTools()
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.mcp.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestSessionToolSchemas: each session tool's input schema, as an MCP client reads it, names
// exactly the JSON fields its arguments decode (walked by reflection), requires what the tool
// needs, and allows nothing else; run_cell asks for a language only where more than one is
// offered, from those offered.
func TestSessionToolSchemas(t *testing.T) {
	for _, langs := range [][]string{{guard.Python}, {guard.Python, guard.Shell}} {
		cs := sessionToolsClient(t, langs...)
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]struct {
			fields   []string
			required []string
		}{
			OpenSessionToolName:  {reflecttest.JSONNames[OpenSessionArguments](), nil},
			RunCellToolName:      {reflecttest.JSONNames[RunCellArguments](), []string{"session_id", "code"}},
			CellStatusToolName:   {reflecttest.JSONNames[CellStatusArguments](), []string{"session_id", "cell"}},
			CloseSessionToolName: {reflecttest.JSONNames[CloseSessionArguments](), []string{"session_id"}},
		}
		if len(langs) > 1 {
			w := want[RunCellToolName]
			w.required = append(w.required, "language")
			want[RunCellToolName] = w
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
			w, ok := want[tool.Name]
			if !ok {
				t.Errorf("unexpected tool %s", tool.Name)
				continue
			}
			b, _ := json.Marshal(tool.InputSchema)
			var schema struct {
				Type       string                     `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
				Additional *bool                      `json:"additionalProperties"`
			}
			if err := json.Unmarshal(b, &schema); err != nil {
				t.Fatal(err)
			}
			fields := w.fields
			if tool.Name == RunCellToolName && len(langs) == 1 {
				fields = slices.DeleteFunc(slices.Clone(fields), func(f string) bool { return f == "language" })
			}
			if got := slices.Sorted(maps.Keys(schema.Properties)); schema.Type != "object" || !slices.Equal(got, slices.Sorted(slices.Values(fields))) ||
				!slices.Equal(schema.Required, w.required) || schema.Additional == nil || *schema.Additional {
				t.Errorf("%s (languages %v): schema %s; want an object of exactly %v, requiring %v, nothing else", tool.Name, langs, b, fields, w.required)
			}
			if tool.Name == RunCellToolName && len(langs) > 1 && !strings.Contains(string(schema.Properties["language"]), `"enum":["python","sh"]`) {
				t.Errorf("run_cell's language %s; want the offered languages as its enum", schema.Properties["language"])
			}
			if tool.Description == "" {
				t.Errorf("%s has no description", tool.Name)
			}
		}
		if len(names) != len(want) {
			t.Errorf("tools %v; want %d session tools", names, len(want))
		}
	}
}

// TestSessionToolsRefuseBadArguments: what the model may not send is a ToolUsageError it can
// correct, before anything is started: unknown fields (the operator's settings), a language not
// offered, an id that is not a session's, durations that are not.
func TestSessionToolsRefuseBadArguments(t *testing.T) {
	cs := sessionToolsClient(t, guard.Python)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{OpenSessionToolName, map[string]any{"network": true}},
		{OpenSessionToolName, map[string]any{"env": map[string]any{"LD_PRELOAD": "/x"}}},
		{OpenSessionToolName, map[string]any{"lifetime": "forever"}},
		{OpenSessionToolName, map[string]any{"idle_timeout": "-1m"}},
		{OpenSessionToolName, map[string]any{"max_cells": -1}},
		{RunCellToolName, map[string]any{"session_id": "session-1", "code": "x", "language": "sh"}},
		{RunCellToolName, map[string]any{"session_id": "session-1", "code": "x", "timeout": "1h"}},
		{RunCellToolName, map[string]any{"session_id": "sandbox-1", "code": "x"}},
		{CellStatusToolName, map[string]any{"session_id": "sandbox-1", "cell": 1}},
		{CloseSessionToolName, map[string]any{"session_id": "other-1"}},
		{CloseSessionToolName, map[string]any{"session_id": "session-1", "reason": "x"}},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Errorf("%s %v: %v; want a tool result the model reads", tc.tool, tc.args, err)
			continue
		}
		if !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, guard.TypeToolUsageError) {
			t.Errorf("%s %v: %+v; want isError with a ToolUsageError", tc.tool, tc.args, res.Content)
		}
	}
}

// TestCellResultKeepsEveryField: run_cell's structured content holds every field of the cell's
// result (walked by reflection), state_reset included and said in the summary, the produced
// files by name and size, their contents as embedded resources named under the cell.
func TestCellResultKeepsEveryField(t *testing.T) {
	res := reflecttest.Filled[guard.Result](t)
	res.Outcome, res.Duration = guard.OutcomeFailed, 1500*time.Millisecond
	cs := contract.CellStatus{Cell: 2, State: contract.StatusFailed, Result: &res}
	read, err := client.CellOutcome("session-1", cs)
	out := cellResultContent("session-1", cs, read, err)
	b, err := json.Marshal(out.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, name := range reflecttest.JSONNames[guard.Result]() {
		if _, ok := keys[name]; !ok {
			t.Errorf("structured content lacks %q: %s", name, b)
		}
	}
	var back guard.Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	want := res
	want.Files = []guard.File{{Name: res.Files[0].Name, Size: res.Files[0].Size}}
	want.Outputs = []guard.Output{res.Outputs[0]}
	want.Outputs[0].Data = nil
	if !reflect.DeepEqual(back, want) || !back.StateReset {
		t.Errorf("structured content reads back as %+v; want %+v", back, want)
	}
	summary := out.Content[0].(*mcp.TextContent).Text
	if !strings.HasPrefix(summary, "cell 2 of session session-1") || !strings.Contains(summary, "state_reset") {
		t.Errorf("summary %q; want the cell named and state_reset said", summary)
	}
	er, ok := out.Content[len(out.Content)-1].(*mcp.EmbeddedResource)
	if !ok || er.Resource.URI != "sandboxflow://sessions/session-1/cells/2/files/x" {
		t.Errorf("last content %+v; want the file as a resource under the cell", out.Content[len(out.Content)-1])
	}

	// A denied cell is an error the model reads, and the session stays open.
	outcome := func(cs contract.CellStatus) *mcp.CallToolResult {
		res, err := client.CellOutcome("session-1", cs)
		return cellResultContent("session-1", cs, res, err)
	}
	denied := outcome(contract.CellStatus{Cell: 3, State: contract.StatusDenied, DecisionWait: contract.DecisionWait{Decision: &contract.DecisionRecord{Reviewer: "bob", Reason: "no"}}})
	if !denied.IsError || !strings.Contains(denied.Content[0].(*mcp.TextContent).Text, guard.TypeApprovalDenied) || !strings.Contains(denied.Content[1].(*mcp.TextContent).Text, "stays open") {
		t.Errorf("denied cell: %+v; want an ApprovalDenied error saying the session stays open", denied.Content)
	}
	dropped := outcome(contract.CellStatus{Cell: 3, State: contract.CellDropped})
	if out, ok := dropped.StructuredContent.(client.ErrorOutput); !dropped.IsError || !ok || out.Error.Type != client.TypeCellNotRun {
		t.Errorf("dropped cell: %+v; want a CellNotRun error", dropped.StructuredContent)
	}
}

// TestClosedSessionListsEveryCell: close_session's structured content lists every cell with
// every field of CellSummary and of its result (without file contents).
func TestClosedSessionListsEveryCell(t *testing.T) {
	res := reflecttest.Filled[guard.Result](t)
	res.Outcome = guard.OutcomeSucceeded
	cell := reflecttest.Filled[contract.CellStatus](t)
	cell.Result = &res
	st := contract.SessionStatus{End: contract.EndClosed, Cells: []contract.CellStatus{cell, {Cell: 2, State: contract.StatusDenied}}}
	out := closedContent("session-1", st)
	b, err := json.Marshal(out.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		SessionID string                       `json:"session_id"`
		End       string                       `json:"end"`
		Cells     []map[string]json.RawMessage `json:"cells"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.SessionID != "session-1" || got.End != contract.EndClosed || len(got.Cells) != 2 {
		t.Fatalf("structured content %s, %v", b, err)
	}
	for _, name := range reflecttest.JSONNames[CellSummary]() {
		if _, ok := got.Cells[0][name]; !ok {
			t.Errorf("cell 1 lacks %q: %s", name, b)
		}
	}
	var r map[string]json.RawMessage
	if err := json.Unmarshal(got.Cells[0]["result"], &r); err != nil {
		t.Fatal(err)
	}
	for _, name := range reflecttest.JSONNames[guard.Result]() {
		if _, ok := r[name]; !ok {
			t.Errorf("cell 1's result lacks %q: %s", name, got.Cells[0]["result"])
		}
	}
	if strings.Contains(string(got.Cells[0]["result"]), `"content"`) {
		t.Errorf("file contents in the list: %s", got.Cells[0]["result"])
	}
	if _, ok := got.Cells[1]["result"]; ok {
		t.Errorf("the denied cell has a result: %s", b)
	}
}

// open_session's packages go into the session's settings as the model's lock; beside the
// operator's own lock they are a ToolUsageError.
func TestOpenSessionPackages(t *testing.T) {
	lock := "numpy==2.1.0 --hash=sha256:" + strings.Repeat("a", 64) + "\n"
	s := &Server{cfg: Config{Languages: []string{guard.Python}}}
	req, err := s.sessionRequest(OpenSessionArguments{Packages: lock})
	if err != nil || req.Packages != lock {
		t.Fatalf("got %q, %v; want the model's lock", req.Packages, err)
	}
	s.cfg.Base.Packages = "pandas==2 --hash=sha256:" + strings.Repeat("b", 64)
	if _, err := s.sessionRequest(OpenSessionArguments{Packages: lock}); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("a model's lock beside the operator's: %v; want a ToolUsageError", err)
	}
}

// A run still waiting tells the model which packages its reviewers approve with the code.
func TestPackagesText(t *testing.T) {
	pkgs := []guard.Package{{Name: "numpy", Version: "2.1.0", Hashes: []string{"sha256:" + strings.Repeat("a", 64)}}}
	if got := packagesText(pkgs); !strings.Contains(got, "numpy==2.1.0 (1 hash(es))") {
		t.Errorf("packagesText: %q; want numpy==2.1.0 with its hash count", got)
	}
	if got := packagesText(nil); got != "" {
		t.Errorf("packagesText of none: %q", got)
	}
}
