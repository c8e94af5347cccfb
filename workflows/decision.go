package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// refusal returns who made d, or why d cannot be accepted now (desk.refusal, for the run's seat).
func (r *runCode) refusal(ctx workflow.Context, d contract.Decision) (approval.Verified, *contract.Rejection) {
	return r.desk.refusal(ctx, r.seat(), d)
}

// seat is the run at the desk, as it is now: it takes edits, keeps its approvals' count in its
// memo, and answers a decision sent with Wait that started it once it has ended.
func (r *runCode) seat() seat {
	return seat{
		what: "run", digest: r.checked.Digest, queue: r.sandboxQueue, notWaiting: r.notWaiting(),
		ballot: &r.ballot, shown: &r.status.DecisionWait,
		editRefusal: r.editRefusal, counted: r.memoCount, event: r.event,
		end: endAnswer{change: runWaitChange, startsOnly: true, acceptedOnCancel: true,
			ended: func() bool { return r.ended }, answer: r.answerEnded},
	}
}

// notWaiting says why the run does not wait for a decision, or "".
func (r *runCode) notWaiting() string {
	if r.cancel != nil {
		return "not waiting for a decision: the run was cancelled by " + r.cancel.By
	}
	switch r.status.State {
	case contract.StatusAwaitingApproval:
		return ""
	case contract.StatusChecking:
		return "not waiting for a decision: the request is still being checked"
	}
	return "not waiting for a decision: the run is " + r.status.State
}

// sandboxQueue is the task queue the sandbox activity runs on: the run's own choice, else the
// checking worker's setting, else the workflow's task queue.
func sandboxQueue(in contract.Input, opts contract.RunOptions, workflowQueue string) string {
	switch {
	case in.SandboxTaskQueue != "":
		return in.SandboxTaskQueue
	case opts.TaskQueue != "":
		return opts.TaskQueue
	}
	return workflowQueue
}

// notPickedUp returns the error that ends a run whose approved activity waited in the sandbox
// task queue past its ScheduleToStart timeout: no sandbox worker took it, so the code never
// started and the approval was not used. It is never retried. Other errors return nil.
func (r *runCode) notPickedUp(err error, timeout time.Duration) error {
	if !timedOut(err, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START) {
		return nil
	}
	return &guard.IntegrationError{
		Op: "run sandbox",
		Err: fmt.Errorf("no sandbox worker took the run from task queue %s within %s; the code did not start and the approval was not used (send a new decision to a new run): %w",
			r.sandboxQueue, timeout, err),
	}
}

// timedOut reports whether err is a Temporal timeout of type typ.
func timedOut(err error, typ enumspb.TimeoutType) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == typ
}
