package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
	"github.com/sandboxflow/sandboxflow/rules"
)

// Sessions (issue 28). SessionOpen, on the sandbox task queue, opens a session's sandbox on this
// host and keeps it in the host's registry under the activity's own workflow id and run id
// (never under anything its input says); it returns this host's own task queue, which only this
// host polls. SessionHold and SessionCell run on that queue: the hold lives as long as the
// session and removes the sandbox when cancelled; each cell runs at most once, after this host
// verified its approval against its own record of the sandbox (settings digest, index, chain).

// holdStartTimeout is how long an opened sandbox waits for its SessionHold; a sandbox whose
// session never holds it (the workflow is gone) is removed then.
const holdStartTimeout = 2 * time.Minute

// lifetimeMargin is added to a session's lifetime, a cell's longest timeout and the grace, past
// which this host removes the sandbox whatever the workflow does.
const lifetimeMargin = 2 * time.Minute

// sessionKey names a session's run: a sandbox is kept for the run that opened it.
type sessionKey struct{ workflowID, runID string }

func keyOf(info activity.Info) sessionKey {
	return sessionKey{info.WorkflowExecution.ID, info.WorkflowExecution.RunID}
}

// hostSandbox is one session's sandbox on this host, and this host's record of its cells.
type hostSandbox struct {
	key    sessionKey
	box    *guard.GuardedSandbox
	opened time.Time
	// namespace and queue are the session's namespace and the host task queue its holds and
	// cells come on; spool keeps its entry (nil: not spooled). See adoptsession.go.
	namespace string
	queue     string
	spool     *spool

	// mu serializes the cells and guards the record below.
	mu sync.Mutex
	// last is the highest index this host admitted; used the approval ids it admitted; chain
	// the chain over every cell it ran, from the results it returned.
	last  int
	used  map[string]bool
	chain string
	cells int
	// receipt is the hash of the last receipt this host signed for the sandbox's cells, which the
	// next cell's receipt names ("" before the first).
	receipt string
	unknown bool // a cell's outcome is unknown: no further cell may use the sandbox

	holdMu  sync.Mutex
	holding bool
	// released is closed when the hold that holds the sandbox lets it go without ending the
	// session (its attempt was lost by the server); holds counts the holds taken, so that a
	// re-hold window armed for one release does not end a sandbox held again since.
	released chan struct{}
	holds    int
	timers   []*time.Timer
	endOnce  sync.Once
}

// sessions is this host's registry of open sandboxes.
type sessions struct {
	mu sync.Mutex
	m  map[sessionKey]*hostSandbox
	// adopting holds the sessions this worker is taking over (adoptsession.go): each channel is
	// closed when its sandbox was added, or could not be.
	adopting map[sessionKey]chan struct{}
}

// adopt marks k as being taken over until done is called.
func (r *sessions) adopt(k sessionKey) (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adopting == nil {
		r.adopting = map[sessionKey]chan struct{}{}
	}
	ch := make(chan struct{})
	r.adopting[k] = ch
	return sync.OnceFunc(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.adopting, k)
		close(ch)
	})
}

// await returns the sandbox of k, waiting (and calling beat every interval) while it is being
// taken over; nil when there is none, or ctx ended first.
func (r *sessions) await(ctx context.Context, k sessionKey, interval time.Duration, beat func()) *hostSandbox {
	for {
		r.mu.Lock()
		hs, wait := r.m[k], r.adopting[k]
		r.mu.Unlock()
		if hs != nil || wait == nil {
			return hs
		}
		select {
		case <-wait:
		case <-time.After(interval):
			beat()
		case <-ctx.Done():
			return nil
		}
	}
}

func (r *sessions) get(k sessionKey) *hostSandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[k]
}

// add records hs unless its run already has a sandbox here.
func (r *sessions) add(hs *hostSandbox) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[sessionKey]*hostSandbox{}
	}
	if _, ok := r.m[hs.key]; ok {
		return false
	}
	r.m[hs.key] = hs
	return true
}

func (r *sessions) drop(hs *hostSandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[hs.key] == hs {
		delete(r.m, hs.key)
	}
}

// Open returns how many session sandboxes this host holds now.
func (r *sessions) Open() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// OpenSessions returns how many session sandboxes this host holds now.
func (a *Activities) OpenSessions() int { return a.sessions.Open() }

// HostTaskQueue is the task queue only this host polls, for its sessions' holds and cells.
func (a *Activities) HostTaskQueue() string { return a.hostQueue }

