//go:build integration

package workflows_test

// Integration tests of quorums for sessions' cells (issue 32): a real server, the sessiontest
// backend's sandbox on a real sandbox host (its own host task queue), cells counted in the
// history's cell activities and the backend's cells.

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
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

// quorumSessionWorkers starts, as sessionWorkers does, a workflow-and-sandbox worker on it.queue
// and the host's worker on hostQueue, with a policy that needs quorum approvals of every cell.
func (it *itest) quorumSessionWorkers(b guard.Backend, hostQueue string, quorum int) {
	it.t.Helper()
	cfg := integrationConfig(b, it.sink, it.reviewers)
	cfg.HostTaskQueue = hostQueue
	cfg.Policy.Quorum = quorum
	acts, err := activities.New(cfg)
	if err != nil {
		it.t.Fatal(err)
	}
	it.ts.NewWorkerWithOptions(it.queue, func(r worker.Registry) {
		workflows.Register(r)
		acts.Register(r)
	}, worker.Options{})
	it.ts.NewWorkerWithOptions(hostQueue, func(r worker.Registry) { acts.RegisterHost(r) }, worker.Options{})
}

// countCellActivities counts the cell activities scheduled in a session's history.
func countCellActivities(events []*historypb.HistoryEvent) int {
	n := 0
	for _, e := range events {
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED &&
			e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.SessionCellActivityName {
			n++
		}
	}
	return n
}

