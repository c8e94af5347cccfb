package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// lateResultChange marks the runs that wait for a late result (contract.SignalLateResult) after
// the server timed out their sandbox activity while a host's claim on the approval was held. It
// is asked only on that path, so histories without such a timeout replay unchanged.
const lateResultChange = "late-result-v1"

// Timeouts of a lost sandbox attempt, as guard.Recovered.Timeout names them.
const (
	timeoutHeartbeat    = "heartbeat"
	timeoutStartToClose = "start_to_close"
)

// lostAttempt is a sandbox activity that the server timed out while its host may still run the
// code: its id, the timeout's kind and the activity's error.
type lostAttempt struct {
	activityID, timeout string
	err                 error
	// codeMayRunFor is how much longer the code may run after the timeout: up to the run's own
	// limits (timeout and grace) after a heartbeat timeout, none after a start-to-close one.
	codeMayRunFor time.Duration
}

// lateResultDue returns the sandbox attempt whose timeout ended the activity with err, when the
// run waits for its late result: a heartbeat or start-to-close timeout, no cancel accepted, a
// wait and hosts' keys recorded by the check (no receipt can be checked without them), and a
// host's claim on the approval held (without one no code started). The version marker is asked
// last, so that only such a run records it.
func (r *runCode) lateResultDue(ctx workflow.Context, check contract.CheckResult, err error) (lostAttempt, bool) {
	if r.cancel != nil || check.Run.LateResultWait <= 0 || check.Hosts == nil {
		return lostAttempt{}, false
	}
	lost, ok := lostAttemptOf(err)
	if !ok || !r.heldClaim() {
		return lostAttempt{}, false
	}
	// Version 2 waits for the code's own limits too after a heartbeat timeout (a worker that was
	// SIGKILLed at the start of a long run leaves its code running for all of them).
	v := workflow.GetVersion(ctx, lateResultChange, workflow.DefaultVersion, 2)
	if v == workflow.DefaultVersion {
		return lostAttempt{}, false
	}
	if v >= 2 && lost.timeout == timeoutHeartbeat {
		lost.codeMayRunFor = r.checked.Limits.Timeout + check.Run.Grace
	}
	return lost, true
}

// lostAttemptOf is the sandbox (or cell) attempt an activity error err says the server timed
// out, with its code possibly running on: a heartbeat or a start-to-close timeout.
func lostAttemptOf(err error) (lostAttempt, bool) {
	var ae *temporal.ActivityError
	if !errors.As(err, &ae) {
		return lostAttempt{}, false
	}
	lost := lostAttempt{activityID: ae.ActivityID(), err: err}
	switch {
	case timedOut(err, enumspb.TIMEOUT_TYPE_HEARTBEAT):
		lost.timeout = timeoutHeartbeat
	case timedOut(err, enumspb.TIMEOUT_TYPE_START_TO_CLOSE):
		lost.timeout = timeoutStartToClose
	default:
		return lostAttempt{}, false
	}
	return lost, true
}