// SessionCheck applies the worker's policy to a session request: it returns the checked session
// with its settings digest, the reviewer keys and this worker's run options, or a ToolUsageError
// or ConfigError (sessions the backend does not offer included). It runs as a local activity.
func (a *Activities) SessionCheck(ctx context.Context, in contract.SessionCheckInput) (contract.SessionCheckResult, error) {
	if err := checkWorkflowID(ctx); err != nil {
		return contract.SessionCheckResult{}, err
	}
	if a.noSessions {
		return contract.SessionCheckResult{}, contract.ToFailure(&guard.ConfigError{
			Msg: fmt.Sprintf("sessions are not offered by the %s backend (it keeps no sandbox between runs)", a.backendName)})
	}
	s, err := a.policy.CheckSession(in.Request, a.backendName)
	if err == nil && a.images != nil {
		s.Image, err = a.images.ImageID(ctx)
		s.Digest = guard.SessionDigest(&s)
	}
	if err != nil {
		return contract.SessionCheckResult{}, contract.ToFailure(err)
	}
	dec, err := a.rules.Decide(rules.ForSession(&s))
	if err == nil {
		err = a.underCaps(ctx, s.Metadata.Agent, true)
	}
	if err != nil {
		a.policyRefused(ctx, contract.SessionCheckActivityName, s.Metadata.Agent, err)
		return contract.SessionCheckResult{}, contract.ToFailure(err)
	}
	r, err := a.checkRecord(s.Summary().Warnings, max(a.cellQuorum(s), dec.Quorum))
	if err != nil {
		return contract.SessionCheckResult{}, err
	}
	r.Rules = ruleRecord(dec)
	return contract.SessionCheckResult{Session: s, CheckedBy: r.CheckedBy, Notify: r.Notify, Hosts: r.Hosts, Quorum: r.Quorum}, nil
}

// SessionCellCheck applies the worker's policy to a submitted cell of a checked session
// (guard.Policy.CheckCell): it returns the cell with its index and code digest, or a
// ToolUsageError. A cell's packages are checked against the session's set so far: its
// settings' and those earlier cells brought (guard.AddCellPackages). It runs as a local
// activity of the Session workflow.
func (a *Activities) SessionCellCheck(ctx context.Context, in contract.CellCheckInput) (guard.Cell, error) {
	session := in.Session
	var pkgs []guard.Package
	if in.Packages != "" {
		var err error
		if pkgs, err = guard.ParseLock(in.Packages); err != nil {
			return guard.Cell{}, contract.ToFailure(err)
		}
		if session.Packages, err = guard.AddCellPackages(session.Packages, in.EarlierPackages); err != nil {
			return guard.Cell{}, contract.ToFailure(err)
		}
	}
	cell, err := a.policy.CheckCell(session, in.Index, in.Language, in.Code, pkgs...)
	if err == nil {
		err = a.cellRules(session, cell)
		a.policyRefused(ctx, contract.SessionCellCheckActivityName, session.Metadata.Agent, err)
	}
	if err != nil {
		return guard.Cell{}, contract.ToFailure(err)
	}
	return cell, nil
}

