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

// WaitResult is Result for a RunCode run (another workflow is a *NotRunCodeError), bounded by
// timeout (zero or less: no bound). A run that has not ended by
// then returns a *WaitTimeoutError with the run's state; the run goes on.
func (c *Client) WaitResult(ctx context.Context, workflowID string, timeout time.Duration) (guard.Result, error) {
	if err := c.RequireRunCode(ctx, workflowID); err != nil {
		return guard.Result{}, err
	}
	if timeout <= 0 {
		return c.Result(ctx, workflowID)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := c.Result(wctx, workflowID)
	if err != nil && ctx.Err() == nil && guard.TypeOf(err) == "" && deadlineExceeded(wctx, err) {
		te := &WaitTimeoutError{WorkflowID: workflowID, Timeout: timeout, Err: err}
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		defer qcancel()
		if st, serr := c.Status(qctx, workflowID); serr == nil {
			te.State = st.State
		}
		return res, te
	}
	return res, err
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
