package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// cellLateChange marks the sessions that wait for a cell's late result (contract.SignalLateResult)
// after the server timed out its SessionCell activity while the cell may have run on: a cut
// connection or late heartbeats leave the sandbox and its host alive, and the host delivers the
// cell's result, with its receipt, when it reaches the server again. It is asked only on that
// path, so histories without such a timeout replay unchanged.
const cellLateChange = "cell-late-result-v1"

// cellLateDue returns the attempt of the current cell whose timeout ended its activity with err,
// when the session waits for its late result: a heartbeat or start-to-close timeout, no cancel
// of the cell, and a wait and hosts' keys recorded by the check (no receipt can be checked
// without them). The version marker is asked last, so that only such a session records it.
func (r *session) cellLateDue(ctx workflow.Context, err error) (lostAttempt, bool) {
	if r.cell().Cancel != nil || r.opts.LateResultWait <= 0 || r.hosts == nil {
		return lostAttempt{}, false
	}
	lost, ok := lostAttemptOf(err)
	if !ok {
		return lostAttempt{}, false
	}
	if lost.timeout == timeoutHeartbeat {
		lost.codeMayRunFor = r.checked.Limits.Timeout + r.opts.Grace
	}
	if workflow.GetVersion(ctx, cellLateChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return lostAttempt{}, false
	}
	return lost, true
}

// awaitCellLate waits, for the time the cell's code may still run and then the recorded
// late-result wait, for a late result of the current cell's lost attempt, and returns the first
// that checkCellLate accepts (ok); each refused one is logged and ignored. It schedules nothing:
// the cell never runs again. The session's cancel ends the wait.
func (r *session) awaitCellLate(ctx workflow.Context, lost lostAttempt) (res guard.Result, ok bool, wait string) {
	d := lost.codeMayRunFor + r.opts.LateResultWait
	timerCtx, stopTimer := workflow.WithCancel(ctx)
	defer stopTimer()
	ended := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(timerCtx, d), func(workflow.Future) { ended = true })
	sel.AddReceive(workflow.GetSignalChannel(ctx, contract.SignalLateResult), func(c workflow.ReceiveChannel, _ bool) {
		var lr contract.LateResult
		if !c.ReceiveAsync(&lr) {
			return
		}
		got, err := r.checkCellLate(ctx, lr, lost)
		if err != nil {
			r.event(ctx, contract.EventReceiptRefused, "cell", r.cell().Cell, "late_result", true,
				"activity_id", lost.activityID, "error", err.Error())
			return
		}
		res, ok = got, true
	})
	for !ok && !ended {
		sel.Select(ctx)
	}
	if ok {
		r.event(ctx, contract.EventSandboxRecovered, "cell", r.cell().Cell, "activity_id", lost.activityID,
			"timeout", lost.timeout, "outcome", res.Outcome.String())
	}
	return res, ok, d.String()
}

// checkCellLate returns lr's result, marked recovered, when its receipt verifies against the
// hosts the check recorded, is the current cell's as any cell result's receipt must be (the
// session's run, the cell's digest and index, chained to the receipt of the cell before it,
// every approval the workflow accepted) and of the timed-out activity, and the result is what it
// signs. lr's own run and activity ids are the sender's word and are not read.
func (r *session) checkCellLate(ctx workflow.Context, lr contract.LateResult, lost lostAttempt) (guard.Result, error) {
	res := lr.Result
	st, err := verifyResult(r.hosts, res, r.cellExpect(r.cell()))
	switch {
	case err != nil:
		return guard.Result{}, err
	case st.ActivityID != lost.activityID:
		return guard.Result{}, &guard.ReceiptRefused{Field: "activity_id",
			Msg: fmt.Sprintf("the receipt is of activity %.64q; the cell's timed-out one is %q", st.ActivityID, lost.activityID)}
	}
	r.lastReceipt = receipt.Hash(*res.Receipt)
	res.Recovered = &guard.Recovered{At: workflow.Now(ctx), How: guard.RecoveredLateResult, ActivityID: lost.activityID, Timeout: lost.timeout}
	return res, nil
}