// Under a quorum of 2, through a real server and sandbox host: one approval of a cell runs
// nothing (its answer says 1 of 2, the cell still waits, no cell activity is scheduled); the
// same reviewer again (a fresh approval id, or another of alice's keys) and one key signing as
// another principal are refused (duplicate_approver); a second reviewer's approval runs the
// cell once, and its result and receipt-bearing status name both approvals. A denial after one
// approval denies the next cell and nothing runs.
func TestIntegrationSessionQuorum(t *testing.T) {
	it := newITest(t)
	q := newQuorumReviewers(it)
	b := &sessiontest.Backend{}
	hostQueue := it.queue + "-host-quorum"
	it.quorumSessionWorkers(b, hostQueue, 2)
	const id = "it-session-quorum"
	run := it.startSession(id, guard.SessionRequest{Languages: []string{guard.Python}})
	st := it.sessionStatus(id)
	if st.Quorum != 2 {
		t.Fatalf("session quorum %d; want 2", st.Quorum)
	}
	var sub contract.CellSubmitted
	if err := it.sessionUpdate(id, contract.UpdateSubmitCell, contract.CellRequest{Code: "print('ran once')"}, &sub); err != nil {
		t.Fatal(err)
	}
	sign := func(r *reviewertest.Reviewer, principal, digest string, approve bool) contract.Decision {
		f := reviewertest.Fields(st.WorkflowID, st.RunID, digest, st.SandboxTaskQueue, approve)
		f.Reviewer = principal
		return r.Decision(t, f)
	}
	decideWait := func(cell int, d contract.Decision, wait bool) (contract.DecideResult, error) {
		var res contract.DecideResult
		err := it.sessionUpdate(id, contract.UpdateDecideCell, contract.CellDecision{Cell: cell, Decision: d, Wait: wait}, &res)
		return res, err
	}
	decide := func(cell int, d contract.Decision) (contract.DecideResult, error) { return decideWait(cell, d, false) }
	first := sign(q.multi, "carol", sub.Digest, true)
	// With wait, an approval that leaves the quorum short is answered at once, not held until
	// another reviewer decides.
	res, err := decideWait(1, first, true)
	if err != nil || res.State != contract.StatusAwaitingApproval || res.Approvals != 1 || res.Quorum != 2 || res.CellStatus != nil {
		t.Fatalf("carol's approval: %+v, %v; want accepted, 1 of 2, still waiting, no cell status", res, err)
	}
	time.Sleep(time.Second) // were a cell to be scheduled after one approval, it would be by now
	st = it.sessionStatus(id)
	if c := st.Cells[0]; c.State != contract.StatusAwaitingApproval || len(c.Approvals) != 1 || c.Decision != nil || c.Quorum != 2 {
		t.Fatalf("cell after one approval: %s, approvals %+v, decision %+v; want waiting on 1 of 2, no decision", c.State, c.Approvals, c.Decision)
	}
	if n := countCellActivities(it.history(id)); n != 0 || b.Cells() != 0 {
		t.Fatalf("after one approval of two: %d cell activities, %d cells ran; want none", n, b.Cells())
	}
	for _, tc := range []struct {
		name string
		d    contract.Decision
		why  string
	}{
		{"the same key and principal again", sign(q.multi, "carol", sub.Digest, true), "already approved by reviewer carol"},
		{"the same key as another principal", sign(q.multi, "ops", sub.Digest, true), "already approved by key"},
		{"the same approval again", first, "already approved by approval id"},
	} {
		_, err := decide(1, tc.d)
		wantRefused(t, tc.name, err, tc.why)
		if rej, ok := contract.RejectionOf(err); !ok || rej.Reason != contract.RejectDuplicate {
			t.Errorf("%s: rejection %v; want reason %s", tc.name, rej, contract.RejectDuplicate)
		}
	}
	res, err = decideWait(1, sign(q.bob, "bob", sub.Digest, true), true)
	if err != nil || res.State != contract.StatusRunning || res.Approvals != 2 || res.Quorum != 2 {
		t.Fatalf("bob's approval: %+v, %v; want accepted, 2 of 2, running", res, err)
	}
	if res.CellStatus == nil || res.CellStatus.State != contract.StatusSucceeded {
		t.Fatalf("bob's approval with wait: cell status %+v; want the cell's end, succeeded", res.CellStatus)
	}
	var c1 contract.CellStatus
	if err := it.sessionUpdate(id, contract.UpdateAwaitCell, contract.AwaitCell{Cell: 1}, &c1); err != nil || c1.State != contract.StatusSucceeded {
		t.Fatalf("cell 1: %+v, %v; want succeeded", c1, err)
	}
	if r := c1.Result; r == nil || r.ApprovalID != first.ApprovalID || len(r.Approvals) != 2 || r.Approvals[0].Reviewer != "carol" || r.Approvals[1].Reviewer != "bob" {
		t.Errorf("cell 1's result %+v; want carol's approval first, then bob's", r)
	}
	if n := countCellActivities(it.history(id)); n != 1 || b.Cells() != 1 {
		t.Errorf("%d cell activities, %d cells ran; want the cell run once", n, b.Cells())
	}

	// A denial after one approval denies the cell.
	if err := it.sessionUpdate(id, contract.UpdateSubmitCell, contract.CellRequest{Code: "print('never')"}, &sub); err != nil {
		t.Fatal(err)
	}
	if res, err := decide(2, sign(q.alice, "alice", sub.Digest, true)); err != nil || res.State != contract.StatusAwaitingApproval {
		t.Fatalf("alice's approval of cell 2: %+v, %v; want accepted, still waiting", res, err)
	}
	if res, err := decide(2, sign(q.bob, "bob", sub.Digest, false)); err != nil || res.State != contract.StatusDenied {
		t.Fatalf("bob's denial of cell 2: %+v, %v; want accepted, denied", res, err)
	}
	var closed contract.SessionStatus
	if err := it.sessionUpdate(id, contract.UpdateCloseSession, contract.CloseSession{}, &closed); err != nil {
		t.Fatal(err)
	}
	var out contract.SessionResult
	if err := run.Get(it.ctx(time.Minute), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Cells) != 2 || out.Cells[1].State != contract.StatusDenied || b.Cells() != 1 || countCellActivities(it.history(id)) != 1 {
		t.Errorf("result cells %+v, %d ran; want cell 2 denied and only cell 1 run", out.Cells, b.Cells())
	}
}

