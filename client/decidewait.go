package client

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// ResultWait is the wait for a run's result that DecideAndWait started with the decision: one
// long poll on the run's close, already under way. Call Get once, or Stop.
type ResultWait struct {
	done   chan resultOutcome
	cancel context.CancelFunc
}

type resultOutcome struct {
	res guard.Result
	err error
}

// Get waits for the run to end and returns its result or typed error, as Result does.
func (w *ResultWait) Get(ctx context.Context) (guard.Result, error) {
	defer w.cancel()
	select {
	case o := <-w.done:
		return o.res, o.err
	case <-ctx.Done():
		return guard.Result{}, fmt.Errorf("client: result: %w", ctx.Err())
	}
}

// Stop gives up the wait.
func (w *ResultWait) Stop() { w.cancel() }

// DecideAndWait sends d on run runID of the RunCode run workflowID (DecideRun) with
// Decision.Wait and Decision.ResultFromHistory, and returns the workflow's answer and the wait
// for that run's result. An approval that starts the run is answered once the run has ended
// (the answer comes with the workflow task that ends the run), and the wait reads the result
// from the run's history, in the read that verifies its receipt: no long poll, and the result
// recorded and sent once (a worker from before ResultFromHistory answers with the result, which
// the wait verifies the same way). Otherwise (an approval that leaves the run waiting for more,
// a worker from before Wait, a run that ended with an error) the wait is one long poll on the
// run's close, started with the answer.
// runID is required (Statement's Fields.RunID): the wait must be for the run decided on, and
// the caller must know it is a RunCode run (Statement checks). When the decision is refused, the
// refusal is returned and there is no wait.
func (c *Client) DecideAndWait(ctx context.Context, workflowID, runID string, d contract.Decision) (contract.DecideResult, *ResultWait, error) {
	if runID == "" {
		return contract.DecideResult{}, nil, errors.New("client: decide and wait: the run id is required (the statement's run_id)")
	}
	d.Wait, d.ResultFromHistory = true, true
	out, err := c.DecideRun(ctx, workflowID, runID, d)
	if err != nil {
		return out, nil, err
	}
	return out, c.runWait(ctx, workflowID, runID, out), nil
}

// runWait is the wait for the result of run runID of workflowID, decided on with Wait: the
// answer's result when it carried one, else the ended run's from its history, else one long
// poll on the run's close.
func (c *Client) runWait(ctx context.Context, workflowID, runID string, out contract.DecideResult) *ResultWait {
	if out.Ended && out.Result != nil {
		// The workflow's answer is checked as the run's close would be: whoever answers the
		// update is not trusted for the result, its receipt is.
		res := *out.Result
		return startWait(ctx, func(ctx context.Context) (guard.Result, error) {
			return res, c.verifyResultOf(ctx, workflowID, runID, res, c.hosts)
		})
	}
	if out.Ended {
		return startWait(ctx, func(ctx context.Context) (guard.Result, error) { return c.endedResult(ctx, workflowID, runID) })
	}
	return startWait(ctx, func(ctx context.Context) (guard.Result, error) { return c.resultOf(ctx, workflowID, runID) })
}

// endedResult is the result of run runID of workflowID, which has ended, read from its history
// in the read that checks its receipt: the result is sent once. A run that ended without one
// (an error, which the workflow's result returns typed) is resultOf's.
func (c *Client) endedResult(ctx context.Context, workflowID, runID string) (guard.Result, error) {
	h, session, err := c.readRun(ctx, workflowID, runID, true)
	if err != nil || session || h.closeResult == nil {
		return c.resultOf(ctx, workflowID, runID)
	}
	var res guard.Result
	if err := c.dc.FromPayloads(h.closeResult, &res); err != nil {
		return res, fmt.Errorf("client: the result of %s: %w", workflowID, err)
	}
	rec, err := h.record()
	return res, verifyAgainst(rec, err, workflowID, res, c.hosts)
}

// cellWait is the wait for the result of cell of sessionID, decided on with Wait: ended, when the
// answer carried the ended cell, else the cell awaited (AwaitCell); its result is given once it
// verified (CellResult).
func (c *Client) cellWait(ctx context.Context, sessionID string, cell int, ended *contract.CellStatus) *ResultWait {
	return startWait(ctx, func(ctx context.Context) (guard.Result, error) {
		if ended == nil {
			return c.awaitResult(ctx, Cell(sessionID, cell))
		}
		return c.CellResult(ctx, sessionID, *ended)
	})
}

// startWait starts get under a context that Stop, or the end of Get, cancels.
func startWait(ctx context.Context, get func(context.Context) (guard.Result, error)) *ResultWait {
	wctx, cancel := context.WithCancel(ctx)
	w := &ResultWait{done: make(chan resultOutcome, 1), cancel: cancel}
	go func() {
		res, err := get(wctx)
		w.done <- resultOutcome{res, err}
	}()
	return w
}

// ApproveAndWait is Approve then the wait for t's result. A run's approval is sent on the run the
// statement names, with Decision.Wait (DecideAndWait); a cell's with CellDecision.Wait, answered
// once the cell has ended, with its status in Decided.CellStatus (its result, or why it has none).
// Under a quorum, an approval that leaves the run or cell short of it is answered at once, with
// State awaiting_approval, Approvals and Quorum: the wait then waits for another reviewer's. The
// wait gives the result only once its receipt verified. When the approval is refused, the
// refusal is returned and there is no wait.
func (c *Client) ApproveAndWait(ctx context.Context, t Target, digest string, signer ssh.Signer, reason string) (Decided, *ResultWait, error) {
	out, runID, err := c.decide(ctx, t, digest, signer, reason, false, true)
	if err != nil {
		return out, nil, err
	}
	if t.IsCell() {
		return out, c.cellWait(ctx, t.ID, out.Cell, out.CellStatus), nil
	}
	return out, c.runWait(ctx, t.ID, runID, out.DecideResult), nil
}

// ApproveEditedAndWait is ApproveEdited, on the run the statement names, then the wait for its
// result (DecideAndWait).
func (c *Client) ApproveEditedAndWait(ctx context.Context, workflowID, digest, code string, signer ssh.Signer, reason string) (contract.DecideResult, *ResultWait, error) {
	f, edit, err := c.EditedStatement(ctx, workflowID, digest, code, StatementOptions{})
	if err != nil {
		return contract.DecideResult{}, nil, err
	}
	d, err := EditedDecision(signer, f, edit, reason)
	if err != nil {
		return contract.DecideResult{}, nil, err
	}
	return c.DecideAndWait(ctx, workflowID, f.RunID, d)
}
