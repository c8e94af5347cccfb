package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/guard/human"
)

// Names of the session tools (issue 28).
const (
	OpenSessionToolName  = "open_session"
	RunCellToolName      = "run_cell"
	CellStatusToolName   = "cell_status"
	CloseSessionToolName = "close_session"
)

// OpenSessionArguments are what a model may choose of a session: how long it lives, how long it
// may stay idle and how many cells it runs, each within the workers' policy, and input files
// written into /work when the sandbox opens (added to the operator's, as for run_code). Every
// other setting (languages, limits, network, egress, env, secrets) is the operator's.
type OpenSessionArguments struct {
	Lifetime    string                      `json:"lifetime,omitempty"`
	IdleTimeout string                      `json:"idle_timeout,omitempty"`
	MaxCells    int                         `json:"max_cells,omitempty"`
	InputFiles  map[string]client.InputFile `json:"input_files,omitempty"`
	// Packages is a lock the model asks for (client.WithPackages), reviewed with the settings.
	Packages string `json:"packages,omitempty"`
}

// RunCellArguments are a run_cell call's: the session, the cell's code and, where more than one
// is offered, its language.
type RunCellArguments struct {
	SessionID string `json:"session_id"`
	Code      string `json:"code"`
	Language  string `json:"language,omitempty"`
	// RequestID is an idempotency key (contract.CellRequest.RequestID): a run_cell retried with
	// the same one waits for the cell the first call submitted instead of submitting another.
	RequestID string `json:"request_id,omitempty"`
	// Retries is the earlier cell this one retries (contract.CellRequest.Retries): its reviewer
	// sees the diff against that cell.
	Retries int `json:"retries,omitempty"`
	// Packages is a lock of packages the cell adds to the session's (contract.CellRequest.Packages),
	// approved with the cell.
	Packages string `json:"packages,omitempty"`
}