// A namespace writer's own "Session" workflow opens a sandbox on a host whose policy needs 2
// approvals of every cell and schedules a cell with alice's one approval, then with alice's
// approval twice: the host refuses both (ApprovalRefused, quorum) and runs nothing; alice's and
// bob's approvals run it.
func TestIntegrationHostQuorumRefusesACellsOneApproval(t *testing.T) {
	it := newITest(t)
	q := newQuorumReviewers(it)
	b := &sessiontest.Backend{}
	queue, hostQueue := it.queue+"-quorum", it.queue+"-host-quorum"
	cfg := integrationConfig(b, it.sink, it.reviewers)
	cfg.HostTaskQueue = hostQueue
	cfg.Policy.Quorum = 2
	acts, err := activities.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	it.ts.NewWorkerWithOptions(queue, func(r worker.Registry) { acts.Register(r) }, worker.Options{})
	it.ts.NewWorkerWithOptions(hostQueue, func(r worker.Registry) { acts.RegisterHost(r) }, worker.Options{})

	policy := integrationConfig(nil, nil, "").Policy
	s, err := policy.CheckSession(guard.SessionRequest{}, sessiontest.Name)
	if err != nil {
		t.Fatal(err)
	}
	cell, err := policy.CheckCell(s, 1, "", "print('must not run alone')")
	if err != nil {
		t.Fatal(err)
	}
	start := guard.ChainStart(s.Digest)
	digest := guard.CellDigest(s.Digest, 1, cell.CodeDigest, start)
	rogue := func(ctx workflow.Context, _ contract.SessionInput) ([]string, error) {
		opts := func(queue string) workflow.Context {
			return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: queue, StartToCloseTimeout: time.Minute,
				ScheduleToStartTimeout: 10 * time.Second, HeartbeatTimeout: 10 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		}
		var opened contract.SessionOpened
		if err := workflow.ExecuteActivity(opts(queue), contract.SessionOpenActivityName, contract.SessionOpenInput{Session: s}).Get(ctx, &opened); err != nil {
			return nil, err
		}
		hctx, cancelHold := workflow.WithCancel(opts(opened.HostTaskQueue))
		hold := workflow.ExecuteActivity(hctx, contract.SessionHoldActivityName, contract.SessionHoldInput{SandboxID: opened.SandboxID})
		var da, db contract.Decision
		sig := workflow.GetSignalChannel(ctx, contract.SignalApproval)
		sig.Receive(ctx, &da)
		sig.Receive(ctx, &db)
		var out []string
		for _, ds := range [][]contract.Decision{{da}, {da, da}, {da, db}} {
			in := contract.CellRunInput{Cell: cell, Chain: start, Decision: ds[0], Decisions: ds}
			if len(ds) == 1 {
				in.Decisions = nil // as a cell input recorded before session quorums
			}
			err := workflow.ExecuteActivity(opts(opened.HostTaskQueue), contract.SessionCellActivityName, in).Get(ctx, nil)
			out = append(out, errorText(err))
		}
		cancelHold()
		_ = hold.Get(ctx, nil)
		return out, nil
	}
	const rogueQueue = "sandboxflow-it-rogue-session-quorum"
	it.ts.NewWorker(rogueQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.SessionWorkflowName})
	})
	id := "it-rogue-session-quorum-" + uuid.NewString()[:8]
	run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: rogueQueue},
		contract.SessionWorkflowName, contract.SessionInput{})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(r *reviewertest.Reviewer, principal string) contract.Decision {
		f := reviewertest.Fields(id, run.GetRunID(), digest, hostQueue, true)
		f.Reviewer = principal
		return r.Decision(t, f)
	}
	it.signal(id, sign(q.alice, "alice"))
	it.signal(id, sign(q.bob, "bob"))
	var out []string
	if err := run.Get(it.ctx(2*time.Minute), &out); err != nil {
		t.Fatal(err)
	}
	for i, why := range []string{"needs 2 approvals", "the same reviewer"} {
		if i >= len(out) || !strings.Contains(out[i], guard.TypeApprovalRefused) || !strings.Contains(out[i], why) {
			t.Errorf("cell with %d approval(s) of alice's: %q; want an ApprovalRefused saying %q", i+1, out, why)
		}
	}
	if len(out) != 3 || out[2] != "" || b.Cells() != 1 {
		t.Errorf("outcomes %q, %d cells ran; want the refusals, then alice's and bob's run once", out, b.Cells())
	}
}
