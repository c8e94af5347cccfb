//go:build integration

package workflows_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// sessionWorkers starts a workflow-and-sandbox worker on it.queue around b and the host's own
// worker on hostQueue, as worker/service does.
func (it *itest) sessionWorkers(b guard.Backend, hostQueue string) *activities.Activities {
	it.t.Helper()
	return it.sessionWorkersWith(b, hostQueue, nil)
}

// sessionWorkersWith is sessionWorkers with mod applied to the activities' configuration.
func (it *itest) sessionWorkersWith(b guard.Backend, hostQueue string, mod func(*activities.Config)) *activities.Activities {
	it.t.Helper()
	cfg := integrationConfig(b, it.sink, it.reviewers)
	cfg.HostTaskQueue = hostQueue
	if mod != nil {
		mod(&cfg)
	}
	acts, err := activities.New(cfg)
	if err != nil {
		it.t.Fatal(err)
	}
	it.ts.NewWorkerWithOptions(it.queue, func(r worker.Registry) {
		workflows.Register(r)
		acts.Register(r)
	}, worker.Options{})
	it.ts.NewWorkerWithOptions(hostQueue, func(r worker.Registry) { acts.RegisterHost(r) }, worker.Options{})
	return acts
}

func (it *itest) startSession(id string, req guard.SessionRequest) client.WorkflowRun {
	it.t.Helper()
	run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: it.queue},
		contract.SessionWorkflowName, contract.SessionInput{Request: req})
	if err != nil {
		it.t.Fatalf("start session %s: %v", id, err)
	}
	return run
}