// CellStatusArguments name one cell of a session.
type CellStatusArguments struct {
	SessionID string `json:"session_id"`
	Cell      int    `json:"cell"`
	// WaitSeconds is how long to wait for the cell to end before answering: 0 (the default)
	// answers at once, at most MaxStatusWaitSeconds.
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// CloseSessionArguments name the session to close.
type CloseSessionArguments struct {
	SessionID string `json:"session_id"`
}

// SessionOpened is open_session's structured content.
type SessionOpened struct {
	SessionID      string   `json:"session_id"`
	SettingsDigest string   `json:"settings_digest"`
	Languages      []string `json:"languages"`
	Lifetime       string   `json:"lifetime"`
	IdleTimeout    string   `json:"idle_timeout"`
	MaxCells       int      `json:"max_cells"`
}

// CellSummary is one cell as close_session lists it: its index, language, state, digests, who
// decided, and its result without file contents (nil when it did not run).
type CellSummary struct {
	Cell       int           `json:"cell"`
	Language   string        `json:"language"`
	State      string        `json:"state"`
	CodeDigest string        `json:"code_digest"`
	Digest     string        `json:"digest"`
	Reviewer   string        `json:"reviewer,omitempty"`
	Error      string        `json:"error,omitempty"`
	Result     *guard.Result `json:"result,omitempty"`
}

// SessionClosed is close_session's structured content.
type SessionClosed struct {
	SessionID string        `json:"session_id"`
	End       string        `json:"end"`
	Cells     []CellSummary `json:"cells"`
}

// sessionTools adds open_session, run_cell, cell_status and close_session.
func (s *Server) sessionTools() {
	langs := strings.Join(s.cfg.Languages, " or ")
	cellProps := map[string]any{
		"session_id": map[string]any{"type": "string", "description": "The session's id, as open_session returned it."},
		"code":       map[string]any{"type": "string", "description": "The cell's code. Python cells share one interpreter: variables and imports of earlier cells are kept."},
		"request_id": map[string]any{"type": "string", "maxLength": contract.MaxRequestIDBytes,
			"description": "Optional idempotency key: a call retried with the same one gets the cell the first call submitted (and its result), never a second cell."},
		"retries": map[string]any{"type": "integer", "minimum": 1,
			"description": "Optional: the earlier cell this one retries, one that was denied or failed; the reviewer sees what changed since it."},
		"packages": client.PackagesSchema("this cell adds to the session's (never another version of one the session has)"),
	}
	cellRequired := []string{"session_id", "code"}
	if len(s.cfg.Languages) > 1 {
		cellProps["language"] = map[string]any{"type": "string", "enum": s.cfg.Languages, "description": "The cell's language."}
		cellRequired = append(cellRequired, "language")
	}
	durationProp := func(what string) map[string]any {
		return map[string]any{"type": "string", "pattern": durationPattern, "description": what + ", as a Go duration such as \"30m\". Optional: the workers' cap."}
	}
	tools := []struct {
		tool    *mcp.Tool
		handler mcp.ToolHandler
	}{
		{&mcp.Tool{
			Name: OpenSessionToolName,
			Description: fmt.Sprintf("Open a session: one sandbox for this task whose state lives across cells (%s). "+
				"Python cells run in one interpreter, so variables, imports and files are kept; sh cells run in a fresh shell each; /work is kept for both. "+
				"A person approves every cell before it runs, having read every earlier cell and what it printed. Returns the session's id for run_cell.", langs),
			InputSchema: object(map[string]any{
				"lifetime":     durationProp("How long the session may live"),
				"idle_timeout": durationProp("How long it may wait for a cell"),
				"max_cells":    map[string]any{"type": "integer", "minimum": 1, "description": "How many cells it may run, denied ones included. Optional: the workers' cap."},
				"input_files":  client.InputFilesSchema(),
				"packages":     client.PackagesSchema("the session's cells"),
			}, nil),
		}, s.openSession},
		{&mcp.Tool{
			Name: RunCellToolName,
			Description: "Run one cell of code in an open session and get back its exit code, stdout, stderr, the files it created or changed, and state_reset " +
				"(true when an earlier cell killed the interpreter and this one started a fresh one: variables and imports are gone, files are kept). " +
				"A person reviews and approves the cell first, so it may take a while; a denial comes back as an error and the session stays open. A timeout is a result.",
			InputSchema: object(cellProps, cellRequired),
		}, s.runCell},
		{&mcp.Tool{
			Name:        CellStatusToolName,
			Description: "Read a cell that was still waiting for approval when run_cell returned: its state, or its result once it ran.",
			InputSchema: object(map[string]any{
				"session_id":   map[string]any{"type": "string", "description": "The session's id."},
				"cell":         map[string]any{"type": "integer", "minimum": 1, "description": "The cell's number, as run_cell returned it."},
				"wait_seconds": waitSecondsProp("the cell"),
			}, []string{"session_id", "cell"}),
		}, s.cellStatus},
		{&mcp.Tool{
			Name:        CloseSessionToolName,
			Description: "Close a session: its sandbox and everything in it are removed. Returns every cell with its state and result.",
			InputSchema: object(map[string]any{
				"session_id": map[string]any{"type": "string", "description": "The session's id."},
			}, []string{"session_id"}),
		}, s.closeSession},
	}
	for _, t := range tools {
		s.mcp.AddTool(t.tool, t.handler)
	}
}

// durationPattern is a Go duration, as the session tools read one.
const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

// object is a JSON Schema of an object with props, the required ones, and nothing else.
func object(props map[string]any, required []string) map[string]any {
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}
	return schema
}

// strictly decodes a tool's arguments, refusing unknown fields, as a ToolUsageError the model
// can correct.
func strictly(tool string, raw json.RawMessage, v any, want string) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &guard.ToolUsageError{Msg: fmt.Sprintf("%s arguments: %v (want %s)", tool, err, want)}
	}
	return nil
}

