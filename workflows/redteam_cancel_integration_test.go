//go:build integration

package workflows_test

// Red-team tests where cancel (issue 29) meets receipts (issue 31): a namespace writer may send
// the update "cancel" (an orchestrator may cancel its own runs), and then answers the sandbox
// activity by id before its host does.

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// cancelRun sends the update "cancel" as by and waits for its answer.
func (it *itest) cancelRun(id, by string) {
	it.t.Helper()
	h, err := it.c.UpdateWorkflow(it.ctx(20*time.Second), client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: contract.UpdateCancel, Args: []any{contract.CancelRequest{By: by, Reason: "red team"}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		it.t.Fatalf("cancel %s: %v", id, err)
	}
	var res contract.CancelResult
	if err := h.Get(it.ctx(20*time.Second), &res); err != nil {
		it.t.Fatalf("cancel %s: %v", id, err)
	}
}

// TestIntegrationCancelRacingAForgedEnd: after a cancel request, a namespace writer ends the
// sandbox activity by id. A forged result whose outcome is cancelled carries no receipt and is
// refused like any forged result; and a forged "cancelled" answer while the real host runs the
// code must not let the run say that nothing ran.
func TestIntegrationCancelRacingAForgedEnd(t *testing.T) {
	it := newITest(t)
	host := hosttest.New(t, "host-a")
	const forgeQueue = "redteam-cancel-nobody-polls"
	// One worker runs the workflows and sandboxes; its heartbeat timeout is long, so the SDK
	// sends the host's heartbeats (whose answers carry the cancel) seconds apart.
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) {
		c.HostsFile, c.HostKeyFile, c.HostName = host.File, host.KeyFile, host.Name
		c.HeartbeatTimeout = 30 * time.Second
	})

	t.Run("forged cancelled result", func(t *testing.T) {
		// The writer's own worker takes the sandbox activity on a queue no host polls, waits
		// for the cancel, and answers with output of its choosing, as a cancelled run's.
		const id = "redteam-cancel-forged-result"
		taken := make(chan struct{}, 1)
		it.ts.NewWorkerWithOptions(forgeQueue, func(r worker.Registry) {
			r.RegisterActivityWithOptions(func(ctx context.Context, in contract.RunInput) (guard.Result, error) {
				taken <- struct{}{}
				for ctx.Err() == nil {
					activity.RecordHeartbeat(ctx)
					time.Sleep(50 * time.Millisecond)
				}
				return guard.Result{Outcome: guard.OutcomeCancelled, Stdout: []byte("forged output before the cancel\n"),
					Backend: "local", Digest: in.Checked.Digest, ApprovalID: in.Decision.ApprovalID, Reviewer: "alice"}, nil
			}, activity.RegisterOptions{Name: contract.RunActivityName})
		}, activities.WorkerOptions(worker.Options{}))
		run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: it.queue},
			contract.WorkflowName, contract.Input{Request: guard.Request{Code: "print(1)"}, SandboxTaskQueue: forgeQueue})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := it.decide(id, it.signed(id, true)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-taken:
		case <-time.After(30 * time.Second):
			t.Fatal("the writer's worker never took the sandbox activity")
		}
		it.cancelRun(id, "mallory")
		wantReceiptRefused(t, it, run, receipt.FieldReceipt)
	})

	t.Run("forged cancellation while the code runs", func(t *testing.T) {
		const id = "redteam-cancel-forged-cancellation"
		mark := filepath.Join(t.TempDir(), "mark")
		run := it.start(id, it.queue, guard.Request{Code: markCode, Settings: guard.Settings{
			Env:    map[string]string{"MARK": mark, "SLEEP": "20"},
			Limits: guard.Limits{Timeout: 60 * time.Second},
		}})
		it.waitState(id, contract.StatusAwaitingApproval)
		if _, err := it.decide(id, it.signed(id, true)); err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(waitLines(t, mark, 1)[0]) // the code runs
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		runID, aid := it.sandboxActivityID(id)
		it.cancelRun(id, "mallory")
		// Before the host hears of the cancel (its next heartbeat), the writer says the activity
		// was cancelled, as Temporal says of an activity no host had taken.
		if err := it.c.CompleteActivityByID(it.ctx(10*time.Second), it.ts.GetDefaultNamespace(), id, runID, aid,
			nil, temporal.NewCanceledError("forged")); err != nil {
			t.Fatalf("the forged cancellation was not taken (the host answered first?): %v", err)
		}
		res, err := it.result(run)
		var cancelled *guard.Cancelled
		if errors.As(contract.FromFailure(err), &cancelled) {
			t.Fatalf("the run says it was cancelled before its code could start (%v), but the code ran (pid %d)", err, pid)
		}
		var ie *guard.IntegrationError
		if !errors.As(contract.FromFailure(err), &ie) || !ie.CodeMayHaveStarted {
			t.Fatalf("result %+v, error %v; want an IntegrationError whose code may have started", res, err)
		}
		if st, err := it.status(id); err != nil || st.State != contract.StatusError {
			t.Errorf("status %s (%v); want error", st.State, err)
		}
	})
}
