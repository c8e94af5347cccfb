package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// cancelChange marks the runs that accepted a cancel request (the update "cancel"): their
// history holds the update, and the workflow stops the sandbox activity itself.
const cancelChange = "cancel-v1"

// setCancelHandler registers the update "cancel". An accepted request is recorded and cancels
// r's run context: the wait for a decision ends (RunCode checks r.cancel before it uses a
// decision), and a scheduled or running sandbox activity is cancelled (its host stops the code
// and returns the output so far as a result whose Outcome is cancelled).
func (r *runCode) setCancelHandler(ctx workflow.Context, stopRun workflow.CancelFunc) error {
	err := workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateCancel,
		func(ctx workflow.Context, req contract.CancelRequest) (contract.CancelResult, error) {
			if rej := r.cancelRefusal(req); rej != "" {
				return contract.CancelResult{}, temporal.NewNonRetryableApplicationError(rej, contract.CancelRejectedType, nil)
			}
			_ = workflow.GetVersion(ctx, cancelChange, workflow.DefaultVersion, 1)
			state := r.status.State
			r.cancel = &guard.Cancellation{By: req.By, Reason: req.Reason, Time: workflow.Now(ctx)}
			r.status.Cancel = r.cancel
			r.event(ctx, contract.EventRunCancelRequested, "by", req.By, "reason_bytes", len(req.Reason), "state", state)
			stopRun()
			return contract.CancelResult{State: state, By: req.By}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req contract.CancelRequest) error {
			if rej := r.cancelRefusal(req); rej != "" {
				return temporal.NewNonRetryableApplicationError(rej, contract.CancelRejectedType, nil)
			}
			return nil
		}})
	if err != nil {
		return fmt.Errorf("workflows: set cancel handler: %w", err)
	}
	return nil
}

// cancelRefusal says why a cancel request cannot be accepted now, or "".
func (r *runCode) cancelRefusal(req contract.CancelRequest) string {
	if why := req.Refusal(); why != "" {
		return why
	}
	if r.cancel != nil {
		return "already cancelled by " + r.cancel.By
	}
	switch r.status.State {
	case contract.StatusChecking, contract.StatusAwaitingApproval, contract.StatusRunning:
		return ""
	}
	return "the run has ended (" + r.status.State + ")"
}

// cancelledBeforeRun ends a run cancelled before its code could start: nothing ran.
func (r *runCode) cancelledBeforeRun(ctx workflow.Context) error {
	return r.end(ctx, contract.StatusCancelled, &guard.Cancelled{By: r.cancel.By, Reason: r.cancel.Reason})
}

// stoppedBeforeStart reports whether err, the sandbox activity's, says the activity was cancelled
// before its code could start: Temporal cancelled it before a host took it, or its host reported
// the cancel as such (it answers with a result once the code may have started).
func stoppedBeforeStart(err error) bool {
	var canceled *temporal.CanceledError
	return errors.As(err, &canceled)
}
