//go:build integration

package workflows_test

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// The server holds a signal that arrives while one of the run's workflow tasks is in flight until
// the task completes, so the sandbox host's claim can be missing from the history it reads right
// after sending it. A stand-in "RunCode" schedules the sandbox activity, then keeps a workflow
// task in flight (a 3 s local activity); only then does a sandbox host start. Its claim shows only
// after that task: the host waits for it and runs the code, once.
func TestIntegrationClaimHeldBehindAWorkflowTaskStillRuns(t *testing.T) {
	it := newITest(t)
	req, mark := markRequest(t)
	checked, err := integrationConfig(nil, nil, "").Policy.Check(req, "local")
	if err != nil {
		t.Fatal(err)
	}
	hold := func(context.Context) error { time.Sleep(3 * time.Second); return nil }
	standIn := func(ctx workflow.Context, _ contract.Input) (string, error) {
		var d contract.Decision
		workflow.GetSignalChannel(ctx, contract.SignalApproval).Receive(ctx, &d)
		in := contract.RunInput{Checked: checked, Decision: d}
		run := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: it.queue, StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		}), contract.RunActivityName, in)
		workflow.GetSignalChannel(ctx, "hold").Receive(ctx, nil)
		if err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: 10 * time.Second,
		}), hold).Get(ctx, nil); err != nil {
			return "", err
		}
		var res guard.Result
		if err := run.Get(ctx, &res); err != nil {
			return err.Error(), nil
		}
		return "", nil
	}
	const id = "it-claim-held"
	run := it.approvedImpostor("sandboxflow-it-held", id, standIn, req, checked.Digest)
	for scheduled, _ := countRunActivities(it.history(id)); scheduled == 0; scheduled, _ = countRunActivities(it.history(id)) {
		time.Sleep(20 * time.Millisecond)
	}
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
	// The held task now runs for about 3 s; the sandbox host starts and claims meanwhile.
	it.worker(it.queue, it.localBackend(), nil)
	var outcome string
	if err := run.Get(it.ctx(60*time.Second), &outcome); err != nil || outcome != "" {
		t.Fatalf("stand-in: %q, %v; want the sandbox activity's result", outcome, err)
	}
	wantRuns(t, mark, 1)
	// The claim was held: it follows the completion of the task that was in flight.
	held, claim := int64(0), int64(0)
	for _, ev := range it.history(id) {
		switch {
		case ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED && ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == "hold":
			held = -1
		case held == -1 && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			held = ev.GetEventId()
		case ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED && ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == contract.SignalSandboxClaim && claim == 0:
			claim = ev.GetEventId()
		}
	}
	if held <= 0 || claim < held {
		t.Errorf("claim at event %d, the held task completed at event %d: want the claim held behind the task", claim, held)
	}
}