// sessionRequest is the operator's settings with what the model chose of the session.
func (s *Server) sessionRequest(a OpenSessionArguments) (guard.SessionRequest, error) {
	b := s.cfg.Base
	req := guard.SessionRequest{
		Languages: s.cfg.Languages, Settings: b.Settings, MaxCells: a.MaxCells,
	}
	for _, d := range []struct {
		name string
		v    string
		to   *time.Duration
	}{{"lifetime", a.Lifetime, &req.Lifetime}, {"idle_timeout", a.IdleTimeout, &req.IdleTimeout}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return req, &guard.ToolUsageError{Msg: fmt.Sprintf("open_session: %s %q is not a positive duration such as \"30m\"", d.name, d.v)}
		}
		*d.to = v
	}
	if a.MaxCells < 0 {
		return req, &guard.ToolUsageError{Msg: fmt.Sprintf("open_session: max_cells %d: want 1 or more", a.MaxCells)}
	}
	files, err := client.WithInputFiles(b.Files, a.InputFiles)
	if err != nil {
		return req, err
	}
	req.Files = files
	if req.Packages, err = client.WithPackages(b.Packages, a.Packages); err != nil {
		return req, err
	}
	return req, nil
}

func (s *Server) openSession(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a OpenSessionArguments
	if err := strictly(OpenSessionToolName, req.Params.Arguments, &a, `{"lifetime": "30m", "idle_timeout": "5m", "max_cells": 20, "input_files": {"name": "text"}, "packages": "name==1.0 --hash=sha256:..."}, each optional`); err != nil {
		return errorResult(err), nil
	}
	sreq, err := s.sessionRequest(a)
	if err != nil {
		return errorResult(err), nil
	}
	started, err := s.cfg.Client.OpenSession(ctx, sreq, client.SessionOptions{SandboxTaskQueue: s.cfg.SandboxTaskQueue})
	if err != nil {
		return errorResult(err), nil
	}
	out := SessionOpened{SessionID: started.WorkflowID, SettingsDigest: started.Digest, Languages: s.cfg.Languages}
	if st, err := s.cfg.Client.SessionStatus(ctx, started.WorkflowID); err == nil {
		out.Languages, out.MaxCells = st.Settings.Languages, st.Settings.MaxCells
		out.Lifetime, out.IdleTimeout = st.Settings.Lifetime.String(), st.Settings.IdleTimeout.String()
	}
	text := fmt.Sprintf("session %s is open (%s; at most %d cells, ends after %s, or %s without a cell). Run code in it with %s, close it with %s when done.",
		out.SessionID, strings.Join(out.Languages, ", "), out.MaxCells, out.Lifetime, out.IdleTimeout, RunCellToolName, CloseSessionToolName)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}, nil
}

func (s *Server) runCell(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a RunCellArguments
	if err := strictly(RunCellToolName, req.Params.Arguments, &a, `{"session_id": ..., "code": ...`+s.languageHint()+`}`); err != nil {
		return errorResult(err), nil
	}
	if err := s.checkLanguage(&a.Language); err != nil {
		return errorResult(err), nil
	}
	if err := checkSessionID(a.SessionID); err != nil {
		return errorResult(err), nil
	}
	sub, err := s.cfg.Client.SubmitCell(ctx, a.SessionID, contract.CellRequest{Code: a.Code, Language: a.Language, RequestID: a.RequestID, Retries: a.Retries, Packages: a.Packages,
		Metadata: guard.Metadata{Agent: s.cfg.Base.Metadata.Agent, RequestedBy: s.cfg.Base.Metadata.RequestedBy}})
	if err != nil {
		return errorResult(err), nil
	}
	return s.waitCell(ctx, req, a.SessionID, sub.Cell, sub.Digest, s.waitLimit(req))
}

// checkLanguage defaults an empty language to the only one offered and refuses one not offered.
func (s *Server) checkLanguage(lang *string) error {
	if *lang == "" && len(s.cfg.Languages) == 1 {
		*lang = s.cfg.Languages[0]
	}
	for _, l := range s.cfg.Languages {
		if *lang == l {
			return nil
		}
	}
	return &guard.ToolUsageError{Msg: fmt.Sprintf("language %q is not offered; use one of %s", *lang, strings.Join(s.cfg.Languages, ", "))}
}

