//go:build integration

package workflows_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
)

// A namespace writer's own "Session" worker, holding three genuine signatures for its own run,
// tries each where it does not fit: the reviewer's approval of cell 1 as the approval of a
// SandboxRun (RunCode's activity) whose checked request carries the cell's digest, on the
// sandbox queue and on the host queue; an approval of a RunCode request's digest (bound to the
// host queue) as the approval of that code as cell 1; and the reviewer's denial of cell 1 with
// its approve flag turned on. Each is refused before anything runs: no cell and no run reached
// the backend.
func TestIntegrationSessionDecisionsFitNoOtherKind(t *testing.T) {
	it := newITest(t)
	b := &sessiontest.Backend{}
	hostQueue := it.queue + "-host-crosskind"
	it.sessionWorkers(b, hostQueue)
	policy := integrationConfig(nil, nil, "").Policy
	s, err := policy.CheckSession(guard.SessionRequest{}, sessiontest.Name)
	if err != nil {
		t.Fatal(err)
	}
	const code = "print('cross')"
	cell, err := policy.CheckCell(s, 1, "", code)
	if err != nil {
		t.Fatal(err)
	}
	runChecked, err := policy.Check(guard.Request{Code: code}, sessiontest.Name)
	if err != nil {
		t.Fatal(err)
	}
	chain := guard.ChainStart(s.Digest)
	cellDigest := guard.CellDigest(s.Digest, 1, cell.CodeDigest, chain)
	rogue := func(ctx workflow.Context, _ contract.SessionInput) ([]string, error) {
		opts := func(queue string) workflow.Context {
			return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: queue, StartToCloseTimeout: time.Minute,
				ScheduleToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		}
		var opened contract.SessionOpened
		if err := workflow.ExecuteActivity(opts(it.queue), contract.SessionOpenActivityName, contract.SessionOpenInput{Session: s}).Get(ctx, &opened); err != nil {
			return nil, err
		}
		var cellApproval, runApproval, cellDenial contract.Decision
		sig := workflow.GetSignalChannel(ctx, contract.SignalApproval)
		sig.Receive(ctx, &cellApproval)
		sig.Receive(ctx, &runApproval)
		sig.Receive(ctx, &cellDenial)
		forged := runChecked
		forged.Digest = cellDigest
		var out []string
		record := func(err error) {
			if err == nil {
				out = append(out, "ran")
				return
			}
			out = append(out, guard.TypeOf(contract.FromFailure(err)))
		}
		// The cell's approval for a run: on the sandbox queue, and on the host queue.
		record(workflow.ExecuteActivity(opts(it.queue), contract.RunActivityName, contract.RunInput{Checked: forged, Decision: cellApproval}).Get(ctx, nil))
		record(workflow.ExecuteActivity(opts(opened.HostTaskQueue), contract.RunActivityName, contract.RunInput{Checked: forged, Decision: cellApproval}).Get(ctx, nil))
		// A run's approval for the cell.
		record(workflow.ExecuteActivity(opts(opened.HostTaskQueue), contract.SessionCellActivityName, contract.CellRunInput{Cell: cell, Chain: chain, Decision: runApproval}).Get(ctx, nil))
		// The cell's denial, turned into an approval.
		cellDenial.Approve = true
		record(workflow.ExecuteActivity(opts(opened.HostTaskQueue), contract.SessionCellActivityName, contract.CellRunInput{Cell: cell, Chain: chain, Decision: cellDenial}).Get(ctx, nil))
		return out, nil
	}
	const rogueQueue = "sandboxflow-it-rogue-crosskind"
	it.ts.NewWorker(rogueQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.SessionWorkflowName})
	})
	id := "it-rogue-crosskind-" + uuid.NewString()[:8]
	run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: rogueQueue},
		contract.SessionWorkflowName, contract.SessionInput{})
	if err != nil {
		t.Fatal(err)
	}
	it.signal(id, it.alice.Decision(t, reviewertest.Fields(id, run.GetRunID(), cellDigest, hostQueue, true)))
	it.signal(id, it.alice.Decision(t, reviewertest.Fields(id, run.GetRunID(), runChecked.Digest, hostQueue, true)))
	it.signal(id, it.alice.Decision(t, reviewertest.Fields(id, run.GetRunID(), cellDigest, hostQueue, false)))
	var out []string
	if err := run.Get(it.ctx(2*time.Minute), &out); err != nil {
		t.Fatal(err)
	}
	want := []string{guard.TypeApprovalRefused, "", guard.TypeApprovalRefused, guard.TypeApprovalRefused}
	for i, o := range out {
		if o == "ran" || (want[i] != "" && o != want[i]) {
			t.Fatalf("outcomes %q; want %q (the second: any failure, SandboxRun is not on the host queue)", out, want)
		}
	}
	if len(out) != 4 || b.Cells() != 0 {
		t.Fatalf("outcomes %q, %d cells ran; want 4 refusals and no cell", out, b.Cells())
	}
	t.Logf("outcomes %q", out)
}