// awaitLateResult waits up to check.Run.LateResultWait, after the time lost's code may still
// run, for a late result of lost and takes the
// first that checkLateResult accepts; each refused one is counted, logged and ignored. It
// schedules nothing: the code never runs again. No late result in time ends the run "outcome
// unknown", as a lost attempt did before late results; a cancel (the update, or Temporal's)
// ends the wait as a cancel of a claimed run does. ran is false when the run ends without a
// result, with err as the workflow's answer. retry says the wait ended because the claims were
// released (by the worker that adopted the dead host's spool): lost's code never started, and
// the run tries again in a fresh activity (retryLost).
func (r *runCode) awaitLateResult(ctx, runCtx workflow.Context, check contract.CheckResult, d contract.Decision, lost lostAttempt) (res guard.Result, ran, retry bool, err error) {
	wait := lost.codeMayRunFor + check.Run.LateResultWait
	r.status.LateResultDeadline = workflow.Now(ctx).Add(wait)
	timerCtx, stopTimer := workflow.WithCancel(runCtx)
	defer stopTimer()
	var (
		got    *guard.Result
		ended  bool
		unused error
	)
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(timerCtx, wait), func(workflow.Future) { ended = true })
	sel.AddReceive(workflow.GetSignalChannel(ctx, contract.SignalLateResult), func(c workflow.ReceiveChannel, _ bool) {
		var lr contract.LateResult
		if !c.ReceiveAsync(&lr) { // what the channel held was no late result (the SDK drops it)
			return
		}
		if res, err := r.checkLateResult(ctx, check, lr, d, lost); err != nil {
			r.status.RejectedLateResults++
			r.status.LastLateRejection = err.Error()
			r.event(ctx, contract.EventReceiptRefused, "approval_id", d.ApprovalID, "late_result", true,
				"activity_id", lost.activityID, "error", err.Error())
		} else {
			got = &res
		}
	})
	sel.AddReceive(r.released, func(c workflow.ReceiveChannel, _ bool) {
		c.ReceiveAsync(nil)
		retry, unused = r.retryLost(ctx, check.Run, lost)
	})
	for got == nil && !ended && !retry && unused == nil {
		sel.Select(ctx)
	}
	switch {
	case retry:
		r.status.LateResultDeadline = time.Time{}
		return guard.Result{}, false, true, nil
	case unused != nil:
		return guard.Result{}, false, false, r.fail(ctx, unused)
	}
	switch {
	case got != nil:
		r.event(ctx, contract.EventSandboxRecovered, "approval_id", d.ApprovalID, "activity_id", lost.activityID,
			"timeout", lost.timeout, "outcome", got.Outcome.String())
		return *got, true, false, nil
	case ctx.Err() != nil:
		return guard.Result{}, false, false, r.cancelled(ctx, lost.err)
	case r.cancel != nil:
		return guard.Result{}, false, false, r.fail(ctx, lostOutcome(lost, "cancelled while waiting for its late result"))
	}
	return guard.Result{}, false, false, r.fail(ctx, lostOutcome(lost, "no late result within "+wait.String()))
}

// lostOutcome is the IntegrationError of a run whose lost attempt's outcome stays unknown, and
// why.
func lostOutcome(lost lostAttempt, why string) error {
	return &guard.IntegrationError{
		Op: "run sandbox",
		Err: fmt.Errorf("the server timed out sandbox activity %s (%s) after a sandbox host claimed the approval; %s: outcome unknown; the approval was used: %w",
			lost.activityID, lost.timeout, why, lost.err),
		CodeMayHaveStarted: true,
	}
}

// checkLateResult returns lr's result, marked recovered, when its receipt verifies against the
// hosts the check recorded and is this run's (as checkReceipt requires), of the timed-out
// activity and of a claim the history shows held, and the result is what the receipt signs. A
// refusal is a *guard.ReceiptRefused. lr's own run and activity ids are the sender's word and
// are not read: the receipt's are.
func (r *runCode) checkLateResult(ctx workflow.Context, check contract.CheckResult, lr contract.LateResult, d contract.Decision, lost lostAttempt) (guard.Result, error) {
	res := lr.Result
	st, err := verifyResult(check.Hosts, res, r.receiptExpect(d))
	switch {
	case err != nil:
		return guard.Result{}, err
	case st.ActivityID != lost.activityID:
		return guard.Result{}, &guard.ReceiptRefused{Field: "activity_id",
			Msg: fmt.Sprintf("the receipt is of sandbox activity %.64q; the one the server timed out is %q", st.ActivityID, lost.activityID)}
	case !r.holds(st.Claim):
		return guard.Result{}, &guard.ReceiptRefused{Field: "claim",
			Msg: fmt.Sprintf("the receipt names claim %.80q, which this run's history does not show held", st.Claim)}
	}
	res.Recovered = &guard.Recovered{At: workflow.Now(ctx), How: guard.RecoveredLateResult, ActivityID: lost.activityID, Timeout: lost.timeout}
	return res, nil
}

// dropLateResults reads and drops the late results that reach the run when nothing waits for
// them (a run whose activity ended in time, or after the wait), for the rest of the run.
func dropLateResults(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, contract.SignalLateResult)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var lr contract.LateResult
			if !ch.Receive(ctx, &lr) {
				return
			}
		}
	})
}
