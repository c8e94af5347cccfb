//go:build integration

package workflows_test

// Integration tests of issue 27's time checks: a statement's expiry and a key's valid-before are
// checked on the sandbox host's clock when the code is about to start, and again after the claim
// step's history read, not at the time whoever scheduled the activity chose. A namespace writer's
// "RunCode" holds the reviewer's genuine approval back in the sandbox task queue (a long
// schedule-to-start timeout, no sandbox host polling yet) until it lapsed. Runs are counted by the
// mark file the code appends to.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// holdingRogue is a namespace writer's "RunCode": it waits for the reviewer's signed approval,
// schedules the sandbox activity on queue with a schedule-to-start timeout of an hour, and with
// hold set keeps a workflow task in flight for hold (a local activity) once signalled "hold". It
// returns the activity's error text, or "" for a result.
func holdingRogue(checked guard.Checked, queue string, hold time.Duration) func(workflow.Context, contract.Input) (string, error) {
	return func(ctx workflow.Context, _ contract.Input) (string, error) {
		var d contract.Decision
		workflow.GetSignalChannel(ctx, contract.SignalApproval).Receive(ctx, &d)
		in := contract.RunInput{Checked: checked, Decision: d}
		run := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: queue, ScheduleToStartTimeout: time.Hour, StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		}), contract.RunActivityName, in)
		if hold > 0 {
			workflow.GetSignalChannel(ctx, "hold").Receive(ctx, nil)
			sleep := func(context.Context) error { time.Sleep(hold); return nil }
			if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
				StartToCloseTimeout: hold + 5*time.Second,
			}), sleep).Get(ctx, nil); err != nil {
				return "", err
			}
		}
		if err := run.Get(ctx, nil); err != nil {
			return err.Error(), nil
		}
		return "", nil
	}
}

// startRogue starts fn as "RunCode" on its own task queue as run id, sends it alice's approval
// signed over the run, its digest and it.queue with the expiry expires, and waits until the
// sandbox activity is scheduled.
func (it *itest) startRogue(queue, id string, fn any, req guard.Request, digest string, expires time.Time) client.WorkflowRun {
	it.t.Helper()
	run := it.startImpostor(queue, id, fn, req)
	f := reviewertest.Fields(id, run.GetRunID(), digest, it.queue, true)
	f.Expires = expires
	it.signal(id, it.alice.Decision(it.t, f))
	for scheduled, _ := countRunActivities(it.history(id)); scheduled == 0; scheduled, _ = countRunActivities(it.history(id)) {
		time.Sleep(20 * time.Millisecond)
	}
	return run
}

// startImpostor runs fn as "RunCode" on its own task queue, as a namespace writer's worker
// would, and starts the run id of it with req.
func (it *itest) startImpostor(queue, id string, fn any, req guard.Request) client.WorkflowRun {
	it.t.Helper()
	it.ts.NewWorker(queue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: contract.WorkflowName})
	})
	run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: queue}, contract.WorkflowName, contract.Input{Request: req})
	if err != nil {
		it.t.Fatal(err)
	}
	return run
}

// sleepUntil sleeps until t has passed.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// claimSignals counts the sandbox-claim signals in run id's history.
func (it *itest) claimSignals(id string) int {
	n := 0
	for _, ev := range it.history(id) {
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == contract.SignalSandboxClaim {
			n++
		}
	}
	return n
}

// wantHostRefused checks an activity's outcome: the sandbox host's refusal, an ApprovalRefused whose cause is reason.
func wantHostRefused(t *testing.T, outcome string, reason approval.Reason) {
	t.Helper()
	if !strings.Contains(outcome, guard.TypeApprovalRefused) || !strings.Contains(outcome, "nothing ran") || !strings.Contains(outcome, fmt.Sprintf("refused (%s)", reason)) {
		t.Errorf("sandbox activity: %q; want the host's ApprovalRefused (%s)", outcome, reason)
	}
}