// SessionOpen checks the session again and opens its sandbox on this host's guarded backend,
// keeps it for the activity's own run, and returns this host's task queue. Errors are typed like
// SandboxRun's: an IntegrationError from before any code could start may be retried by the
// workflow.
func (a *Activities) SessionOpen(ctx context.Context, in contract.SessionOpenInput) (contract.SessionOpened, error) {
	if a.guarded == nil {
		return contract.SessionOpened{}, contract.ToFailure(&guard.ConfigError{Msg: "session open: this worker has no sandbox backend"})
	}
	if a.hostQueue == "" {
		return contract.SessionOpened{}, contract.ToFailure(&guard.ConfigError{Msg: "session open: this worker polls no host task queue, so it serves no sessions"})
	}
	info := activity.GetInfo(ctx)
	key := keyOf(info)
	if a.sessions.get(key) != nil {
		return contract.SessionOpened{}, contract.ToFailure(&guard.ConfigError{Msg: fmt.Sprintf("session open: run %s of %s already has a sandbox on this host", key.runID, key.workflowID)})
	}
	if a.maxSessions > 0 && a.sessions.Open() >= a.maxSessions {
		return contract.SessionOpened{}, contract.ToFailure(&guard.IntegrationError{Op: "session open",
			Err: fmt.Errorf("this host keeps %d session sandboxes, its cap", a.maxSessions)})
	}
	s := in.Session
	s.Owner = guard.Owner{WorkflowID: key.workflowID, RunID: key.runID, ActivityID: info.ActivityID}
	box, err := a.guarded.OpenSession(ctx, s)
	if err != nil {
		return contract.SessionOpened{}, contract.ToFailure(err)
	}
	hs := &hostSandbox{key: key, box: box, opened: time.Now(), used: map[string]bool{}, chain: guard.ChainStart(s.Digest),
		namespace: info.Namespace, queue: a.hostQueue, spool: a.spool}
	if !a.sessions.add(hs) {
		_ = box.Close(context.WithoutCancel(ctx))
		return contract.SessionOpened{}, contract.ToFailure(&guard.ConfigError{Msg: fmt.Sprintf("session open: run %s of %s already has a sandbox on this host", key.runID, key.workflowID)})
	}
	a.armSession(hs, s.Lifetime+a.lifetimeExtra)
	a.spoolSession(ctx, hs, nil)
	a.sink.Emit(ctx, Event{Type: contract.EventSessionOpened, Time: time.Now(), Data: map[string]any{
		"workflow_id": key.workflowID, "run_id": key.runID, "activity_id": info.ActivityID, "sandbox_id": box.ID(),
		"digest": s.Digest, "backend": s.Backend, "languages": s.Languages, "host_task_queue": a.hostQueue,
	}})
	return contract.SessionOpened{HostTaskQueue: a.hostQueue, SandboxID: box.ID(), ImageID: box.ImageID()}, nil
}

// armSession ends hs's session if no hold takes it within a.holdStart, and at the latest after
// lifetime.
func (a *Activities) armSession(hs *hostSandbox, lifetime time.Duration) {
	hs.holdMu.Lock()
	defer hs.holdMu.Unlock()
	hs.timers = append(hs.timers,
		time.AfterFunc(a.holdStart, func() {
			hs.holdMu.Lock()
			held := hs.holding
			hs.holdMu.Unlock()
			if !held {
				a.endSession(hs, "never held")
			}
		}),
		time.AfterFunc(max(lifetime, 0), func() { a.endSession(hs, "lifetime") }))
}

// endSession removes hs's sandbox and forgets it, once.
func (a *Activities) endSession(hs *hostSandbox, why string) {
	hs.endOnce.Do(func() {
		hs.holdMu.Lock()
		for _, t := range hs.timers {
			t.Stop()
		}
		hs.holdMu.Unlock()
		a.sessions.drop(hs)
		unspoolSession(hs)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := hs.box.Close(ctx)
		d := map[string]any{
			"workflow_id": hs.key.workflowID, "run_id": hs.key.runID, "sandbox_id": hs.box.ID(),
			"digest": hs.box.Session().Digest, "backend": hs.box.Session().Backend,
			"reason": why, "lifetime_ms": time.Since(hs.opened).Milliseconds(),
		}
		if err != nil {
			d["close_error"] = err.Error()
		}
		a.sink.Emit(ctx, Event{Type: contract.EventSessionEnded, Time: time.Now(), Data: d})
	})
}

// lookup returns the sandbox this host keeps for the activity's own run, or a SandboxLost; while
// this worker takes the sandbox over from a worker that died, it waits, heartbeating.
func (a *Activities) lookup(ctx context.Context, info activity.Info) (*hostSandbox, error) {
	hs := a.sessions.await(ctx, keyOf(info), minHeartbeatInterval, func() { activity.RecordHeartbeat(ctx) })
	if hs == nil {
		return nil, &guard.SandboxLost{Msg: fmt.Sprintf("this host (task queue %s) keeps no sandbox for run %s of %s", info.TaskQueue, info.WorkflowExecution.RunID, info.WorkflowExecution.ID)}
	}
	return hs, nil
}

// SessionHold heartbeats for as long as the session lives. It ends with a SandboxLost when the
// sandbox ended by itself, and removes the sandbox when cancelled (the session ended).
func (a *Activities) SessionHold(ctx context.Context, in contract.SessionHoldInput) error {
	info := activity.GetInfo(ctx)
	hs, err := a.lookup(ctx, info)
	if err != nil {
		return contract.ToFailure(err)
	}
	if in.SandboxID != hs.box.ID() {
		return contract.ToFailure(&guard.SandboxLost{Msg: fmt.Sprintf("this host keeps sandbox %s for the run, not %s", hs.box.ID(), in.SandboxID)})
	}
	heartbeat := DefaultHeartbeatTimeout
	if info.HeartbeatTimeout > 0 {
		heartbeat = info.HeartbeatTimeout
	}
	interval := max(heartbeat/3, minHeartbeatInterval)
	beat := func() { activity.RecordHeartbeat(ctx) }
	if !a.take(ctx, hs, 2*heartbeat+5*time.Second, interval, beat) {
		if ctx.Err() != nil && !attemptLost(ctx) {
			// The session ended while this hold waited for the one it follows.
			a.endSession(hs, "closed")
			return fmt.Errorf("session hold: %w", ctx.Err())
		}
		return contract.ToFailure(&guard.ConfigError{Msg: "session hold: the sandbox is already held by another hold activity"})
	}
	return a.hold(ctx, hs, interval, beat)
}

