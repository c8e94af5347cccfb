//go:build integration

package inbox

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sandboxflow/sandboxflow/client"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
)

// TestTemporalSessionDoor drives the inbox's door to sessions (clientSessions, through the client) against a real
// Temporal server, with a Session workflow written here from the contract (its names, query,
// update and types; the product's workflow is issue 28's other part): a workflow worker that
// answers a status and records the decide-cell updates it gets. The door reads the status by
// the run id it described, the settings from the start event, lists the sessions whose
// SandboxStatus says a cell waits (and not a RunCode run that says the same), sends decide-cell
// to the run it read only, and refuses a workflow of another type. The session page and its
// decide endpoint, through this door, offer and send an approval that verifies for the cell.
func TestTemporalSessionDoor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts := devtest.Start(t)
	c := ts.GetDefaultClient()
	const queue = "sandboxflow-inbox-session-door"

	f := newSessionFixture(t, "session-door")
	f.threeCells()
	var (
		mu       sync.Mutex
		received = map[string][]contract.CellDecision{} // by run id
	)
	session := func(ctx workflow.Context, _ contract.SessionInput) error {
		info := workflow.GetInfo(ctx)
		st := f.status
		st.WorkflowID, st.RunID = info.WorkflowExecution.ID, info.WorkflowExecution.RunID
		if err := workflow.SetQueryHandler(ctx, contract.QuerySessionStatus, func() (contract.SessionStatus, error) { return st, nil }); err != nil {
			return err
		}
		if err := workflow.SetUpdateHandler(ctx, contract.UpdateDecideCell, func(ctx workflow.Context, d contract.CellDecision) (contract.DecideResult, error) {
			mu.Lock()
			received[info.WorkflowExecution.RunID] = append(received[info.WorkflowExecution.RunID], d)
			mu.Unlock()
			return contract.DecideResult{ApprovalID: d.Decision.ApprovalID, Approve: d.Decision.Approve, Reviewer: d.Decision.Reviewer, Digest: d.Decision.Digest, State: contract.StatusRunning}, nil
		}); err != nil {
			return err
		}
		if err := workflow.UpsertTypedSearchAttributes(ctx, contract.StatusKey.ValueSet(contract.StatusAwaitingApproval)); err != nil {
			return err
		}
		return workflow.Await(ctx, func() bool { return false })
	}
	// A RunCode run that waits: listed with the runs, never as a session.
	run := func(ctx workflow.Context, _ contract.Input) error {
		if err := workflow.UpsertTypedSearchAttributes(ctx, contract.StatusKey.ValueSet(contract.StatusAwaitingApproval)); err != nil {
			return err
		}
		return workflow.Await(ctx, func() bool { return false })
	}
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(session, workflow.RegisterOptions{Name: contract.SessionWorkflowName})
	w.RegisterWorkflowWithOptions(run, workflow.RegisterOptions{Name: contract.WorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	first, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: "session-door", TaskQueue: queue}, contract.SessionWorkflowName, f.input)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: "run-door", TaskQueue: queue}, contract.WorkflowName, contract.Input{}); err != nil {
		t.Fatal(err)
	}
	sc, err := client.New(client.Options{Temporal: c, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	door := clientSessions{c: sc}

	var si sessionInfo
	for {
		if si, err = door.ReadSession(ctx, "session-door"); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("ReadSession: %v", err)
	}
	if si.Status.RunID != first.GetRunID() || !si.Running || len(si.Status.Cells) != 3 || si.Status.Cells[0].Result == nil {
		t.Fatalf("ReadSession: run %s running %v, %d cells; want run %s, running, 3 cells with results", si.Status.RunID, si.Running, len(si.Status.Cells), first.GetRunID())
	}
	if err := checkCells(si.Status); err != nil {
		t.Errorf("the status read through Temporal does not check: %v", err)
	}
	var ns *notSessionError
	if _, err := door.ReadSession(ctx, "run-door"); !errors.As(err, &ns) {
		t.Errorf("ReadSession of a RunCode run: %v; want a notSessionError", err)
	}
	if _, err := door.SessionInput(ctx, "run-door", ""); !errors.As(err, &ns) {
		t.Errorf("SessionInput of a RunCode run: %v; want a notSessionError", err)
	}
	in, err := door.SessionInput(ctx, "session-door", si.Status.RunID)
	if err != nil || in.Request.Env["MODE"] != "dry run " || string(in.Request.Files["data.csv"]) != "a,b\n1,2\n" {
		t.Fatalf("SessionInput: %+v, %v; want the start's env and files", in.Request, err)
	}
	if err := shownSession(si.Status, in); err != nil {
		t.Errorf("the settings read through Temporal do not check: %v", err)
	}

	// Visibility is eventually consistent: the session comes within a few seconds.
	var listed []pendingSession
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if listed, err = door.PendingSessions(ctx); err == nil && len(listed) > 0 {
			break
		}
	}
	if err != nil || len(listed) != 1 || listed[0].WorkflowID != "session-door" || listed[0].RunID != first.GetRunID() {
		t.Fatalf("PendingSessions: %+v, %v; want session-door alone (not run-door)", listed, err)
	}

	// The page and the decide endpoint through this door.
	now := f.start.Add(5 * time.Minute)
	b := newSessionServer(t, door, now)
	_, page := b.get("/session/session-door")
	stmt, ok := statements(page)["approve"]
	if !ok {
		t.Fatalf("no approve statement on the page read through Temporal: %s", page)
	}
	cell3 := f.status.Cells[2]
	if resp := b.post("/session/session-door/decide", b.sign(stmt, true, 3, cell3.Digest, "")); resp.Code != http.StatusOK {
		t.Fatalf("approval: %d %s", resp.Code, resp.Body)
	}
	mu.Lock()
	got := received[first.GetRunID()]
	mu.Unlock()
	if len(got) != 1 || got[0].Cell != 3 || got[0].Decision.Digest != cell3.Digest {
		t.Fatalf("the session received %+v; want one decision for cell 3", got)
	}
	rv, err := approval.LoadReviewers(b.s.cfg.ReviewersPath)
	if err == nil {
		rv, err = rv.WithPasskeyOrigin(sessionTestOrigin)
	}
	if err != nil {
		t.Fatal(err)
	}
	d := got[0].Decision
	want := approval.Fields{Version: approval.StatementVersion, WorkflowID: "session-door", RunID: first.GetRunID(), Digest: cell3.Digest, Approve: true,
		ApprovalID: d.ApprovalID, SandboxTaskQueue: f.status.SandboxTaskQueue, Reviewer: "alice", Expires: d.Expires}
	if _, err := approval.Verify(rv, want, d.Proof(), now); err != nil {
		t.Errorf("the decision the session received does not verify for cell 3: %v", err)
	}

	// A new run of the same id: a decision pinned to the first run never reaches it.
	if err := c.TerminateWorkflow(ctx, "session-door", first.GetRunID(), "a new run"); err != nil {
		t.Fatal(err)
	}
	second, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: "session-door", TaskQueue: queue}, contract.SessionWorkflowName, f.input)
	if err != nil {
		t.Fatal(err)
	}
	// (A fresh update id: Temporal answers an update id it has seen with that update's outcome.)
	again := got[0]
	again.Decision.ApprovalID = uuid.NewString()
	if _, err := door.DecideCell(ctx, "session-door", first.GetRunID(), again); err == nil {
		t.Error("decide-cell to the terminated first run was accepted")
	}
	if _, err := door.DecideCell(ctx, "session-door", "", again); err == nil {
		t.Errorf("decide-cell without a run id: %v; want it refused", err)
	}
	mu.Lock()
	n := len(received[second.GetRunID()])
	mu.Unlock()
	if n != 0 {
		t.Errorf("the second run received %d decisions made for the first", n)
	}
}