// The statement expires while the approved activity waits in the sandbox task queue, where no
// sandbox host polls; the host that starts afterwards refuses it on its own clock, though the
// activity was scheduled while the statement was valid.
func TestIntegrationStatementExpiredInTheTaskQueueRunsNothing(t *testing.T) {
	it := newITest(t)
	req, mark := markRequest(t)
	checked, err := integrationConfig(nil, nil, "").Policy.Check(req, "local")
	if err != nil {
		t.Fatal(err)
	}
	const id = "it-expired-in-queue"
	expires := time.Now().Add(3 * time.Second).Truncate(time.Second)
	run := it.startRogue("sandboxflow-it-expiry", id, holdingRogue(checked, it.queue, 0), req, checked.Digest, expires)
	sleepUntil(expires.Add(200 * time.Millisecond))
	it.worker(it.queue, it.localBackend(), nil) // the sandbox host starts late
	var outcome string
	if err := run.Get(it.ctx(60*time.Second), &outcome); err != nil {
		t.Fatal(err)
	}
	wantHostRefused(t, outcome, approval.ReasonExpired)
	wantRuns(t, mark, 0)
}

// The reviewer key's valid-before (the sandbox host's reviewers file) passes while the approved
// activity waits in the sandbox task queue: the host refuses the signature on its own clock.
func TestIntegrationKeyValidBeforePassedInTheTaskQueueRunsNothing(t *testing.T) {
	it := newITest(t)
	req, mark := markRequest(t)
	checked, err := integrationConfig(nil, nil, "").Policy.Check(req, "local")
	if err != nil {
		t.Fatal(err)
	}
	validBefore := time.Now().Add(3 * time.Second).Truncate(time.Second)
	file := filepath.Join(t.TempDir(), "allowed_signers")
	line := fmt.Sprintf("alice valid-before=%q %s\n", validBefore.UTC().Format("20060102150405Z"), strings.TrimPrefix(it.alice.AllowedLine(), "alice "))
	if err := os.WriteFile(file, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	const id = "it-key-lapsed-in-queue"
	run := it.startRogue("sandboxflow-it-valid-before", id, holdingRogue(checked, it.queue, 0), req, checked.Digest, time.Now().Add(time.Hour).Truncate(time.Second))
	sleepUntil(validBefore.Add(1200 * time.Millisecond)) // valid-before is inclusive, to the second
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) { c.ReviewersFile = file })
	var outcome string
	if err := run.Get(it.ctx(60*time.Second), &outcome); err != nil {
		t.Fatal(err)
	}
	wantHostRefused(t, outcome, approval.ReasonKeyNotValid)
	wantRuns(t, mark, 0)
}

// The statement is still valid when the sandbox host takes the activity and verifies it, and
// expires while the host waits for its claim to show in the run's history (the rogue keeps a
// workflow task in flight, behind which the server holds the claim): the check again after the
// history read, right before the code starts, refuses it, and the claim is released.
func TestIntegrationStatementExpiredDuringTheClaimRunsNothing(t *testing.T) {
	it := newITest(t)
	req, mark := markRequest(t)
	checked, err := integrationConfig(nil, nil, "").Policy.Check(req, "local")
	if err != nil {
		t.Fatal(err)
	}
	const (
		id   = "it-expired-during-claim"
		hold = 6 * time.Second
	)
	expires := time.Now().Add(10 * time.Second).Truncate(time.Second)
	run := it.startRogue("sandboxflow-it-expiry-claim", id, holdingRogue(checked, it.queue, hold), req, checked.Digest, expires)
	sleepUntil(expires.Add(-4500 * time.Millisecond))
	if err := it.c.SignalWorkflow(it.ctx(5*time.Second), id, "", "hold", nil); err != nil {
		t.Fatal(err)
	}
	for {
		d, err := it.c.DescribeWorkflowExecution(it.ctx(5*time.Second), id, "")
		if err != nil {
			t.Fatal(err)
		}
		if d.GetPendingWorkflowTask().GetState() == enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if time.Until(expires) < 2*time.Second {
		t.Fatalf("the held workflow task started %s before the expiry; the test needs 2 s or more for the host to verify first", time.Until(expires))
	}
	it.worker(it.queue, it.localBackend(), nil) // verifies at once, then waits for its claim
	var outcome string
	if err := run.Get(it.ctx(60*time.Second), &outcome); err != nil {
		t.Fatal(err)
	}
	wantHostRefused(t, outcome, approval.ReasonExpired)
	wantRuns(t, mark, 0)
	// The host verified the statement before it expired: it claimed, and released after the
	// check that refused.
	if n := it.claimSignals(id); n != 2 {
		t.Errorf("%d claim signals; want 2 (a claim made after the first check passed, and its release)", n)
	}
}
