package activities

import (
	"context"
	"errors"
	"fmt"
	commonpb "go.temporal.io/api/common/v1"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc/codes"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Late results (issue 44). The SDK ends a sandbox activity's context when a heartbeat is
// answered "not found" (the server timed the attempt out) or fails past its retries (a cut
// connection: the server times it out soon), and when the attempt's own start-to-close deadline
// passes on this host's clock. None of these is a reason to stop code that may already have
// used its approval: the code runs on to the run's own limits (the guard's timeout and grace),
// its receipt is signed as always, and its result goes to the run as the signal
// contract.SignalLateResult, which the workflow takes only when the receipt verifies. A cancel
// the workflow asked for, the worker stopping, and an operator's pause or reset still stop it.

// DefaultLateResultWait is Config.LateResultWait's default.
const DefaultLateResultWait = 2 * time.Minute

// Backoff between two tries of a late result's delivery.
const (
	lateRetryFirst = time.Second
	lateRetryMax   = 15 * time.Second
)

// attemptMayBeLost reports whether the sandbox activity's context ctx ended while the server may
// have lost the attempt, or timed it out: the code goes on. It is false while ctx lives and when
// ctx ended because the code must stop: a cancel the workflow asked for, the worker stopping, a
// pause or a reset.
func attemptMayBeLost(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	cause := context.Cause(ctx)
	switch {
	case temporal.IsCanceledError(cause), errors.Is(cause, worker.ErrWorkerShutdown),
		errors.Is(cause, activity.ErrActivityPaused), errors.Is(cause, activity.ErrActivityReset),
		errors.Is(cause, context.Canceled):
		return false
	}
	return true
}

// codeContext returns the context a run's code runs with: ctx's values without its deadline,
// ended when ctx ends unless attemptMayBeLost (the run's own limits end the code then), and by
// stop with its cause (nil once the run is over).
func codeContext(ctx context.Context) (code context.Context, stop context.CancelCauseFunc) {
	code, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	unwatch := context.AfterFunc(ctx, func() {
		if !attemptMayBeLost(ctx) {
			cancel(context.Cause(ctx))
			return
		}
		activity.GetLogger(ctx).Warn("sandbox activity: the server may have lost this attempt; the code runs on to its own limits and its result goes to the run as a late result",
			"cause", context.Cause(ctx))
	})
	return code, func(cause error) {
		unwatch()
		cancel(cause)
	}
}

// runHeartbeat starts the heartbeats (beat) of the code of a run or a session's cell (code and
// stop from codeContext) and returns the context to run the backend with (its output feeds the
// heartbeats), what stops them, and the recorder of the output. Once the SDK
// gave the attempt up (attemptMayBeLost(ctx)) it can no longer tell the code of a cancel, so the
// heartbeats go to the server directly (beatLost) until it answers "not found".
func (a *Activities) runHeartbeat(ctx, code context.Context, stop context.CancelCauseFunc, info activity.Info, cell int) (context.Context, func(), *liveRecorder) {
	rec := newLiveRecorder(cell)
	gone := false // only the heartbeat goroutine calls record
	record := func(d contract.LiveOutput) {
		switch {
		case !attemptMayBeLost(ctx):
			activity.RecordHeartbeat(code, d)
		case !gone:
			gone = a.beatLost(ctx, info, d, stop)
		}
	}
	return guard.WithOutput(code, rec.write), beat(code, info.HeartbeatTimeout, rec, record), rec
}

// attemptGone asks the server, with a heartbeat of the host's own (details d), whether it still
// holds the attempt info names, just before the host answers with a result: a cut that began
// after the code ended and outlasted the heartbeat timeout leaves the SDK unaware, and its answer
// would be refused with the result lost. It reports true when the server answers "not found"
// (it timed the attempt out: the result goes as a late result). While the server cannot be
// reached it asks again, with backoff, for at most a.lateDelivery, calling waiting before the
// first wait; any other answer, and a worker that is stopping, is false (the SDK answers as
// always).
func (a *Activities) attemptGone(ctx context.Context, info activity.Info, d contract.LiveOutput, waiting func()) bool {
	details, err := a.dc.ToPayloads(d)
	if err != nil {
		return false
	}
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(a.lateDelivery)
	for wait := lateRetryFirst; ; wait = min(2*wait, lateRetryMax) {
		rctx, cancel := context.WithTimeout(ctx, MaxHeartbeatInterval)
		_, err := a.historyOf(ctx).WorkflowService().RecordActivityTaskHeartbeat(rctx, &workflowservice.RecordActivityTaskHeartbeatRequest{
			TaskToken: info.TaskToken, Details: details, Identity: hostIdentity, Namespace: info.Namespace})
		cancel()
		switch {
		case err == nil:
			return false
		case serviceerror.ToStatus(err).Code() == codes.NotFound:
			return true
		case !lateRetryable(err) || time.Now().Add(wait).After(deadline):
			return false
		}
		if wait == lateRetryFirst {
			waiting()
		}
		select {
		case <-time.After(wait):
		case <-activity.GetWorkerStopChannel(ctx):
			return false
		}
	}
}

// beatLost records a heartbeat with details d for the attempt info names through the run log's
// service, and stops the code when the server answers with a cancel, a pause or a reset (the
// attempt lives: a short cut). It reports whether the server answered "not found": the attempt
// is gone, and further heartbeats are pointless.
func (a *Activities) beatLost(ctx context.Context, info activity.Info, d contract.LiveOutput, stop context.CancelCauseFunc) bool {
	details, err := a.dc.ToPayloads(d)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), MaxHeartbeatInterval)
	defer cancel()
	resp, err := a.historyOf(ctx).WorkflowService().RecordActivityTaskHeartbeat(ctx, &workflowservice.RecordActivityTaskHeartbeatRequest{
		TaskToken: info.TaskToken, Details: details, Identity: hostIdentity, Namespace: info.Namespace})
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return true
	case resp.GetCancelRequested():
		stop(temporal.NewCanceledError())
	case resp.GetActivityPaused():
		stop(activity.ErrActivityPaused)
	case resp.GetActivityReset():
		stop(activity.ErrActivityReset)
	}
	return false
}

