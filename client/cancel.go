package client

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxflow/sandboxflow/contract"
)

// TypeCancelRefused names a *CancelRefusedError.
const TypeCancelRefused = "CancelRefused"

// CancelRefusedError reports that a run refused a cancel request: it has ended, it is already
// cancelled, or the request was malformed. Nothing changed.
type CancelRefusedError struct {
	WorkflowID string
	Reason     string
}

func (e *CancelRefusedError) Error() string {
	return fmt.Sprintf("client: cancel of %s refused: %s", e.WorkflowID, e.Reason)
}

// ErrorType returns TypeCancelRefused.
func (e *CancelRefusedError) ErrorType() string { return TypeCancelRefused }

// Cancel cancels the RunCode run workflowID (its current run) as c's canceller (Options.Canceller),
// for reason, and returns the state the run was in. A run that waited for a decision ends with a
// *guard.Cancelled error and nothing run; a run whose sandbox was running is stopped within seconds
// and its result (Result) has Outcome cancelled, the output printed before, and Cancelled naming
// who asked. A run that has ended, or is already cancelled, refuses with a *CancelRefusedError.
// A cancel never makes code run.
func (c *Client) Cancel(ctx context.Context, workflowID, reason string) (contract.CancelResult, error) {
	return c.CancelRun(ctx, workflowID, "", reason)
}

// CancelRun is Cancel for run runID of workflowID only (empty: its current run), so that a
// cancel read off one run's page never reaches another.
func (c *Client) CancelRun(ctx context.Context, workflowID, runID, reason string) (contract.CancelResult, error) {
	var out contract.CancelResult
	req := contract.CancelRequest{By: c.canceller, Reason: reason}
	if why := req.Refusal(); why != "" {
		return out, &CancelRefusedError{WorkflowID: workflowID, Reason: why}
	}
	if err := c.RequireRunCode(ctx, workflowID); err != nil {
		return out, err
	}
	h, err := c.tc.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		RunID:        runID,
		UpdateName:   contract.UpdateCancel,
		UpdateID:     "cancel-" + uuid.NewString(),
		Args:         []any{req},
		WaitForStage: tclient.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &out)
	}
	if err != nil {
		var app *temporal.ApplicationError
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &app) && app.Type() == contract.CancelRejectedType:
			return out, &CancelRefusedError{WorkflowID: workflowID, Reason: app.Message()}
		case errors.As(err, &notFound):
			// The run closed (Temporal answers an update to a closed run with NotFound).
			return out, &CancelRefusedError{WorkflowID: workflowID, Reason: "the run has ended"}
		}
		return out, fmt.Errorf("client: cancel %s: %w", workflowID, err)
	}
	return out, nil
}

// defaultCanceller is who Cancel names when Options names no one: the user and host this
// client runs as.
func defaultCanceller() string {
	user := os.Getenv("USER")
	if user == "" {
		user = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return user
	}
	return user + "@" + host
}