// sessionUpdate sends an update to the session and decodes its result into out.
func (it *itest) sessionUpdate(id, name string, arg, out any) error {
	h, err := it.c.UpdateWorkflow(it.ctx(30*time.Second), client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(it.ctx(30*time.Second), out)
}

func (it *itest) sessionStatus(id string) contract.SessionStatus {
	it.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := it.c.QueryWorkflow(it.ctx(10*time.Second), id, "", contract.QuerySessionStatus)
		var st contract.SessionStatus
		if err == nil && v.Get(&st) == nil && st.State == contract.SessionOpen {
			return st
		}
		if time.Now().After(deadline) {
			it.t.Fatalf("session %s never opened (last %+v, %v)", id, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cell submits code, has alice approve it for the session as its status shows it, and waits
// for its end.
func (it *itest) cell(id, code string) contract.CellStatus {
	it.t.Helper()
	st := it.sessionStatus(id)
	var sub contract.CellSubmitted
	if err := it.sessionUpdate(id, contract.UpdateSubmitCell, contract.CellRequest{Code: code}, &sub); err != nil {
		it.t.Fatalf("submit %q: %v", code, err)
	}
	d := it.alice.Decision(it.t, reviewertest.Fields(st.WorkflowID, st.RunID, sub.Digest, st.SandboxTaskQueue, true))
	var dec contract.DecideResult
	if err := it.sessionUpdate(id, contract.UpdateDecideCell, contract.CellDecision{Cell: sub.Cell, Decision: d}, &dec); err != nil {
		it.t.Fatalf("approve cell %d: %v", sub.Cell, err)
	}
	var cs contract.CellStatus
	if err := it.sessionUpdate(id, contract.UpdateAwaitCell, contract.AwaitCell{Cell: sub.Cell}, &cs); err != nil {
		it.t.Fatalf("await cell %d: %v", sub.Cell, err)
	}
	return cs
}

// TestIntegrationSession runs a session on a real server: two cells in one sandbox on the host
// queue, each claimed in the history, then closed (the hold cancelled, the sandbox removed).
// With SANDBOXFLOW_RECORD_HISTORY=1 it re-records testdata/session_signed.json.
func TestIntegrationSession(t *testing.T) {
	it := newITest(t)
	b := &sessiontest.Backend{}
	hostQueue := it.queue + "-host-test"
	acts := it.sessionWorkers(b, hostQueue)
	const id = "recorded-session" // workflows.recordedSessionID
	run := it.startSession(id, guard.SessionRequest{Languages: []string{guard.Python}})
	if st := it.sessionStatus(id); st.SandboxTaskQueue != hostQueue {
		t.Fatalf("the session's host queue is %q; want %q", st.SandboxTaskQueue, hostQueue)
	}
	// A decision signed for another run is refused by the validator.
	st := it.sessionStatus(id)
	var sub contract.CellSubmitted
	if err := it.sessionUpdate(id, contract.UpdateSubmitCell, contract.CellRequest{Code: "x = 41"}, &sub); err != nil {
		t.Fatal(err)
	}
	other := it.alice.Decision(t, reviewertest.Fields(st.WorkflowID, uuid.NewString(), sub.Digest, st.SandboxTaskQueue, true))
	var dec contract.DecideResult
	if err := it.sessionUpdate(id, contract.UpdateDecideCell, contract.CellDecision{Cell: 1, Decision: other}, &dec); err == nil {
		t.Fatal("a decision for another run was accepted")
	}
	d := it.alice.Decision(t, reviewertest.Fields(st.WorkflowID, st.RunID, sub.Digest, st.SandboxTaskQueue, true))
	if err := it.sessionUpdate(id, contract.UpdateDecideCell, contract.CellDecision{Cell: 1, Decision: d}, &dec); err != nil {
		t.Fatal(err)
	}
	var c1 contract.CellStatus
	if err := it.sessionUpdate(id, contract.UpdateAwaitCell, contract.AwaitCell{Cell: 1}, &c1); err != nil || c1.State != contract.StatusSucceeded {
		t.Fatalf("cell 1: %+v, %v; want succeeded", c1, err)
	}
	c2 := it.cell(id, "print(x + 1)")
	if c2.State != contract.StatusSucceeded || c2.Chain != guard.ChainNext(c1.Chain, c1.Digest, guard.ResultDigest(*c1.Result)) {
		t.Fatalf("cell 2: %s over chain %s; want succeeded over cell 1's chain", c2.State, c2.Chain)
	}
	var closed contract.SessionStatus
	if err := it.sessionUpdate(id, contract.UpdateCloseSession, contract.CloseSession{Reason: "done"}, &closed); err != nil {
		t.Fatal(err)
	}
	var res contract.SessionResult
	if err := run.Get(it.ctx(30*time.Second), &res); err != nil || res.End != contract.EndClosed || len(res.Cells) != 2 {
		t.Fatalf("result %+v, %v; want closed with 2 cells", res, err)
	}
	boxes := b.Sandboxes()
	if len(boxes) != 1 || len(boxes[0].Ran()) != 2 || !boxes[0].Closed() || acts.OpenSessions() != 0 {
		t.Fatalf("%d sandboxes, closed %v, %d still open; want one that ran 2 cells, closed", len(boxes), len(boxes) == 1 && boxes[0].Closed(), acts.OpenSessions())
	}
	events := it.history(id)
	var claims int
	for _, e := range events {
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == contract.SignalSandboxClaim {
			claims++
		}
	}
	if claims != 2 {
		t.Errorf("%d claims in the history; want 2 (one per cell)", claims)
	}
	if os.Getenv(envRecordHistory) == "1" {
		data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "session_signed.json"), append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %d events", len(events))
	}
}

// TestIntegrationSessionResetRunsNoCellAgain resets a session that ran a cell to the workflow
// task after its sandbox opened: the new run has no sandbox on the host (it was kept for the old
// run id), so it ends lost, and no cell runs again (counted outside the sandbox).
func TestIntegrationSessionResetRunsNoCellAgain(t *testing.T) {
	it := newITest(t)
	b := &sessiontest.Backend{}
	it.sessionWorkers(b, it.queue+"-host-reset")
	id := "it-session-reset-" + uuid.NewString()[:8]
	run := it.startSession(id, guard.SessionRequest{})
	if cs := it.cell(id, "x = 1"); cs.State != contract.StatusSucceeded {
		t.Fatalf("cell 1: %s", cs.State)
	}
	// The first workflow task completed after SessionOpen's result.
	var point int64
	opened := false
	for _, e := range it.history(id) {
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && !opened {
			opened = true
			continue
		}
		if opened && e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			point = e.GetEventId()
			break
		}
	}
	if point == 0 {
		t.Fatal("no workflow task after the sandbox opened")
	}
	newRun := it.resetTo(id, run.GetRunID(), point)
	var res contract.SessionResult
	err := it.c.GetWorkflow(it.ctx(time.Minute), id, newRun).Get(it.ctx(time.Minute), &res)
	if guard.TypeOf(contract.FromFailure(err)) != guard.TypeSandboxLost {
		t.Fatalf("the reset run ended with %+v, %v; want a SandboxLost (its sandbox is not on the host)", res, err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := b.Cells(); n != 1 || len(b.Sandboxes()) != 1 {
		t.Fatalf("%d cells ran in %d sandboxes after the reset; want 1 in 1", n, len(b.Sandboxes()))
	}
}

// A namespace writer's own "Session" worker opens a sandbox, waits for the reviewer's genuine
// signed approval of cell 1, then schedules the cell's activity twice at once and once more
// after both ended, on the real host queue. The cell runs once (counted outside the sandbox).
func TestIntegrationRogueSessionCannotRunACellTwice(t *testing.T) {
	it := newITest(t)
	b := &sessiontest.Backend{}
	hostQueue := it.queue + "-host-rogue"
	it.sessionWorkers(b, hostQueue)
	policy := integrationConfig(nil, nil, "").Policy
	s, err := policy.CheckSession(guard.SessionRequest{}, sessiontest.Name)
	if err != nil {
		t.Fatal(err)
	}
	cell, err := policy.CheckCell(s, 1, "", "print('once')")
	if err != nil {
		t.Fatal(err)
	}
	chain := guard.ChainStart(s.Digest)
	rogue := func(ctx workflow.Context, _ contract.SessionInput) ([]string, error) {
		octx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: it.queue, StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var opened contract.SessionOpened
		if err := workflow.ExecuteActivity(octx, contract.SessionOpenActivityName, contract.SessionOpenInput{Session: s}).Get(octx, &opened); err != nil {
			return nil, err
		}
		var d contract.Decision
		workflow.GetSignalChannel(ctx, contract.SignalApproval).Receive(ctx, &d)
		in := contract.CellRunInput{Cell: cell, Chain: chain, Decision: d}
		cctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: opened.HostTaskQueue, StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		first := workflow.ExecuteActivity(cctx, contract.SessionCellActivityName, in)
		second := workflow.ExecuteActivity(cctx, contract.SessionCellActivityName, in)
		_ = first.Get(ctx, nil)
		_ = second.Get(ctx, nil)
		third := workflow.ExecuteActivity(cctx, contract.SessionCellActivityName, in)
		var out []string
		for _, f := range []workflow.Future{first, second, third} {
			err := f.Get(ctx, nil)
			out = append(out, guard.TypeOf(contract.FromFailure(err)))
		}
		return out, nil
	}
	const rogueQueue = "sandboxflow-it-rogue-session"
	it.ts.NewWorker(rogueQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.SessionWorkflowName})
	})
	id := "it-rogue-session-" + uuid.NewString()[:8]
	run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: rogueQueue},
		contract.SessionWorkflowName, contract.SessionInput{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(b.Sandboxes()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// The reviewer genuinely approves cell 1 of this run, on this host.
	d := it.alice.Decision(t, reviewertest.Fields(id, run.GetRunID(), guard.CellDigest(s.Digest, 1, cell.CodeDigest, chain), hostQueue, true))
	it.signal(id, d)
	var outcomes []string
	if err := run.Get(it.ctx(time.Minute), &outcomes); err != nil {
		t.Fatal(err)
	}
	ran, refused := 0, 0
	for _, o := range outcomes {
		switch o {
		case "":
			ran++
		case guard.TypeApprovalRefused:
			refused++
		}
	}
	if ran != 1 || refused != 2 || b.Cells() != 1 {
		t.Fatalf("outcomes %q, %d cells ran; want one run and two ApprovalRefused, 1 cell", outcomes, b.Cells())
	}
}
