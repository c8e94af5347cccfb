package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"go.temporal.io/api/serviceerror"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
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

// Cancel cancels t as c's canceller (Options.Canceller), for reason, and returns the state t was
// in. A cancel never makes code run.
//
// A run (its current run) that waited for a decision ends with a *guard.Cancelled error and
// nothing run; a run whose sandbox was running is stopped within seconds and its result (Result)
// has Outcome cancelled, the output printed before, and Cancelled naming who asked. A session's
// cell (the one that waits or runs) ends likewise; a running cell is stopped and the session goes
// on when its backend can stop a cell alone (Docker), or ends lost when it cannot. A run that
// has ended or is already cancelled, any other cell, or a session that ended, refuses with a
// *CancelRefusedError.
func (c *Client) Cancel(ctx context.Context, t Target, reason string) (contract.CancelResult, error) {
	if !t.IsCell() {
		return c.CancelRun(ctx, t.ID, "", reason)
	}
	var out contract.CancelResult
	if err := t.needCell("cancel"); err != nil {
		return out, err
	}
	req := contract.CancelCell{Cell: t.Cell, CancelRequest: contract.CancelRequest{By: c.canceller, Reason: reason}}
	if why := req.Refusal(); why != "" {
		return out, &CancelRefusedError{WorkflowID: t.ID, Reason: why}
	}
	if ok, err := c.IsSession(ctx, t.ID); err != nil {
		return out, err
	} else if !ok {
		return out, &guard.ToolUsageError{Msg: fmt.Sprintf("cancel: %s is not a session; a run's cancel takes no --cell", t.ID)}
	}
	return out, c.sendCancel(ctx, t.ID, "", contract.UpdateCancelCell, req, &out)
}

// CancelRun is Cancel of run runID of the RunCode run workflowID only (empty: its current run),
// so that a cancel read off one run's page never reaches another.
func (c *Client) CancelRun(ctx context.Context, workflowID, runID, reason string) (contract.CancelResult, error) {
	var out contract.CancelResult
	req := contract.CancelRequest{By: c.canceller, Reason: reason}
	if why := req.Refusal(); why != "" {
		return out, &CancelRefusedError{WorkflowID: workflowID, Reason: why}
	}
	if err := c.RequireRunCode(ctx, workflowID); err != nil {
		return out, err
	}
	return out, c.sendCancel(ctx, workflowID, runID, contract.UpdateCancel, req, &out)
}

// cancelUpdateID is the update id of a cancel request: a hash of the update and the request (who
// asks, why, which cell), so that a cancel retried after its answer was lost is the same update,
// which the workflow answers once (Temporal returns the first answer to a repeated update id).
func cancelUpdateID(name string, req any) string {
	b, _ := json.Marshal(req) // plain structs of strings and ints: never fails
	sum := sha256.Sum256(append([]byte(name+"\x00"), b...))
	return "cancel-" + hex.EncodeToString(sum[:12])
}

// sendCancel sends a cancel update and reads its answer into out; a refusal, or a workflow that
// has ended, is a *CancelRefusedError.
func (c *Client) sendCancel(ctx context.Context, workflowID, runID, name string, req, out any) error {
	h, err := c.tc.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		RunID:        runID,
		UpdateName:   name,
		UpdateID:     cancelUpdateID(name, req),
		Args:         []any{req},
		WaitForStage: tclient.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, out)
	}
	if err != nil {
		var app *temporal.ApplicationError
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &app) && app.Type() == contract.CancelRejectedType:
			return &CancelRefusedError{WorkflowID: workflowID, Reason: app.Message()}
		case errors.As(err, &notFound):
			// It closed (Temporal answers an update to a closed workflow with NotFound).
			return &CancelRefusedError{WorkflowID: workflowID, Reason: "the run has ended"}
		}
		return fmt.Errorf("client: cancel %s: %w", workflowID, err)
	}
	return nil
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