func checkSessionID(id string) error {
	if !strings.HasPrefix(id, client.SessionIDPrefix) {
		return &guard.ToolUsageError{Msg: fmt.Sprintf("%q is not a session id: session ids start with %q (open_session returns one)", id, client.SessionIDPrefix)}
	}
	return nil
}

// waitCell waits for the cell to end up to limit (zero: until it ends), notifying progress, and
// returns its result, why it did not run, or "still waiting".
func (s *Server) waitCell(ctx context.Context, req *mcp.CallToolRequest, sessionID string, cell int, digest string, limit time.Duration) (*mcp.CallToolResult, error) {
	return waitWithProgress(ctx, s, req, limit, waited[contract.CellStatus]{
		await: func(ctx context.Context) (contract.CellStatus, error) {
			return s.cfg.Client.AwaitCell(ctx, sessionID, cell)
		},
		live:         &liveOutput{c: s.cfg.Client, id: sessionID, cell: cell},
		progress:     func(ctx context.Context) string { return s.cellMessage(ctx, sessionID, cell, digest) },
		stillWaiting: func(ctx context.Context) *mcp.CallToolResult { return s.cellStillWaiting(ctx, sessionID, cell, digest) },
		content: func(ctx context.Context, c contract.CellStatus) *mcp.CallToolResult {
			return s.cellContent(ctx, sessionID, c)
		},
		result: func(c contract.CellStatus) *guard.Result { return c.Result },
	})
}

// cellState reads the cell's state, or "" when the status cannot be read.
func (s *Server) cellState(ctx context.Context, sessionID string, cell int) string {
	st, err := s.cfg.Client.SessionStatus(ctx, sessionID)
	if err != nil {
		return ""
	}
	for _, c := range st.Cells {
		if c.Cell == cell {
			return c.State
		}
	}
	return ""
}

// cellMessage says what the cell waits for, with the inbox's address when one is configured.
func (s *Server) cellMessage(ctx context.Context, sessionID string, cell int, digest string) string {
	state := s.cellState(ctx, sessionID, cell)
	waiting := state == contract.StatusAwaitingApproval || state == ""
	return s.progressMessage(fmt.Sprintf("cell %d of session %s", cell, sessionID), digest, state, s.cellPage(sessionID, cell), waiting)
}

// cellStillWaiting is what run_cell returns when the cell outlived Config.Wait.
func (s *Server) cellStillWaiting(ctx context.Context, sessionID string, cell int, digest string) *mcp.CallToolResult {
	state := cmpOr(s.cellState(ctx, sessionID, cell), contract.StatusAwaitingApproval)
	text := fmt.Sprintf("%s: cell %d of session %s (digest %s) is %s. Call %s with {\"session_id\": %q, \"cell\": %d, \"wait_seconds\": %d} for its result: it returns as soon as the cell ends; run no other cell before it ended.",
		StillWaiting, cell, sessionID, digest, state, CellStatusToolName, sessionID, cell, MaxStatusWaitSeconds)
	return s.stillWaitingResult(text, s.cellPage(sessionID, cell), "", map[string]any{"session_id": sessionID, "cell": cell, "state": state, "digest": digest})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *Server) cellStatus(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a CellStatusArguments
	if err := strictly(CellStatusToolName, req.Params.Arguments, &a, `{"session_id": ..., "cell": N, "wait_seconds": 0..50}`); err != nil {
		return errorResult(err), nil
	}
	if err := checkSessionID(a.SessionID); err != nil {
		return errorResult(err), nil
	}
	wait, err := statusWait(CellStatusToolName, a.WaitSeconds)
	if err != nil {
		return errorResult(err), nil
	}
	st, err := s.cfg.Client.SessionStatus(ctx, a.SessionID)
	if err != nil {
		return errorResult(fmt.Errorf("mcpserver: status of %s: %w", a.SessionID, err)), nil
	}
	for _, c := range st.Cells {
		if c.Cell != a.Cell {
			continue
		}
		if !c.Final() {
			if wait > 0 {
				return s.waitCell(ctx, req, a.SessionID, c.Cell, c.Digest, wait)
			}
			if c.State == contract.StatusAwaitingApproval {
				return s.cellStillWaiting(ctx, a.SessionID, c.Cell, c.Digest), nil
			}
			label := fmt.Sprintf("cell %d of session %s", c.Cell, a.SessionID)
			return askAgainLater(label, c.State, map[string]any{"session_id": a.SessionID, "cell": c.Cell, "state": c.State, "digest": c.Digest}), nil
		}
		return s.cellContent(ctx, a.SessionID, c), nil
	}
	return errorResult(&guard.ToolUsageError{Msg: fmt.Sprintf("session %s has no cell %d", a.SessionID, a.Cell)}), nil
}