// take marks hs held by the calling hold, which beats every interval while it waits. A sandbox
// held by another hold is taken only if that hold lets it go within wait: the server times out
// a hold whose heartbeats it did not get (a cut connection, a loaded server) and the session
// schedules its next hold at once, while the host's side of the old one learns that it was lost
// only when its heartbeats' retries run out (a heartbeat timeout) or are answered "not found".
func (a *Activities) take(ctx context.Context, hs *hostSandbox, wait, interval time.Duration, beat func()) bool {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		hs.holdMu.Lock()
		if !hs.holding {
			hs.holding = true
			hs.holds++
			hs.released = make(chan struct{})
			hs.holdMu.Unlock()
			return true
		}
		released := hs.released
		hs.holdMu.Unlock()
		if released == nil {
			return false
		}
		select {
		case <-released:
		case <-ticker.C:
			beat()
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// release lets hs go without ending its session, for the session's next hold; the sandbox is
// removed if no hold takes it within a.holdStart.
func (a *Activities) release(hs *hostSandbox) {
	hs.holdMu.Lock()
	defer hs.holdMu.Unlock()
	hs.holding = false
	if hs.released != nil {
		close(hs.released)
		hs.released = nil
	}
	holds := hs.holds
	hs.timers = append(hs.timers, time.AfterFunc(a.holdStart, func() {
		hs.holdMu.Lock()
		again := hs.holding || hs.holds != holds
		hs.holdMu.Unlock()
		if !again {
			a.endSession(hs, "hold lost")
		}
	}))
}

// attemptLost reports whether the hold's context ended because the server lost this attempt
// (its heartbeat answered "not found", or failed for longer than the heartbeat timeout), not
// because the session asked (a cancel), the worker is stopping or the attempt's time ran out:
// the session and its sandbox may live on, and the session schedules its next hold.
func attemptLost(ctx context.Context) bool {
	cause := context.Cause(ctx)
	var cancelled *temporal.CanceledError
	switch {
	case cause == nil, errors.As(cause, &cancelled), errors.Is(cause, context.Canceled), errors.Is(cause, context.DeadlineExceeded):
		return false
	}
	return true
}

// hold beats every interval until ctx ends (the sandbox is removed) or the sandbox ends by
// itself (a SandboxLost).
func (a *Activities) hold(ctx context.Context, hs *hostSandbox, interval time.Duration, beat func()) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		beat()
		select {
		case <-ctx.Done():
			if attemptLost(ctx) {
				a.release(hs)
				return fmt.Errorf("session hold: the server lost this hold (%w); the sandbox waits %s for the session's next hold", context.Cause(ctx), a.holdStart)
			}
			a.endSession(hs, "closed")
			return fmt.Errorf("session hold: %w", ctx.Err())
		case <-hs.box.Done():
			a.endSession(hs, "lost")
			return contract.ToFailure(&guard.SandboxLost{Msg: "sandbox " + hs.box.ID() + " ended"})
		case <-ticker.C:
		}
	}
}

