//go:build integration

package workflows_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
)

// An orchestrator pushes cells where none fits, on a real server: five submits at once (one is
// accepted), a submit while cell 1 waits, one while it runs, one past the session's two cells
// (after it ended max_cells), and one after an orchestrator closed another session. Each extra
// submit is a ToolUsageError, and only the two accepted cells ran.
func TestIntegrationSessionOrchestratorCannotCrowdCells(t *testing.T) {
	it := newITest(t)
	release := make(chan struct{})
	running := make(chan int, 4)
	b := &sessiontest.Backend{Result: func(cell guard.Cell, _ []guard.Cell) guard.Result {
		running <- cell.Index
		<-release
		return guard.Result{Stdout: []byte("done\n")}
	}}
	it.sessionWorkers(b, it.queue+"-host-crowd")
	id := "it-session-crowd-" + uuid.NewString()[:8]
	run := it.startSession(id, guard.SessionRequest{MaxCells: 2})
	st := it.sessionStatus(id)
	submit := func(code string) (contract.CellSubmitted, error) {
		var sub contract.CellSubmitted
		err := it.sessionUpdate(id, contract.UpdateSubmitCell, contract.CellRequest{Code: code}, &sub)
		return sub, err
	}
	refused := func(what string, err error) {
		t.Helper()
		if guard.TypeOf(contract.FromFailure(err)) != guard.TypeToolUsageError {
			t.Fatalf("a submit %s: %v; want a ToolUsageError", what, err)
		}
	}
	// Five at once.
	var wg sync.WaitGroup
	subs, errs := make([]contract.CellSubmitted, 5), make([]error, 5)
	for i := range 5 {
		wg.Go(func() { subs[i], errs[i] = submit("print('at once')") })
	}
	wg.Wait()
	accepted := 0
	var first contract.CellSubmitted
	for i, err := range errs {
		if err == nil {
			accepted++
			first = subs[i]
			continue
		}
		refused("at the same time as another", err)
	}
	if accepted != 1 || first.Cell != 1 {
		t.Fatalf("%d of five submits at once were accepted (%+v); want one, cell 1", accepted, first)
	}
	_, err := submit("print('while 1 waits')")
	refused("while cell 1 waits", err)
	approve := func(sub contract.CellSubmitted) {
		t.Helper()
		d := it.alice.Decision(t, reviewertest.Fields(st.WorkflowID, st.RunID, sub.Digest, st.SandboxTaskQueue, true))
		var dec contract.DecideResult
		if err := it.sessionUpdate(id, contract.UpdateDecideCell, contract.CellDecision{Cell: sub.Cell, Decision: d}, &dec); err != nil {
			t.Fatalf("approve cell %d: %v", sub.Cell, err)
		}
	}
	approve(first)
	if n := <-running; n != 1 {
		t.Fatalf("cell %d runs; want 1", n)
	}
	_, err = submit("print('while 1 runs')")
	refused("while cell 1 runs", err)
	release <- struct{}{}
	var cs contract.CellStatus
	if err := it.sessionUpdate(id, contract.UpdateAwaitCell, contract.AwaitCell{Cell: 1}, &cs); err != nil || cs.State != contract.StatusSucceeded {
		t.Fatalf("cell 1: %s, %v", cs.State, err)
	}
	st = it.sessionStatus(id)
	second, err := submit("print('two')")
	if err != nil {
		t.Fatal(err)
	}
	approve(second)
	<-running
	release <- struct{}{}
	var res contract.SessionResult
	if err := run.Get(it.ctx(time.Minute), &res); err != nil || res.End != contract.EndMaxCells {
		t.Fatalf("the session ended %q, %v; want max_cells", res.End, err)
	}
	_, err = submit("print('three')")
	if err == nil {
		t.Fatal("a third cell was accepted in a two-cell session")
	}

	closedID := "it-session-crowd-closed-" + uuid.NewString()[:8]
	it.startSession(closedID, guard.SessionRequest{})
	it.sessionStatus(closedID)
	var closed contract.SessionStatus
	if err := it.sessionUpdate(closedID, contract.UpdateCloseSession, contract.CloseSession{Reason: "done"}, &closed); err != nil {
		t.Fatal(err)
	}
	var sub contract.CellSubmitted
	if err := it.sessionUpdate(closedID, contract.UpdateSubmitCell, contract.CellRequest{Code: "print('late')"}, &sub); err == nil {
		t.Fatalf("a cell was accepted after close: %+v", sub)
	}
	if n := b.Cells(); n != 2 {
		t.Fatalf("%d cells ran; want 2", n)
	}
}
