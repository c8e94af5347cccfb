//go:build integration

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
)

// TestIntegrationCancelCellThroughStarter: `starter cancel SESSION --cell N` stops a running cell
// in a real Docker sandbox: the cell ends cancelled with the output it printed before, the
// container lives on, and the next cell runs in it (a fresh interpreter, said as state_reset).
func TestIntegrationCancelCellThroughStarter(t *testing.T) {
	e := sessionenv.Setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := binary(t, e, "", "session", "open", "--max-cells", "5", "--idle-timeout", "5m", "--lifetime", "10m")
	var opened client.SessionStarted
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &opened) != nil {
		t.Fatalf("session open: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	id := opened.WorkflowID
	submit := func(code string) contract.CellSubmitted {
		t.Helper()
		r := binary(t, e, "", "session", "cell", id, "--code", code)
		var sub contract.CellSubmitted
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &sub) != nil || sub.Cell == 0 {
			t.Fatalf("session cell: exit %d, %s %s", r.code, r.stdout, r.stderr)
		}
		return sub
	}

	c1 := submit("import time\nprint('started', flush=True)\ntime.sleep(120)\nprint('never')\n")
	if r := binary(t, e, "", "approve", id, "--cell", "1"); r.code != 0 {
		t.Fatalf("approve --cell 1: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	for {
		live, err := e.Client.ReadLive(ctx, id, c1.Cell)
		if err == nil && live.Output != nil && strings.Contains(string(live.Output.Stdout.Bytes), "started") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("cell 1 never printed: %+v, %v", live, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r = binary(t, e, "", "cancel", id, "--cell", "1", "--by", "agent-7", "--reason", "too slow", "--wait")
	var res guard.Result
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("cancel --cell 1 --wait: exit %d, %s %s; want one document, the result", r.code, r.stdout, r.stderr)
	}
	// Who cancelled a cell is in the session's status (checked below), not in the result the
	// host signed.
	if res.Outcome != guard.OutcomeCancelled || string(res.Stdout) != "started\n" || res.Receipt == nil {
		t.Errorf("cell 1: outcome %s, stdout %q, receipt %v; want cancelled with the output printed before, signed", res.Outcome, res.Stdout, res.Receipt != nil)
	}

	submit("print('next')\n")
	r = binary(t, e, "", "approve", id, "--cell", "2", "--wait")
	var next guard.Result
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &next) != nil {
		t.Fatalf("approve --cell 2 --wait: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if !next.OK || string(next.Stdout) != "next\n" || !next.StateReset {
		t.Errorf("cell 2 after the cancel: ok %t, stdout %q, state_reset %t; want ok, next, a fresh interpreter", next.OK, next.Stdout, next.StateReset)
	}
	st, err := e.Client.SessionStatus(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c := st.Cells[0]; c.State != contract.StatusCancelled || c.Cancel == nil || c.Cancel.By != "agent-7" {
		t.Errorf("cell 1 in the status: %s, cancel %+v; want cancelled by agent-7", c.State, c.Cancel)
	}
	if r := binary(t, e, "", "cancel", id, "--cell", "1"); r.code == 0 || !strings.Contains(r.stdout, client.TypeCancelRefused) {
		t.Errorf("a second cancel of cell 1: exit %d, %s %s; want it refused", r.code, r.stdout, r.stderr)
	}
	if r := binary(t, e, "", "session", "close", id); r.code != 0 {
		t.Errorf("session close: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
}
