package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"
	workflowpb "go.temporal.io/api/workflow/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// The jobs a run and a session share: one home each, told which subject it serves by the
// workflow type, the query, and the words its messages name the subject with.

// newWorkflowID returns id, or prefix and a random UUID when id is empty; an id outside
// guard.CheckWorkflowID's character set is a ToolUsageError, and nothing is sent.
func newWorkflowID(id, prefix string) (string, error) {
	if id == "" {
		return prefix + uuid.NewString(), nil
	}
	return id, guard.CheckWorkflowID(id)
}

// checkLook is one read of a new run's or session's status while its check runs.
type checkLook struct {
	// done says the check finished (or the subject ended).
	done bool
	// digest is what the check made; empty when the subject ended without one.
	digest string
	// ended says why the subject ended without a digest, when its result says nothing.
	ended error
}

// awaitChecked polls look until the check of the started run or session (workflowID, runID;
// messages call it name) finished and returns its digest, or the typed error that ended it (the
// error of result). A status query that fails is never answered by waiting for the result: only
// a subject that has closed (its check failed) is asked for it; while it is open, transient
// failures are retried for up to CheckWait and any other failure is returned.
func (c *Client) awaitChecked(ctx context.Context, workflowID, runID, name string,
	look func(context.Context) (checkLook, error), result func(context.Context) error) (string, error) {
	// The check takes a workflow task or two: ask soon, then less and less often, up to
	// checkPoll.
	wait := min(10*time.Millisecond, c.checkPoll)
	var failingSince time.Time
	for {
		l, err := look(ctx)
		switch {
		case err == nil && l.done:
			if l.digest == "" {
				// The check failed: the subject has ended with the typed error.
				rerr := result(ctx)
				if rerr == nil {
					rerr = l.ended
				}
				return "", rerr
			}
			return l.digest, nil
		case err != nil && !isQueryNotReady(err):
			// A subject that failed its check may already be closed; its result says why.
			if closed, derr := c.isClosed(ctx, Started{WorkflowID: workflowID, RunID: runID}); derr == nil && closed {
				if rerr := result(ctx); rerr != nil {
					return "", rerr
				}
				return "", err
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if !isTransient(err) || time.Since(failingSince) >= c.checkWait {
				return "", &CheckUnansweredError{WorkflowID: workflowID, RunID: runID, Err: err}
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("client: waiting for the check of %s: %w", name, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, c.checkPoll)
	}
}

// describeAs describes workflowID's current run, refusing a workflow whose type is not typ with
// the error of wrongType.
func (c *Client) describeAs(ctx context.Context, workflowID, typ string, wrongType func(typ string) error) (*workflowpb.WorkflowExecutionInfo, error) {
	resp, err := c.tc.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return nil, fmt.Errorf("client: describe %s: %w", workflowID, err)
	}
	info := resp.GetWorkflowExecutionInfo()
	if got := info.GetType().GetName(); got != typ {
		return nil, wrongType(got)
	}
	return info, nil
}

// queryStatus asks run runID of workflowID (empty: its current run) the status query named query
// and decodes its answer; messages call the subject name, and its status statusOf.
func queryStatus[S any](ctx context.Context, c *Client, workflowID, runID, query, name, statusOf string) (S, error) {
	var st S
	v, err := c.tc.QueryWorkflow(ctx, workflowID, runID, query)
	if err != nil {
		return st, fmt.Errorf("client: query %s: %w", name, err)
	}
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("client: decode %s: %w", statusOf, err)
	}
	return st, nil
}

// workflowResult waits for run runID of workflowID (empty: its current run, and the runs it
// continues as) to end and returns its result, or the typed error that ended it; messages call
// the subject name. The run is returned too, for its id.
func workflowResult[R any](ctx context.Context, c *Client, workflowID, runID, name string) (R, tclient.WorkflowRun, error) {
	var res R
	run := c.tc.GetWorkflow(ctx, workflowID, runID)
	if err := run.Get(ctx, &res); err != nil {
		if ctx.Err() != nil {
			return res, run, fmt.Errorf("client: result of %s: %w", name, ctx.Err())
		}
		if typed := contract.FromFailure(err); guard.TypeOf(typed) != "" {
			return res, run, typed
		}
		return res, run, fmt.Errorf("client: result of %s: %w", name, err)
	}
	return res, run, nil
}

// sameStart reports whether the workflow id names a run of type typ started with in, byte for
// byte as JSON (a start retried after its first answer was lost: the workflow id is the caller's
// idempotency key), and which run (runID when the server named it, else its current one).
func (c *Client) sameStart(ctx context.Context, id, runID, typ string, in any) (string, bool) {
	prev := reflect.New(reflect.TypeOf(in))
	startRun, err := contract.ReadStart(ctx, c.tc, c.dc, c.namespace, id, runID, typ, prev.Interface())
	if err != nil {
		return "", false
	}
	a, err1 := json.Marshal(in)
	b, err2 := json.Marshal(prev.Elem().Interface())
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		return "", false
	}
	if runID == "" {
		runID = startRun
	}
	return runID, true
}

// usedIDError is the error of a start under an id a run or session with another start already has.
func usedIDError(id string) error {
	return &guard.ConfigError{Msg: fmt.Sprintf("workflow id %q is already used (open or closed) by another request; choose another id, leave it empty, or send the same request to get that run", id)}
}
