package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// cellCancelChange marks the sessions that accepted a cell's cancel (the update "cancel-cell").
const cellCancelChange = "cell-cancel-v1"

// validateCancelCell refuses a cancel of any cell but the one that waits or runs, and a
// malformed request, with a CancelRejected error.
func (r *session) validateCancelCell(req contract.CancelCell) error {
	if why := r.cancelCellRefusal(req); why != "" {
		return temporal.NewNonRetryableApplicationError(why, contract.CancelRejectedType, nil)
	}
	return nil
}

func (r *session) cancelCellRefusal(req contract.CancelCell) string {
	if why := req.Refusal(); why != "" {
		return why
	}
	switch {
	case req.Cell < 1 || req.Cell > len(r.cells):
		return fmt.Sprintf("the session has no cell %d", req.Cell)
	case r.ended:
		return "the session has ended"
	}
	st := r.status.Cells[req.Cell-1]
	switch {
	case st.Cancel != nil:
		return fmt.Sprintf("cell %d is already cancelled by %s", req.Cell, st.Cancel.By)
	case req.Cell != r.current || st.Final():
		return fmt.Sprintf("cell %d has ended (%s)", req.Cell, st.State)
	}
	return ""
}

// cancelCell records the cancel of the cell that waits or runs: a waiting cell ends cancelled
// with nothing run; a running one has its activity cancelled, and its host stops the code
// (runCell then ends the cell with the result the host reports). It never accepts or makes a
// decision: a cancel cannot make code run.
func (r *session) cancelCell(ctx workflow.Context, req contract.CancelCell) (contract.CancelResult, error) {
	if err := r.validateCancelCell(req); err != nil {
		return contract.CancelResult{}, err
	}
	_ = workflow.GetVersion(ctx, cellCancelChange, workflow.DefaultVersion, 1)
	st := &r.status.Cells[req.Cell-1]
	state := st.State
	st.Cancel = &guard.Cancellation{By: req.By, Reason: req.Reason, Time: workflow.Now(ctx)}
	r.event(ctx, contract.EventRunCancelRequested, "cell", req.Cell, "by", req.By, "reason_bytes", len(req.Reason), "state", state)
	switch {
	case state == contract.StatusAwaitingApproval:
		r.endCell(ctx, contract.StatusCancelled, "cancelled by "+req.By+" before it ran")
	case r.stopCell != nil:
		r.stopCell()
	}
	r.wake++
	return contract.CancelResult{State: state, By: req.By}, nil
}

// cancelledCellFailure is how a cell whose cancel was accepted ends when its activity failed:
// cancelled before its host started the code (nothing ran: the session goes on), or, when the
// backend could not stop the cell alone, the failure that ends the session, saying so.
func (r *session) cancelledCellFailure(err error) (ended bool, cause error) {
	if stoppedBeforeStart(err) {
		return true, nil
	}
	cause = r.cellFailure(err)
	return false, fmt.Errorf("the cell was cancelled and its backend could not stop it alone, so the sandbox's state is unknown: %w", cause)
}