// lateRoute is where a late result goes and how: the run log that delivers it, the attempt it is
// the result of (its namespace, run and activity), what stops the retries (the worker stopping),
// and whether a worker other than the attempt's adopted the run (adopt.go).
type lateRoute struct {
	log     RunLog
	info    activity.Info
	stop    <-chan struct{}
	adopted bool
	// spool keeps the late result in the host's spool before it is sent, so that a worker
	// started after this one dies sends it (nil: not kept).
	spool *spool
}

// activityRoute is the route of the late result of the sandbox activity whose context is ctx.
func (a *Activities) activityRoute(ctx context.Context, info activity.Info) lateRoute {
	return lateRoute{log: a.historyOf(ctx), info: info, stop: activity.GetWorkerStopChannel(ctx), spool: a.spool}
}

// answerLate delivers res, the signed result of the code of a run or a cell that ran under code
// (codeContext), as a late result by route to when the server may have lost its attempt: the SDK
// gave the attempt up, or the server answers the host's own probe "not found" (attemptGone,
// spooling res while it waits). A cancel, a stopping worker, a pause or a reset (code ended)
// deliver nothing.
func (a *Activities) answerLate(ctx, code context.Context, to lateRoute, c guard.Checked, res guard.Result, live *liveRecorder) {
	if code.Err() != nil {
		return
	}
	if attemptMayBeLost(ctx) || a.attemptGone(ctx, to.info, live.snapshot(), func() { a.keepLate(to, c, res) }) {
		a.deliverLate(ctx, to, c, res)
	}
}

