package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// adoptSlack is added to a run's timeout and grace for how long an adopting worker follows its
// sandbox: the container's start, and its report's reading.
const adoptSlack = time.Minute

// spoolRun writes the spool entry of the run of c, whose sandbox got holds and whose approval
// claim holds, so that a worker started after this one dies can deliver its result (Adopt);
// it returns what removes the entry once the activity answered. The entry is written beside the
// sending of the code, off the run's critical path (a worker that dies in those few
// milliseconds leaves the run "outcome unknown", as without a spool). Nothing is spooled when no
// worker could adopt the run: no spool, no host key (no receipt, no late result), a backend that
// is no Adopter, or a sandbox not taken.
func (a *Activities) spoolRun(ctx context.Context, info activity.Info, c guard.Checked, in contract.RunInput, got acquiredSandbox, cl *claim, approvals []guard.Approval) func() {
	if a.spool == nil || a.hostKey == nil || a.guarded.Adopter() == nil || got.err != nil {
		return func() {}
	}
	e := spooled{
		Namespace: info.Namespace, Owner: c.Owner, Sandbox: got.prepared.SandboxID(),
		Digest: c.Digest, Backend: c.Backend, Limits: c.Limits, Egress: c.Egress, Secrets: c.Secrets, Metadata: c.Metadata,
		Claim: cl.msg.Commitment, ApprovalID: in.Decision.ApprovalID, Reviewer: in.Decision.Reviewer,
		Approvals: approvals, Edit: in.Edit, Started: time.Now(),
	}
	written := make(chan func(), 1)
	go func() {
		drop, err := a.spool.put(e)
		if err != nil {
			activity.GetLogger(ctx).Warn("sandbox activity: the run is not spooled: if this worker dies while the code runs, no other worker can deliver its result", "error", err)
			drop = func() {}
		}
		written <- drop
	}()
	return func() { (<-written)() }
}

// Adopt delivers the results of the runs whose worker died on this host while their code ran
// (spool.go): for each entry of a worker that is gone it waits for the code to end in its
// sandbox (guard.Adopter), signs the receipt and delivers the result late through log, as the
// activity would have. A sandbox that is gone, or kept no report, leaves the run to end
// "outcome unknown", as it would have without adoption. It takes over the sessions of those
// workers too (adoptsession.go), and calls poll with each one's host task queue, which this
// worker must then poll with RegisterHost's activities. Call it once the worker runs (its
// results go to runs that wait for them); it returns when every entry was handled, or ctx
// ended (the entries left are the next worker's).
func (a *Activities) Adopt(ctx context.Context, log RunLog, poll func(queue string)) {
	if a.spool == nil {
		return
	}
	orphans, err := a.spool.orphans()
	if err != nil {
		a.sink.Emit(ctx, Event{Type: contract.EventSandboxLateResult, Time: time.Now(),
			Data: map[string]any{"adopted": true, "delivered": false, "error": "read the spool: " + err.Error()}})
	}
	var wg sync.WaitGroup
	for _, o := range orphans {
		for _, path := range o.entries {
			wg.Go(func() {
				if a.adoptEntry(ctx, log, path) {
					os.Remove(latePath(path))
					os.Remove(path)
				}
			})
		}
		for _, path := range o.sessions {
			wg.Go(func() { a.adoptSession(ctx, log, path, poll) })
		}
	}
	wg.Wait()
	for _, o := range orphans {
		if ctx.Err() == nil {
			o.done()
		} else {
			o.lock.Close()
		}
	}
}

// adoptEntry adopts the run of the spool entry at path, and reports whether the entry is done
// with (false when the worker stops first).
func (a *Activities) adoptEntry(ctx context.Context, log RunLog, path string) bool {
	e, err := readEntry(path)
	if err != nil {
		a.emitLate(ctx, lateRoute{adopted: true}, guard.Checked{}, 0, errors.New("read the spool entry "+path+": "+err.Error()))
		return true
	}
	c := e.checked()
	to := lateRoute{log: log, stop: ctx.Done(), adopted: true, info: activity.Info{
		Namespace: e.Namespace, ActivityID: e.Owner.ActivityID,
		WorkflowExecution: workflow.Execution{ID: e.Owner.WorkflowID, RunID: e.Owner.RunID}}}
	// A worker that died while it delivered the run's late result kept it: sent as it is.
	if input, err := readLate(path); err != nil || input != nil {
		if err != nil {
			a.emitLate(ctx, to, c, 0, fmt.Errorf("read the kept late result: %w", err))
			return true
		}
		a.sendLate(ctx, to, c, input)
		return ctx.Err() == nil
	}
	bound := time.Until(e.Started.Add(c.Limits.Timeout + a.policy.Grace + adoptSlack))
	actx, cancel := context.WithTimeout(ctx, max(bound, adoptSlack))
	res, err := a.guarded.Adopt(actx, e.Sandbox, c, e.Started)
	cancel()
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		a.emitLate(ctx, to, c, 0, errors.Join(errors.New("outcome unknown: the run's sandbox could not be adopted"), err))
		return true
	}
	res.ApprovalID, res.Reviewer, res.Approvals, res.Edit = e.ApprovalID, e.Reviewer, e.Approvals, e.Edit
	rec, err := a.sign(runReceipt{info: to.info, digest: e.Digest, backend: e.Backend, secrets: e.Secrets,
		approvals: receiptApprovals(e.Approvals), claim: e.Claim, started: e.Started, ended: e.Started.Add(res.Duration)}, res, nil)
	if err != nil {
		a.emitLate(ctx, to, c, 0, err)
		return true
	}
	res.Receipt = rec
	input, err := a.lateInput(to, res)
	if err != nil {
		a.emitLate(ctx, to, c, 0, err)
		return true
	}
	// Kept beside the entry before it is sent: the sandbox is gone now, and a worker that dies
	// while it delivers leaves the result to the next.
	if b, err := proto.Marshal(input); err == nil {
		_ = writeDurably(latePath(path), b)
	}
	a.sendLate(ctx, to, c, input)
	return ctx.Err() == nil
}
