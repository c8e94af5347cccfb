package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// startOptions are the options every run and session is started with: an id used before, by an
// open or a closed workflow, is refused.
func (c *Client) startOptions(id string) tclient.StartWorkflowOptions {
	return tclient.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                c.taskQueue,
		WorkflowIDReusePolicy:                    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}
}

// startChecked starts a RunCode run with the update contract.UpdateAwaitCheck in the same call
// (update-with-start), so that the check's outcome comes back with the start: no status query.
// It falls back to a plain start and polling the status (awaitCheck) when the server refuses
// update-with-start or updates (Unimplemented, PermissionDenied), and to polling when the update
// gets no answer from the workflow (a worker from before the update rejects it). The whole wait
// is bounded by CheckWait: past it, a started run is a *CheckUnansweredError.
func (c *Client) startChecked(ctx context.Context, id string, in contract.Input, opts StartOptions) (Started, error) {
	if !opts.SkipWorkerCheck {
		if err := c.checkWorkers(ctx); err != nil {
			return Started{}, err
		}
	}
	op := c.tc.NewWithStartWorkflowOperation(c.startOptions(id), contract.WorkflowName, in)
	bounded, cancel := context.WithTimeout(ctx, c.checkWait)
	defer cancel()
	h, err := c.tc.UpdateWithStartWorkflow(bounded, tclient.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: tclient.UpdateWorkflowOptions{
			UpdateName: contract.UpdateAwaitCheck,
			// A fresh id: the server answers an update-with-start whose update id a run of the
			// same workflow id already completed with that old answer, even when its start is
			// refused (an existing id).
			UpdateID:     uuid.NewString(),
			WaitForStage: tclient.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		var already *serviceerror.WorkflowExecutionAlreadyStarted
		switch {
		case errors.As(err, &already):
			// A retried start (the same id and request) gets the run the first one made.
			runID, same := c.sameStart(ctx, id, already.RunId, contract.WorkflowName, in)
			if !same {
				return Started{}, usedIDError(id)
			}
			started := Started{WorkflowID: id, RunID: runID}
			if opts.OnStarted != nil {
				opts.OnStarted(started)
			}
			return c.awaitCheck(ctx, started)
		case refusesUpdateWithStart(err):
			// The start was aborted with the update: start plainly and poll.
			return c.startPolled(ctx, id, in, opts)
		}
		started, found := c.startedAnyway(ctx, op, id)
		if !found {
			if ctx.Err() != nil {
				return Started{}, fmt.Errorf("client: start %s %s: %w", contract.WorkflowName, id, ctx.Err())
			}
			return Started{}, fmt.Errorf("client: start %s %s: %w", contract.WorkflowName, id, err)
		}
		if opts.OnStarted != nil {
			opts.OnStarted(started)
		}
		if ctx.Err() != nil {
			return started, fmt.Errorf("client: waiting for the check of %s: %w", started.WorkflowID, ctx.Err())
		}
		return started, &CheckUnansweredError{WorkflowID: started.WorkflowID, RunID: started.RunID, Err: err}
	}
	started := Started{WorkflowID: id, RunID: h.RunID()}
	if run, rerr := op.Get(bounded); rerr == nil {
		started.WorkflowID, started.RunID = run.GetID(), run.GetRunID()
	}
	if opts.OnStarted != nil {
		opts.OnStarted(started)
	}
	var summary guard.Summary
	err = h.Get(bounded, &summary)
	switch typed := contract.FromFailure(err); {
	case err == nil && summary.Digest != "":
		started.Digest = summary.Digest
		return started, nil
	case err == nil:
		return started, fmt.Errorf("client: the check of %s answered without a digest", started.WorkflowID)
	case guard.TypeOf(typed) != "":
		// The check refused the request; the run ends with this error.
		return started, typed
	case ctx.Err() != nil:
		return started, fmt.Errorf("client: waiting for the check of %s: %w", started.WorkflowID, ctx.Err())
	case bounded.Err() != nil:
		return started, &CheckUnansweredError{WorkflowID: started.WorkflowID, RunID: started.RunID, Err: err}
	}
	// No answer from the workflow (a worker without the update rejects it): ask its status.
	return c.awaitCheck(ctx, started)
}

// startPolled starts the run plainly and polls its status until its check finished.
func (c *Client) startPolled(ctx context.Context, id string, in contract.Input, opts StartOptions) (Started, error) {
	run, err := c.startWorkflow(ctx, id, contract.WorkflowName, in, true)
	if err != nil {
		return Started{}, err
	}
	started := Started{WorkflowID: run.GetID(), RunID: run.GetRunID()}
	if opts.OnStarted != nil {
		opts.OnStarted(started)
	}
	return c.awaitCheck(ctx, started)
}

// refusesUpdateWithStart reports the errors of a server that does not take update-with-start
// (one from before it: Unimplemented) or has updates turned off on the namespace
// (PermissionDenied, frontend.enableUpdateWorkflowExecution): the start was not made.
func refusesUpdateWithStart(err error) bool {
	var unimplemented *serviceerror.Unimplemented
	var denied *serviceerror.PermissionDenied
	return errors.As(err, &unimplemented) || errors.As(err, &denied)
}

// startedAnyway finds the run an update-with-start that failed (its bound passed, the
// connection broke) may have started: the start operation's run if the server answered it, or
// else the RunCode run the id names now (the id was unused, or the start would have been refused).
func (c *Client) startedAnyway(ctx context.Context, op tclient.WithStartWorkflowOperation, id string) (Started, bool) {
	quick, cancel := context.WithTimeout(context.WithoutCancel(ctx), 50*time.Millisecond)
	run, err := op.Get(quick)
	cancel()
	if err == nil && run != nil {
		return Started{WorkflowID: run.GetID(), RunID: run.GetRunID()}, true
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	resp, err := c.tc.DescribeWorkflowExecution(dctx, id, "")
	if err != nil {
		return Started{}, false
	}
	info := resp.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != contract.WorkflowName || info.GetExecution().GetRunId() == "" {
		return Started{}, false
	}
	return Started{WorkflowID: id, RunID: info.GetExecution().GetRunId()}, true
}