// lateInput is the signal's input for res, a late result by route to: contract.LateResult
// encoded with the worker's data converter (its payload codec too: the result holds output).
func (a *Activities) lateInput(to lateRoute, res guard.Result) (*commonpb.Payloads, error) {
	return a.dc.ToPayloads(contract.LateResult{RunID: to.info.WorkflowExecution.RunID, ActivityID: to.info.ActivityID, Result: res})
}

// keepLate spools res, the signed result of the run of c, for a worker started after this one
// dies (a no-op when the route keeps nothing, or res has no receipt).
func (a *Activities) keepLate(to lateRoute, c guard.Checked, res guard.Result) {
	if to.spool == nil || res.Receipt == nil {
		return
	}
	input, err := a.lateInput(to, res)
	if err == nil {
		err = to.spool.putLate(c.Owner, input)
	}
	if err != nil {
		a.emitLate(context.Background(), to, c, 0, fmt.Errorf("not spooled (it is lost if this worker dies first): %w", err))
	}
}

// deliverLate sends res, the signed result of a run whose attempt may have been lost, to the run
// as contract.SignalLateResult (lateInput), spooled first (keepLate). A result without a receipt
// is not sent: nothing could verify it.
func (a *Activities) deliverLate(ctx context.Context, to lateRoute, c guard.Checked, res guard.Result) {
	ctx = context.WithoutCancel(ctx)
	if res.Receipt == nil {
		a.emitLate(ctx, to, c, 0, errors.New("this host signs no receipts, so no run could take its late result"))
		return
	}
	input, err := a.lateInput(to, res)
	if err != nil {
		a.emitLate(ctx, to, c, 0, err)
		return
	}
	a.keepLate(to, c, res)
	a.sendLate(ctx, to, c, input)
}

// sendLate sends input, a late result of the run of c, to the run as contract.SignalLateResult.
// It tries again with backoff for a.lateDelivery while the server cannot be reached (and the
// worker is not stopping), and emits contract.EventSandboxLateResult saying whether it was
// delivered.
func (a *Activities) sendLate(ctx context.Context, to lateRoute, c guard.Checked, input *commonpb.Payloads) {
	var err error
	deadline := time.Now().Add(a.lateDelivery)
	tries := 0
retry:
	for wait := lateRetryFirst; ; wait = min(2*wait, lateRetryMax) {
		tries++
		err = signalRun(ctx, to.log, to.info, contract.SignalLateResult, input)
		if err == nil || !lateRetryable(err) || time.Now().Add(wait).After(deadline) {
			break
		}
		select {
		case <-time.After(wait):
		case <-to.stop:
			err = fmt.Errorf("the worker is stopping: %w", err)
			break retry
		}
	}
	a.emitLate(ctx, to, c, tries, err)
}

// lateRetryable reports whether a late result's signal that failed with err may go through
// later: not when the run is gone or ended ("not found": nothing waits for the result), the
// server refuses the request as such, or the namespace is not there.
func lateRetryable(err error) bool {
	switch serviceerror.ToStatus(err).Code() {
	case codes.NotFound, codes.InvalidArgument, codes.PermissionDenied, codes.FailedPrecondition, codes.Unimplemented:
		return false
	}
	return true
}

// emitLate emits contract.EventSandboxLateResult for the run of c: delivered (err nil), or
// given up with err after tries signals.
func (a *Activities) emitLate(ctx context.Context, to lateRoute, c guard.Checked, tries int, err error) {
	d := map[string]any{
		"workflow_id": c.Owner.WorkflowID,
		"run_id":      c.Owner.RunID,
		"activity_id": c.Owner.ActivityID,
		"digest":      c.Digest,
		"delivered":   err == nil,
		"tries":       tries,
	}
	if to.adopted {
		d["adopted"] = true
	}
	if err != nil {
		d["error"] = err.Error()
	}
	addMetadata(d, c.Metadata)
	a.sink.Emit(ctx, Event{Type: contract.EventSandboxLateResult, Time: time.Now(), Data: d})
}
