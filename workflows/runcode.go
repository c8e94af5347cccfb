package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// checkTimeout bounds the local activity that applies the policy.
const checkTimeout = 30 * time.Second

// acts is only used for its methods' names and types: the workflow calls the activities as typed
// method values, so the compiler checks their arguments and results.
var acts *activities.Activities

// runCode is the state of one RunCode run. Handlers (query, signal, update) and the main
// coroutine share it; workflow coroutines never run at the same time.
type runCode struct {
	status  contract.Status
	checked guard.Checked
	// desk takes the run's decisions (desk.go); ballot is what it keeps of them.
	desk desk
	ballot
	// sandboxQueue is where the code would run.
	sandboxQueue string
	// cancel is the accepted cancel request (the update "cancel"), if any.
	cancel *guard.Cancellation
	// The edit of quorum.go.
	editState
	// The sandbox hosts' claims (claims.go).
	claimsSeen
	// The decisions answered once the run has ended (decidewait.go).
	endWait
	// clock holds the times of the status's phases (phases.go).
	clock phaseClock
}

// RunCode checks a request against the worker's policy, waits for a reviewer's decision, and
// runs the approved code at most once. See the package documentation for every step.
func RunCode(ctx workflow.Context, in contract.Input) (guard.Result, error) {
	info := workflow.GetInfo(ctx)
	r := &runCode{status: contract.Status{State: contract.StatusChecking,
		WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}}
	r.clock.begun = info.WorkflowStartTime
	res, err := r.runCode(ctx, in)
	if err == nil {
		r.status.Phases = r.clock.phases(workflow.Now(ctx), &res)
	} else {
		r.status.Phases = r.clock.phases(workflow.Now(ctx), nil)
	}
	dropLateResults(ctx)
	r.finish(ctx, res, err)
	return res, err
}

// runCode is RunCode's body: every step, from the check to the result.
func (r *runCode) runCode(ctx workflow.Context, in contract.Input) (guard.Result, error) {
	info := workflow.GetInfo(ctx)
	if err := r.setHandlers(ctx); err != nil {
		return guard.Result{}, err
	}
	// runCtx is what an accepted cancel request cancels: the wait, the sandbox activity.
	runCtx, stopRun := workflow.WithCancel(ctx)
	if err := r.setCancelHandler(ctx, stopRun); err != nil {
		return guard.Result{}, err
	}

	// 1. Check.
	check, err := r.checkAnswering(ctx, in) // answers the update await-check (checkwait.go)
	if err != nil {
		return guard.Result{}, r.fail(ctx, err)
	}

	// 2. Announce.
	r.startQuorum(ctx, in, check)
	if err := r.announce(ctx, in, check, info.TaskQueueName); err != nil {
		return guard.Result{}, err
	}
	if err := r.notifyRun(ctx, check); err != nil {
		return guard.Result{}, fmt.Errorf("workflows: notify: %w", err)
	}

	// 3. Wait for a decision.
	d, approved, err := r.awaitDecision(ctx, check)
	if !approved {
		return guard.Result{}, err
	}

	// 4. Run, at most once for this approval.
	if err := r.setState(ctx, contract.StatusRunning); err != nil {
		return guard.Result{}, err
	}
	res, ran, err := r.runApproved(ctx, runCtx, check, d)
	if !ran {
		return guard.Result{}, err
	}
	if res.Outcome == guard.OutcomeCancelled {
		res.Cancelled = r.cancel // nil when Temporal's own cancellation stopped it
	}

	// 5. Result: the sandbox host set its approval fields (approval id, reviewer, digest), as it
	// verified them.
	if err := r.setState(ctx, contract.FinalState(res.Outcome)); err != nil {
		return guard.Result{}, err
	}
	return res, nil
}