func (s *Server) closeSession(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a CloseSessionArguments
	if err := strictly(CloseSessionToolName, req.Params.Arguments, &a, `{"session_id": ...}`); err != nil {
		return errorResult(err), nil
	}
	if err := checkSessionID(a.SessionID); err != nil {
		return errorResult(err), nil
	}
	st, err := s.cfg.Client.CloseSession(ctx, a.SessionID, "closed by the agent (MCP close_session)")
	if err != nil {
		return errorResult(err), nil
	}
	return closedContent(a.SessionID, st), nil
}

// closedContent lists every cell of a closed session: one line each as text, the list as
// structured content (results without file contents).
func closedContent(sessionID string, st contract.SessionStatus) *mcp.CallToolResult {
	out := SessionClosed{SessionID: sessionID, End: st.End, Cells: []CellSummary{}}
	lines := []string{fmt.Sprintf("session %s is closed (%s): %d cell(s)", sessionID, cmpOr(st.End, st.State), len(st.Cells))}
	for _, c := range st.Cells {
		sum := CellSummary{Cell: c.Cell, Language: c.Language, State: c.State, CodeDigest: c.CodeDigest, Digest: c.Digest, Error: c.Error}
		if c.Decision != nil {
			sum.Reviewer = c.Decision.Reviewer
		}
		line := fmt.Sprintf("cell %d (%s): %s", c.Cell, c.Language, c.State)
		if c.Result != nil {
			r := withoutData(*c.Result)
			sum.Result = &r
			line += fmt.Sprintf(", exit code %d%s", r.ExitCode, human.ExitSource(r))
		}
		out.Cells = append(out.Cells, sum)
		lines = append(lines, line)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(lines, "\n")}}, StructuredContent: out}
}

// cellContent is an ended cell: its result as run_code gives a run's (with state_reset in the
// summary and in the structured content), once its receipt verified, or why it did not run (or
// why its result is refused) as an error.
func (s *Server) cellContent(ctx context.Context, sessionID string, c contract.CellStatus) *mcp.CallToolResult {
	res, err := s.cfg.Client.CellResult(ctx, sessionID, c)
	return cellResultContent(sessionID, c, res, err)
}

// cellResultContent is cellContent of a cell whose result, or the error in its place, was read.
func cellResultContent(sessionID string, c contract.CellStatus, res guard.Result, err error) *mcp.CallToolResult {
	if err != nil {
		r := errorResult(err)
		if c.State == contract.StatusDenied {
			r.Content = append(r.Content, &mcp.TextContent{Text: "The cell did not run; the session stays open: change the code and try run_cell again."})
		}
		return r
	}
	label := fmt.Sprintf("cell %d of session %s", c.Cell, sessionID) + human.ExitSource(res)
	if res.StateReset {
		label += " (state_reset: an earlier cell ended the interpreter, so this cell ran in a fresh one; variables and imports are gone, files are kept)"
	}
	return resultContentAt(label, fmt.Sprintf("sandboxflow://sessions/%s/cells/%d", url.PathEscape(sessionID), c.Cell), res)
}
