//go:build integration

package mcpserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
)

// A run_cell call's progress notifications carry the cell's output while it runs, escaped, in a
// real Docker sandbox; the result follows.
func TestIntegrationMCPCellLiveOutput(t *testing.T) {
	e := sessionenv.Setup(t)
	cmd := exec.Command(e.Starter, "mcp", "--address", e.Address, "--namespace", e.Namespace, "--task-queue", e.TaskQueue,
		"--mcp-wait", "2m", "--progress-interval", "5s")
	cmd.Stderr = os.Stderr
	cs, p := connect(t, &mcp.CommandTransport{Command: cmd})
	open := <-call(cs, "open_session", map[string]any{"max_cells": 2})
	var opened struct {
		SessionID string `json:"session_id"`
	}
	if b, _ := json.Marshal(open.StructuredContent); open.IsError || json.Unmarshal(b, &opened) != nil || opened.SessionID == "" {
		t.Fatalf("open_session: %s", texts(open))
	}
	ch := call(cs, "run_cell", map[string]any{"session_id": opened.SessionID,
		"code": "import time\nfor i in range(6):\n    print('cell says', i, '\\x1b]0;t\\x07', flush=True)\n    time.sleep(0.3)\n"})
	sessionenv.Decide(t, e, opened.SessionID, true)
	res := <-ch
	if res.IsError || !strings.Contains(texts(res), "cell says 5") {
		t.Fatalf("run_cell: %s", texts(res))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var live []string
	for _, m := range p.msgs {
		if strings.HasPrefix(m, "live stdout (unsigned): ") {
			live = append(live, m)
		}
	}
	all := strings.Join(live, "")
	if len(live) < 2 || !strings.Contains(all, `cell says 0 \x1b]0;t\x07`) || strings.ContainsAny(all, "\x1b\x07") {
		t.Errorf("%d output notifications %q; want several, the escape sequence as escaped text", len(live), all)
	}
	<-call(cs, "close_session", map[string]any{"session_id": opened.SessionID})
}