// awaitDecision waits for a reviewer's decision (a signal or the decide update), a cancel or the
// approval timeout, and records it. approved is false when the run ends here (denied, expired,
// cancelled), with err as the workflow's answer.
func (r *runCode) awaitDecision(ctx workflow.Context, check contract.CheckResult) (d contract.Decision, approved bool, err error) {
	signals := workflow.GetSignalChannel(ctx, contract.SignalApproval)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var d contract.Decision
			signals.Receive(ctx, &d)
			r.onSignal(ctx, d)
		}
	})
	waitStart := workflow.Now(ctx)
	decided, err := workflow.AwaitWithTimeout(ctx, check.ApprovalTimeout, func() bool { return r.decision != nil || r.cancel != nil })
	r.waitSpan(ctx, waitStart, decided, err)
	switch {
	case err != nil:
		return contract.Decision{}, false, r.cancelled(ctx, err)
	case r.cancel != nil:
		// A cancel accepted before (or with) a decision: the decision is never used.
		return contract.Decision{}, false, r.cancelledBeforeRun(ctx)
	case !decided:
		r.event(ctx, contract.EventApprovalExpired, "approval_timeout", check.ApprovalTimeout.String())
		return contract.Decision{}, false, r.end(ctx, contract.StatusExpired, &guard.ApprovalDenied{
			Reason:  guard.DeniedExpired,
			Message: "no decision within the approval timeout of " + check.ApprovalTimeout.String(),
		})
	}
	d = *r.decision
	if err := r.desk.taken(ctx, r.seat(), d); err != nil {
		return contract.Decision{}, false, err
	}
	if !d.Approve {
		return contract.Decision{}, false, r.end(ctx, contract.StatusDenied, &guard.ApprovalDenied{
			Reason: guard.DeniedByReviewer, Reviewer: d.Reviewer, Message: d.Reason,
		})
	}
	return d, true, nil
}

// runApproved runs the approved request in the sandbox activity (on runCtx, which an accepted
// cancel cancels) and checks the host's receipt; after the server timed out an activity whose
// host claimed the approval, it waits for the host's late result. ran is false when the run ends without a result,
// with err as the workflow's answer.
func (r *runCode) runApproved(ctx, runCtx workflow.Context, check contract.CheckResult, d contract.Decision) (res guard.Result, ran bool, err error) {
	for {
		res, err = r.run(runCtx, check.Run, d)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return guard.Result{}, false, r.cancelled(ctx, err)
		}
		if r.cancel != nil && stoppedBeforeStart(err) {
			if cerr := r.cancelledAfterClaim(ctx, err); cerr != nil {
				return guard.Result{}, false, r.fail(ctx, cerr)
			}
			return guard.Result{}, false, r.cancelledBeforeRun(ctx)
		}
		if lost, isLost := lostAttemptOf(err); isLost {
			retry, unused := r.retryLost(ctx, check.Run, lost) // lostattempt.go: its code never started
			if retry {
				continue
			}
			if unused != nil {
				return guard.Result{}, false, r.fail(ctx, unused)
			}
		}
		if lost, due := r.lateResultDue(ctx, check, err); due {
			res, ran, retry, err := r.awaitLateResult(ctx, runCtx, check, d, lost) // lateresult.go
			if retry {
				continue
			}
			return res, ran, err
		}
		return guard.Result{}, false, r.fail(ctx, err)
	}
	if err := r.checkReceipt(ctx, check.Hosts, res, d); err != nil {
		return guard.Result{}, false, r.fail(ctx, err)
	}
	return res, true, nil
}

// setHandlers registers the status query and the decide update with its validator.
func (r *runCode) setHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.Status, error) { return r.status, nil }); err != nil {
		return fmt.Errorf("workflows: set query handler: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateDecide, r.decide,
		workflow.UpdateHandlerOptions{Validator: r.validateDecide}); err != nil {
		return fmt.Errorf("workflows: set update handler: %w", err)
	}
	// Sandbox hosts' claims are for them to read in the history; the workflow notes which are
	// held, for a sandbox activity that ends cancelled (claims.go).
	r.readClaims(ctx, workflow.GetSignalChannel(ctx, contract.SignalSandboxClaim))
	return nil
}

// announce records what the check recorded (the request, the reviewer keys, where the code
// would run), sets the search attributes and logs approval.requested.
func (r *runCode) announce(ctx workflow.Context, in contract.Input, check contract.CheckResult, workflowQueue string) error {
	r.checked = check.Checked
	r.clock.checked = workflow.Now(ctx)
	r.status.Phases = r.clock.phases(time.Time{}, nil)
	r.desk.reviewers = check.Reviewers
	r.sandboxQueue = sandboxQueue(in, check.Run, workflowQueue)
	r.status.SandboxTaskQueue = r.sandboxQueue
	// Recorded at check time: a history from before version 2 replays with version 1.
	r.desk.statementVersion = max(check.StatementVersion, approval.StatementVersion1)
	if check.StatementVersion != 0 {
		r.status.StatementVersion = check.StatementVersion
	}
	r.status.Request = r.checked.Summary()
	r.status.ApprovalDeadline = workflow.Now(ctx).Add(check.ApprovalTimeout)
	attrs := []temporal.SearchAttributeUpdate{contract.DigestKey.ValueSet(r.checked.Digest),
		contract.LanguageKey.ValueSet(r.checked.Language), contract.BackendKey.ValueSet(r.checked.Backend)}
	if check.Rules != nil {
		// The policy's caps count runs by agent. Only checks with rules record Rules, so a
		// history recorded before them replays the same command.
		attrs = append(attrs, contract.AgentKey.ValueSet(r.checked.Metadata.Agent))
	}
	if err := r.setState(ctx, contract.StatusAwaitingApproval, attrs...); err != nil {
		return err
	}
	r.requestedEvent(ctx, check.ApprovalTimeout)
	return nil
}

