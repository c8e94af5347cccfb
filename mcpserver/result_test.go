package mcpserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reflecttest"
)

// TestStructuredResultKeepsEveryField: the run_code tool's structured content holds every field
// of the result (walked by reflection), the produced files by name and size, their contents only
// as embedded resources, the outputs without their data (content blocks carry it).
func TestStructuredResultKeepsEveryField(t *testing.T) {
	res := reflecttest.Filled[guard.Result](t)
	res.Outcome, res.Duration = guard.OutcomeFailed, 1500*time.Millisecond
	out := resultContent("sandbox-1", res)
	b, err := json.Marshal(out.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	rt := reflect.TypeFor[guard.Result]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if _, ok := keys[name]; !ok && name != "-" {
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
	if !reflect.DeepEqual(back, want) {
		t.Errorf("structured content reads back as %+v; want %+v", back, want)
	}
	if res.Files[0].Content == nil || res.Outputs[0].Data == nil {
		t.Errorf("resultContent changed the caller's files or outputs")
	}
	if len(out.Content) != 6 {
		t.Errorf("content has %d parts; want summary, stdout, stderr, the left-out output named, the outputs' truncation said and one file", len(out.Content))
	}
}

// The model reads the summary line: a result of edited code says so, naming the editor.
func TestResultSummarySaysTheCodeWasEdited(t *testing.T) {
	res := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Edit: &guard.Edit{Editor: "alice", OriginalDigest: "sha256:aa", Digest: "sha256:bb"}}
	out := resultContent("sandbox-1", res)
	text := out.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "reviewer alice's edit") || !strings.Contains(text, "sha256:aa") || !strings.Contains(text, "sha256:bb") {
		t.Errorf("summary %q; want it to say alice edited the code, with both digests", text)
	}
	res.Edit = nil
	if text := resultContent("sandbox-1", res).Content[0].(*mcp.TextContent).Text; strings.Contains(text, "edit") {
		t.Errorf("summary of an unedited run %q mentions an edit", text)
	}
}

// The model reads the summary line: a result that reached its run late says so, with the kind
// of timeout.
func TestResultSummarySaysTheResultWasRecovered(t *testing.T) {
	res := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Recovered: &guard.Recovered{How: guard.RecoveredLateResult, ActivityID: "7", Timeout: "heartbeat"}}
	if text := resultContent("sandbox-1", res).Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "recovered late (after a heartbeat timeout)") {
		t.Errorf("summary %q; want it to say the result was recovered late", text)
	}
	res.Recovered = nil
	if text := resultContent("sandbox-1", res).Content[0].(*mcp.TextContent).Text; strings.Contains(text, "recovered") {
		t.Errorf("summary of a result in time %q mentions a recovery", text)
	}
}
