package client

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"go.temporal.io/api/serviceerror"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Connect dials Temporal as conn says, with the payload keys of keyFile when it is not empty, and
// returns a Client for RunCode runs on taskQueue (empty: contract.DefaultTaskQueue). Close closes the
// connection. It is the one dial the starter's commands share.
func Connect(ctx context.Context, conn Connection, keyFile, taskQueue string) (*Client, error) {
	tc, opts, err := DialKeys(ctx, conn, keyFile)
	if err != nil {
		return nil, err
	}
	c, err := New(Options{Temporal: tc, TaskQueue: taskQueue, DataConverter: opts.DataConverter, Namespace: opts.Namespace})
	if err != nil {
		tc.Close()
		return nil, err
	}
	c.owned = true
	return c, nil
}

// DialKeys dials Temporal as conn says, with the payload keys of keyFile when it is not empty,
// and returns the Temporal client and the options it was dialed with (their DataConverter
// decodes what the keys encrypted).
func DialKeys(ctx context.Context, conn Connection, keyFile string) (tclient.Client, tclient.Options, error) {
	if keyFile != "" {
		ring, err := codec.LoadKeyRing(keyFile)
		if err != nil {
			return nil, tclient.Options{}, fmt.Errorf("client: key file: %w", err)
		}
		conn.KeyRing = ring
	}
	opts, err := conn.Options()
	if err != nil {
		return nil, opts, err
	}
	tc, err := Dial(ctx, conn)
	return tc, opts, err
}

// Close closes the Temporal connection when Connect made it; a Client made with New leaves its
// Temporal client open.
func (c *Client) Close() {
	if c.owned {
		c.tc.Close()
	}
}

// WaitResult waits for t to end and returns its result once its receipt verified (against
// Options.Hosts, else the hosts its check recorded), or the typed error in its place, bounded by
// timeout (zero or less: no bound). A run's is Result of a RunCode run (another workflow is a
// *NotRunCodeError); a cell's is the cell awaited (AwaitCell) and its result (CellResult). One
// that has not ended by then returns a *WaitTimeoutError with its state; it goes on.
func (c *Client) WaitResult(ctx context.Context, t Target, timeout time.Duration) (guard.Result, error) {
	if err := t.needCell("wait for"); err != nil {
		return guard.Result{}, err
	}
	if !t.IsCell() {
		if err := c.RequireRunCode(ctx, t.ID); err != nil {
			return guard.Result{}, err
		}
	}
	if timeout <= 0 {
		return c.awaitResult(ctx, t)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := c.awaitResult(wctx, t)
	if err != nil && ctx.Err() == nil && guard.TypeOf(err) == "" && deadlineExceeded(wctx, err) {
		te := &WaitTimeoutError{WorkflowID: t.ID, Cell: t.Cell, Timeout: timeout, Err: err}
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		defer qcancel()
		te.State = c.stateOf(qctx, t)
		return res, te
	}
	return res, err
}

// awaitResult waits for t's result, verified: a run's (Result), or a cell's once it has ended
// (AwaitCell, CellResult).
func (c *Client) awaitResult(ctx context.Context, t Target) (guard.Result, error) {
	if !t.IsCell() {
		return c.Result(ctx, t.ID)
	}
	cs, err := c.AwaitCell(ctx, t.ID, t.Cell)
	if err != nil {
		return guard.Result{}, err
	}
	return c.CellResult(ctx, t.ID, cs)
}

// stateOf reads t's state from its status, or "" when it cannot be read.
func (c *Client) stateOf(ctx context.Context, t Target) string {
	if !t.IsCell() {
		st, err := c.Status(ctx, t.ID)
		if err != nil {
			return ""
		}
		return st.State
	}
	st, err := c.SessionStatus(ctx, t.ID)
	if cs, ok := sessionCell(st, t.Cell); err == nil && ok {
		return cs.State
	}
	return ""
}

// checkDecision refuses a decision that JSON would change (text that is not UTF-8) or that is over
// Temporal's payload limits.
func checkDecision(dc converter.DataConverter, d contract.Decision) error {
	for _, f := range []struct{ name, v string }{
		{"approval id", d.ApprovalID}, {"digest", d.Digest}, {"reviewer", d.Reviewer}, {"reason", d.Reason},
	} {
		if !utf8.ValidString(f.v) {
			return &guard.ToolUsageError{Msg: fmt.Sprintf("decision: %s is not valid UTF-8", f.name)}
		}
	}
	return checkPayloadSize(dc, "the decision", len(d.Reason)+len(d.Reviewer), d)
}

// deadlineExceeded reports whether err ended a wait because ctx's deadline passed: the SDK may
// return gRPC's deadline error a moment before ctx itself reports it.
func deadlineExceeded(ctx context.Context, err error) bool {
	var de *serviceerror.DeadlineExceeded
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &de)
}