// check applies the worker's policy in a local activity and returns what it recorded.
func (r *runCode) check(ctx workflow.Context, in contract.Input) (contract.CheckResult, error) {
	return checkLocally[contract.CheckResult](ctx, acts.SandboxCheck, contract.CheckInput{Request: in.Request}, "request")
}

// checkLocally runs the policy's check activity on in as a local activity (checkTimeout, three
// attempts) and returns what it recorded. A typed guard error comes back as one (ToolUsageError
// or ConfigError); any other is wrapped, naming what was checked.
func checkLocally[Out any](ctx workflow.Context, activity, in any, what string) (Out, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: checkTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var res Out
	err := workflow.ExecuteLocalActivity(ctx, activity, in).Get(ctx, &res)
	if err != nil {
		if gerr := contract.FromFailure(err); guard.TypeOf(gerr) != "" {
			return res, gerr
		}
		return res, fmt.Errorf("workflows: check %s: %w", what, err)
	}
	return res, nil
}

// run schedules the sandbox activity. The activity is never retried by Temporal
// (MaximumAttempts 1): a failure from before the code could start (guard.Retryable) is retried
// here, with backoff (at least the server's Retry-After that the failure carries, bounded by
// MaxStartBackoff), by scheduling a fresh activity; any other failure ends the run. A lost
// worker (heartbeat or start-to-close timeout) or any failure the workflow cannot classify is an
// IntegrationError whose outcome is unknown: the approval was used and nothing runs again (after
// a timeout, runApproved may still take the host's late result).
func (r *runCode) run(ctx workflow.Context, opts contract.RunOptions, d contract.Decision) (guard.Result, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              r.sandboxQueue,
		ScheduleToStartTimeout: opts.ScheduleToStartTimeout,
		StartToCloseTimeout:    r.checked.Limits.Timeout + opts.Grace + opts.ReportMargin,
		HeartbeatTimeout:       opts.HeartbeatTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		WaitForCancellation:    true,
	})
	input := r.withApprovals(contract.RunInput{Checked: r.checked, Decision: d})
	backoff := opts.StartBackoff
	// Attempts count over the whole run: a fresh activity after a lost attempt whose code never
	// started (lostattempt.go) is one more.
	for attempt := r.status.RunAttempts + 1; ; attempt++ {
		r.status.RunAttempts = attempt
		r.clock.schedule(ctx)
		r.status.Phases = r.clock.phases(time.Time{}, nil)
		var res guard.Result
		err := workflow.ExecuteActivity(ctx, acts.SandboxRun, input).Get(ctx, &res)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return guard.Result{}, err
		}
		if notStarted := r.notPickedUp(err, opts.ScheduleToStartTimeout); notStarted != nil {
			return guard.Result{}, notStarted
		}
		gerr := contract.FromFailure(err)
		switch {
		case guard.TypeOf(gerr) == "":
			return guard.Result{}, &guard.IntegrationError{
				Op:                 "run sandbox",
				Err:                fmt.Errorf("outcome unknown; the approval was used: %w", err),
				CodeMayHaveStarted: true,
			}
		case !guard.Retryable(gerr):
			var ie *guard.IntegrationError
			if errors.As(gerr, &ie) {
				return guard.Result{}, &guard.IntegrationError{
					Op:                 "run sandbox",
					Err:                fmt.Errorf("outcome unknown; the approval was used: %w", gerr),
					CodeMayHaveStarted: true,
				}
			}
			return guard.Result{}, gerr
		case attempt >= opts.StartAttempts:
			return guard.Result{}, &guard.IntegrationError{
				Op:  fmt.Sprintf("run sandbox: the backend failed before the code could start, %d times", attempt),
				Err: gerr,
			}
		}
		var serr error
		if backoff, serr = startBackoff(ctx, opts, attempt, backoff, err, gerr, r.checked.Digest); serr != nil {
			return guard.Result{}, serr
		}
	}
}