// SessionCell runs one approved cell in the session's sandbox, at most once: on a first attempt
// only, with an approval that verifies on this host for the cell's digest as this host computes
// it (its own settings digest, the index, the code digest and the chain over the results it
// returned), an index above every index it ran, an approval id never used in this sandbox, and
// its claim in the history first for the cell and the approval. A refusal is an ApprovalRefused
// (a sandbox.refused event): nothing ran.
func (a *Activities) SessionCell(ctx context.Context, in contract.CellRunInput) (guard.Result, error) {
	info := activity.GetInfo(ctx)
	hs, err := a.lookup(ctx, info)
	if err != nil {
		return guard.Result{}, contract.ToFailure(err)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	session := hs.box.Session()
	c := session.CellChecked(in.Cell)
	c.Owner = guard.Owner{WorkflowID: hs.key.workflowID, RunID: hs.key.runID, ActivityID: info.ActivityID}
	c.Digest = guard.CellDigest(hs.box.Session().Digest, in.Cell.Index, guard.CellCodeDigest(in.Cell.Language, in.Cell.Code, in.Cell.Packages...), hs.chain)
	// Heartbeated from the start, as a run's activity is: the claim's signal and history read
	// on a loaded server must not let the server time the activity out. The cell goes on, as a
	// run's code does, when the server may have lost the attempt (late.go).
	code, stopCode := codeContext(ctx)
	defer stopCode(nil)
	runCtx, stopBeat, live := a.runHeartbeat(ctx, code, stopCode, info, in.Cell.Index)
	stop := sync.OnceFunc(stopBeat)
	defer stop()
	ad := a.cellAdmission(info, hs, in)
	verified, err := a.verifyAdmission(ad)
	var claim *claim
	if err == nil {
		claim, err = a.admit(ctx, ad, verified)
	}
	if err != nil {
		a.cellEvent(ctx, refusedCellEvent(c, in, err), in, hs)
		return guard.Result{}, contract.ToFailure(err)
	}
	in.Decision.Reviewer = verified[0].Principal // as this host verified it
	started := startedEvent(c, contract.RunInput{Decision: in.Decision}, info.Attempt)
	a.cellEvent(ctx, &started, in, hs)

	// The cell is spooled before it is sent, with the host's record as admitted: a worker
	// started after this one dies delivers its result (adoptsession.go).
	a.spoolSession(ctx, hs, pendingCell(info, hs, in, approvalsOf(ad.decisions, verified)))
	start := time.Now()
	chainBefore := hs.chain
	res, err := hs.box.RunCell(runCtx, in.Cell, hs.chain) // in.Cell as this host checked it (cellSubject.bind)
	elapsed := time.Since(start)
	stop()
	switch {
	case err == nil:
		hs.chain = guard.ChainNext(hs.chain, res.Digest, guard.ResultDigest(res))
		hs.cells++
	case guard.Retryable(err):
		err = claim.release(ctx, a.historyOf(ctx), err)
	case guard.TypeOf(err) == guard.TypePackageError:
		// The cell's packages did not install: nothing of it ran and the sandbox is as it was.
	default:
		hs.unknown = true
	}
	res.ApprovalID = in.Decision.ApprovalID
	res.Reviewer = in.Decision.Reviewer
	res.Approvals = approvalsOf(ad.decisions, verified)
	if err == nil {
		err = a.signCell(hs, runReceipt{info: info, digest: c.Digest, backend: session.Backend, secrets: session.Secrets,
			approvals: receiptApprovals(res.Approvals), started: start, ended: start.Add(elapsed), policyHash: ad.policyHash,
			cell: &receipt.Cell{Index: in.Cell.Index, SettingsDigest: session.Digest, Chain: chainBefore}}, &res)
	}
	a.spoolSession(ctx, hs, nil)
	finished := finishedEvent(c, contract.RunInput{Decision: in.Decision}, res, err, elapsed)
	a.cellEvent(context.WithoutCancel(ctx), &finished, in, hs)
	if err == nil {
		to := a.activityRoute(ctx, info)
		to.spool = nil // cells are not spooled: no worker could adopt their sandbox
		a.answerLate(ctx, code, to, c, res, live)
	}
	if err != nil {
		if ctx.Err() != nil {
			return guard.Result{}, fmt.Errorf("cell activity: %w", ctx.Err())
		}
		return guard.Result{}, contract.ToFailure(err)
	}
	return res, nil
}

// refusedCellEvent is the sandbox.refused event of a refused cell, or nil when err is not a
// refusal.
func refusedCellEvent(c guard.Checked, in contract.CellRunInput, err error) *Event {
	var ar *guard.ApprovalRefused
	if !errors.As(err, &ar) {
		return nil
	}
	e := refusedEvent(c, contract.RunInput{Decision: in.Decision}, ar)
	return &e
}

// cellEvent emits e (nil: none) with the cell's index and the session's settings digest.
func (a *Activities) cellEvent(ctx context.Context, e *Event, in contract.CellRunInput, hs *hostSandbox) {
	if e == nil {
		return
	}
	e.Time = time.Now()
	e.Data["cell"] = in.Cell.Index
	e.Data["settings_digest"] = hs.box.Session().Digest
	e.Data["sandbox_id"] = hs.box.ID()
	a.sink.Emit(ctx, *e)
}
