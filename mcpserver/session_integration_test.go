//go:build integration

package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
)

// TestIntegrationMCPSession drives a session through `starter mcp` with the Go MCP SDK against a
// real server, worker and Docker sandbox: open_session, three run_cell calls that keep state
// (the third ends the interpreter, the fourth says state_reset and still reads the file), a
// denied cell that leaves the session open, an sh cell reading the input file open_session was
// given, read by cell_status with wait_seconds while it waits and returned on approval (progress
// linking to the cell on its session's page), and close_session listing every cell.
func TestIntegrationMCPSession(t *testing.T) {
	e := sessionenv.Setup(t)
	cmd := exec.Command(e.Starter, "mcp", "--address", e.Address, "--namespace", e.Namespace, "--task-queue", e.TaskQueue,
		"--mcp-wait", "2m", "--progress-interval", "200ms", "--languages", "python,sh", "--inbox-url", "http://127.0.0.1:9/inbox")
	cmd.Stderr = os.Stderr
	cs, p := connect(t, &mcp.CommandTransport{Command: cmd})

	open := <-call(cs, "open_session", map[string]any{"max_cells": 8, "idle_timeout": "5m", "input_files": map[string]any{"seed.txt": "seeded"}})
	var opened struct {
		SessionID string   `json:"session_id"`
		Languages []string `json:"languages"`
		MaxCells  int      `json:"max_cells"`
	}
	if b, _ := json.Marshal(open.StructuredContent); open.IsError || json.Unmarshal(b, &opened) != nil || opened.SessionID == "" || opened.MaxCells != 8 {
		t.Fatalf("open_session: isError %t, %s, %+v", open.IsError, texts(open), open.StructuredContent)
	}
	id := opened.SessionID

	type cellOut struct {
		Stdout     string `json:"stdout"`
		ExitCode   int    `json:"exit_code"`
		StateReset bool   `json:"state_reset"`
		Files      []struct {
			Name string `json:"name"`
		} `json:"files"`
	}
	decoded := func(res *mcp.CallToolResult) cellOut {
		var out cellOut
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			_ = json.Unmarshal(b, &out)
		}
		return out
	}
	runCellArgs := func(args map[string]any, approve bool) (*mcp.CallToolResult, cellOut) {
		t.Helper()
		ch := call(cs, "run_cell", args)
		sessionenv.Decide(t, e, id, approve)
		res := <-ch
		return res, decoded(res)
	}
	runCell := func(code, lang string, approve bool) (*mcp.CallToolResult, cellOut) {
		t.Helper()
		return runCellArgs(map[string]any{"session_id": id, "code": code, "language": lang}, approve)
	}
	res, out := runCell("x = 41\nopen('kept.txt', 'w').write('kept')\n", "python", true)
	if res.IsError || len(out.Files) != 1 || out.Files[0].Name != "kept.txt" {
		t.Fatalf("cell 1: isError %t, %s, %+v; want kept.txt among its files", res.IsError, texts(res), out)
	}
	cell2 := map[string]any{"session_id": id, "code": "print(x + 1)\n", "language": "python", "request_id": "tool-call-2"}
	if res, out = runCellArgs(cell2, true); res.IsError || out.Stdout != "42\n" || out.StateReset {
		t.Errorf("cell 2: isError %t, %s, %+v; want 42 from cell 1's x", res.IsError, texts(res), out)
	}
	// The same call retried with its request_id (its answer lost) gets cell 2's result back,
	// without a second cell or a second decision.
	if res = <-call(cs, "run_cell", cell2); res.IsError || decoded(res).Stdout != "42\n" {
		t.Errorf("run_cell retried with its request_id: isError %t, %s; want cell 2's result", res.IsError, texts(res))
	}
	if res, _ = runCell("print('never')\n", "python", false); !res.IsError || !strings.Contains(texts(res), "ApprovalDenied") || !strings.Contains(texts(res), "stays open") {
		t.Errorf("denied cell: isError %t, %s; want ApprovalDenied, the session open", res.IsError, texts(res))
	}
	if res, out = runCell("import os\nos._exit(3)\n", "python", true); res.IsError || out.ExitCode != 3 {
		t.Errorf("cell that ends the interpreter: isError %t, %s, %+v; want exit code 3", res.IsError, texts(res), out)
	}
	if res, out = runCell("print(open('kept.txt').read(), 'x' in globals())\n", "python", true); res.IsError || !out.StateReset || out.Stdout != "kept False\n" ||
		!strings.Contains(texts(res), "state_reset") {
		t.Errorf("cell after the interpreter ended: isError %t, %s, %+v; want state_reset, the file kept, x gone", res.IsError, texts(res), out)
	}
	if res, out = runCell("cat kept.txt\n", "sh", true); res.IsError || out.Stdout != "kept" {
		t.Errorf("sh cell: isError %t, %s, %+v", res.IsError, texts(res), out)
	}

	// cell_status with wait_seconds, called while the cell waits, returns its result once it is
	// approved, as run_cell does; the file open_session was given is in /work.
	skip := p.count()
	ch := call(cs, "run_cell", map[string]any{"session_id": id, "code": "cat seed.txt\n", "language": "sh"})
	cell := sessionenv.WaitCell(t, e, id)
	status := callWith(cs, "cell_status", map[string]any{"session_id": id, "cell": cell, "wait_seconds": 45}, false)
	time.Sleep(time.Second)
	sessionenv.Decide(t, e, id, true)
	for name, res := range map[string]*mcp.CallToolResult{"run_cell": <-ch, "cell_status with wait_seconds": <-status} {
		if res.IsError || decoded(res).Stdout != "seeded" {
			t.Errorf("%s of the cell reading the input file: isError %t, %s; want \"seeded\"", name, res.IsError, texts(res))
		}
	}
	p.mu.Lock()
	msgs := strings.Join(p.msgs[skip:], "\n")
	p.mu.Unlock()
	if want := fmt.Sprintf("http://127.0.0.1:9/inbox/session/%s#cell-%d", id, cell); !strings.Contains(msgs, want) {
		t.Errorf("progress %q does not link to the cell's place %s", msgs, want)
	}

	closed := <-call(cs, "close_session", map[string]any{"session_id": id})
	var list struct {
		End   string `json:"end"`
		Cells []struct {
			Cell  int    `json:"cell"`
			State string `json:"state"`
		} `json:"cells"`
	}
	if b, _ := json.Marshal(closed.StructuredContent); closed.IsError || json.Unmarshal(b, &list) != nil || list.End != "closed" || len(list.Cells) != 7 || list.Cells[2].State != "denied" {
		t.Errorf("close_session: isError %t, %s, %+v; want 7 cells, the third denied", closed.IsError, texts(closed), closed.StructuredContent)
	}
}
