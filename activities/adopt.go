package activities

import (
	"context"
	"encoding/hex"
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

// runSpool is the spool entry of one run while its sandbox activity runs (nil: the run is not
// spooled, because no worker could adopt it: no spool, no host key (no receipt, no late result),
// or a backend that is no Adopter). It is written before the claim is sent, with the claim's
// secret, at stage "claimed"; again at stage "sent" right before the code is sent, with the
// sandbox's id; and removed once the activity answered. A worker that adopts an entry still at
// "claimed" knows the code never reached a sandbox: it releases the claim, so that the workflow
// runs the approved code in a fresh activity (adoptEntry). The writes are not synced: a SIGKILL
// keeps the page cache, and a host that loses it loses its containers too.
type runSpool struct {
	s    *spool
	e    spooled
	drop func()
	log  interface{ Warn(string, ...any) }
}

// newRunSpool returns the run's spool entry, not yet written (nil when the run is not spooled).
// log warns of an entry that could not be written.
func (a *Activities) newRunSpool(log interface{ Warn(string, ...any) }, info activity.Info, c guard.Checked, in contract.RunInput, approvals []guard.Approval) *runSpool {
	if a.spool == nil || a.hostKey == nil || a.guarded.Adopter() == nil {
		return nil
	}
	return &runSpool{s: a.spool, log: log, e: spooled{
		Namespace: info.Namespace, Owner: c.Owner,
		Digest: c.Digest, Backend: c.Backend, Limits: c.Limits, Egress: c.Egress, Secrets: c.Secrets, Metadata: c.Metadata,
		ApprovalID: in.Decision.ApprovalID, Reviewer: in.Decision.Reviewer, Approvals: approvals, Edit: in.Edit,
	}}
}

// claimed writes the entry with the claim cl, before cl is sent (admission.beforeClaim).
func (r *runSpool) claimed(cl *claim) {
	if r == nil {
		return
	}
	r.e.Stage, r.e.Claim, r.e.ClaimSecret = stageClaimed, cl.msg.Commitment, hex.EncodeToString(cl.secret)
	r.put()
}

// sending writes the entry at stage "sent" with the run's sandbox, before the code is sent.
func (r *runSpool) sending(sandbox string) {
	if r == nil || r.e.Claim == "" {
		return
	}
	r.e.Stage, r.e.Sandbox, r.e.Started = stageSent, sandbox, time.Now()
	r.put()
}

func (r *runSpool) put() {
	drop, err := r.s.put(r.e)
	if err != nil {
		r.log.Warn("sandbox activity: the run is not spooled: if this worker dies now, no other worker can deliver its result or release its claim", "workflow_id", r.e.Owner.WorkflowID, "error", err)
		return
	}
	r.drop = drop
}

// done removes the entry (the activity answered, or the code never went).
func (r *runSpool) done() {
	if r != nil && r.drop != nil {
		r.drop()
	}
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
	if e.Stage == stageClaimed {
		// The code never reached a sandbox: the claim is released, and the workflow runs the
		// approved code in a fresh activity once the server timed this one out.
		a.releaseSpooled(ctx, log, e)
		return ctx.Err() == nil
	}
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

// releaseSpooled releases the claim of entry e, whose code never reached a sandbox, with the
// secret the entry kept, and emits sandbox.late_result saying so ("released").
func (a *Activities) releaseSpooled(ctx context.Context, log RunLog, e spooled) {
	info := activity.Info{Namespace: e.Namespace, ActivityID: e.Owner.ActivityID,
		WorkflowExecution: workflow.Execution{ID: e.Owner.WorkflowID, RunID: e.Owner.RunID}}
	secret, err := hex.DecodeString(e.ClaimSecret)
	if err == nil && commitment(secret) != e.Claim {
		err = errors.New("the spooled secret is not the claim's")
	}
	if err == nil {
		cl := &claim{info: info, secret: secret, msg: contract.SandboxClaim{RunID: e.Owner.RunID, ApprovalID: e.ApprovalID, ActivityID: e.Owner.ActivityID, Commitment: e.Claim}}
		err = cl.send(ctx, log, true)
	}
	d := map[string]any{"workflow_id": e.Owner.WorkflowID, "run_id": e.Owner.RunID, "activity_id": e.Owner.ActivityID,
		"digest": e.Digest, "adopted": true, "delivered": false, "released": err == nil}
	if err != nil {
		d["error"] = "the claim of a run whose code never started could not be released: " + err.Error()
	}
	a.sink.Emit(ctx, Event{Type: contract.EventSandboxLateResult, Time: time.Now(), Data: d})
}