// startBackoff waits before the next attempt of an activity whose attempt failed with err (gerr,
// typed) before anything could start: backoff, or the server's Retry-After that err carries
// (from history) when longer, bounded by MaxStartBackoff. It logs sandbox.retry with digest and
// returns the next backoff, or the error that ended the wait.
func startBackoff(ctx workflow.Context, opts contract.RunOptions, attempt int, backoff time.Duration, err, gerr error, digest string) (time.Duration, error) {
	wait := max(backoff, min(contract.RetryDelay(err), opts.MaxStartBackoff))
	workflow.GetLogger(ctx).Warn(string(contract.EventSandboxRetry), "event", string(contract.EventSandboxRetry), "attempt", attempt,
		"backoff", wait.String(), "digest", digest, "error", gerr.Error())
	if err := workflow.Sleep(ctx, wait); err != nil {
		return backoff, err
	}
	return min(backoff*2, opts.MaxStartBackoff), nil
}

// onSignal handles a decision sent as a signal: it is accepted, or rejected (counted, logged and
// otherwise ignored), or ignored because a decision was already accepted.
func (r *runCode) onSignal(ctx workflow.Context, d contract.Decision) {
	v, rej := r.refusal(ctx, d)
	if rej == nil && d.Edit != nil {
		rej = &contract.Rejection{Reason: contract.RejectEdit, Msg: "an edit is taken only as the update " + contract.UpdateDecide + ", whose answer says whether the policy accepts the edited code"}
	}
	if rej == nil {
		r.desk.accept(ctx, r.seat(), d, v, contract.ViaSignal)
		return
	}
	why := rej.Error()
	if r.decision != nil || r.status.State != contract.StatusAwaitingApproval {
		r.status.IgnoredDecisions++
	} else {
		r.status.RejectedDecisions++
		r.status.LastRejection = why
	}
	r.desk.rejected(ctx, r.seat(), d, contract.ViaSignal, rej)
}

// validateDecide is the update's validator (desk.validate).
func (r *runCode) validateDecide(ctx workflow.Context, d contract.Decision) error {
	return r.desk.validate(ctx, r.seat(), d)
}

// decide is the update's handler for a decision the validator let through (desk.decide); an
// edit is decideEdit's.
func (r *runCode) decide(ctx workflow.Context, d contract.Decision) (contract.DecideResult, error) {
	if d.Edit != nil {
		return r.decideEdit(ctx, d)
	}
	s := r.seat()
	res, rej := r.desk.decide(ctx, s, d)
	if rej != nil {
		return contract.DecideResult{}, rej.Failure()
	}
	out, err := r.desk.answerWhenEnded(ctx, s, d.Wait, res)
	return answerFor(d, out), err
}

// setState records the state in the status and the SandboxStatus search attribute, with any
// other search attributes given.
func (r *runCode) setState(ctx workflow.Context, state string, more ...temporal.SearchAttributeUpdate) error {
	r.status.State = state
	return upsertStatus(ctx, state, more...)
}

// end records a final state and returns the typed error that ends the run, as a Temporal
// application error.
func (r *runCode) end(ctx workflow.Context, state string, err error) error {
	r.status.Error = err.Error()
	return failed(r.setState(ctx, state), err)
}

// fail ends the run in contract.StatusError.
func (r *runCode) fail(ctx workflow.Context, err error) error {
	return r.end(ctx, contract.StatusError, err)
}

// cancelled ends a cancelled run and returns the cancellation.
func (r *runCode) cancelled(ctx workflow.Context, err error) error {
	r.status.Error = "cancelled"
	return cancelledWith(ctx, r.setState(ctx, contract.StatusCancelled), err)
}

// event writes a workflow event (logEvent) of the run's digest. It never carries code, env values
// or file contents unless the request set capture_content (see requestedEvent).
func (r *runCode) event(ctx workflow.Context, typ contract.EventType, kv ...any) {
	logEvent(ctx, typ, "digest", r.checked.Digest, kv...)
}

func (r *runCode) requestedEvent(ctx workflow.Context, approvalTimeout time.Duration) {
	c := r.checked
	var inputBytes int
	for _, f := range c.Files {
		inputBytes += len(f.Content)
	}
	kv := []any{
		"language", c.Language, "backend", c.Backend, "code_bytes", len(c.Code),
		"input_files", len(c.Files), "input_bytes", inputBytes, "env_vars", len(c.Env),
		"network", c.Network, "timeout", c.Limits.Timeout.String(),
		"approval_timeout", approvalTimeout.String(), "capture_content", c.CaptureContent,
	}
	if c.CaptureContent {
		kv = append(kv, "code", c.Code, "env", c.Env)
	}
	r.event(ctx, contract.EventApprovalRequested, kv...)
}
