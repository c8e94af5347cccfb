package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// SessionsOffered reports whether b can keep a sandbox for a session (it is a SessionBackend).
func SessionsOffered(b Backend) bool {
	_, ok := b.(SessionBackend)
	return ok
}

// OpenSession checks s again (RecheckSession: the policy and the settings digest) and opens its
// sandbox on the backend, which must be a SessionBackend: a ConfigError says sessions are not
// offered otherwise. The sandbox it returns runs each cell under the guard.
func (g *Guarded) OpenSession(ctx context.Context, s CheckedSession) (*GuardedSandbox, error) {
	sb, ok := g.backend.(SessionBackend)
	if !ok {
		return nil, configf("sessions are not offered by the %s backend (it keeps no sandbox between runs)", g.backend.Name())
	}
	if s.Backend != g.backend.Name() {
		return nil, configf("session was checked for backend %q but this worker runs %q", s.Backend, g.backend.Name())
	}
	if err := g.policy.RecheckSession(s); err != nil {
		return nil, err
	}
	if err := g.checkImage(ctx, s.Image); err != nil {
		return nil, err
	}
	box, err := sb.OpenSession(ctx, s)
	if err != nil {
		return nil, typedOpen(g.backend.Name(), err)
	}
	return g.guardedSandbox(box, s), nil
}

// guardedSandbox puts box, a sandbox of session s, behind the guard.
func (g *Guarded) guardedSandbox(box Sandbox, s CheckedSession) *GuardedSandbox {
	s.Limits = g.policy.withOutputCaps(s.Limits)
	gs := &GuardedSandbox{box: box, session: s, policy: g.policy, backend: g.backend.Name(), broken: make(chan struct{}), done: make(chan struct{})}
	go func() {
		select {
		case <-box.Done():
		case <-gs.broken:
		}
		close(gs.done)
	}()
	return gs
}

// SessionAdopter returns the backend as a SessionAdopter, or nil when it is none.
func (g *Guarded) SessionAdopter() SessionAdopter {
	a, _ := g.backend.(SessionAdopter)
	return a
}

// AdoptSession takes over the session sandbox id that a worker before this one opened for s
// (SessionAdopter.AdoptSession; s as Redacted left it) and returns it behind the guard, with the
// result of the cell that worker had sent, if it came: limits re-applied and Digest the cell's
// over chain, the session's chain before it. A ConfigError when the backend is no
// SessionAdopter; its other errors are typed as OpenSession's.
func (g *Guarded) AdoptSession(ctx context.Context, id string, s CheckedSession, pending *PendingCell, chain string) (*GuardedSandbox, *Result, error) {
	a := g.SessionAdopter()
	if a == nil {
		return nil, nil, configf("backend %q keeps no session sandbox for another worker to adopt", g.backend.Name())
	}
	box, res, err := a.AdoptSession(ctx, id, s, pending)
	if err != nil {
		return nil, nil, typed(g.backend.Name(), err)
	}
	if res != nil {
		l := g.policy.withOutputCaps(pending.Limits)
		r := fitEncoding(Enforce(*res, l), l)
		r.Digest = CellDigest(s.Digest, pending.Cell.Index, pending.Cell.CodeDigest, chain)
		r.Backend = g.backend.Name()
		res = &r
	}
	return g.guardedSandbox(box, s), res, nil
}

// Redacted is s without what a host must not write down: its files' contents and its env's
// values, which the sandbox received when it was opened. Its digest and everything a cell's
// check, limits and receipt read stay.
func (s CheckedSession) Redacted() CheckedSession {
	r := s
	r.Files = make([]InputFile, len(s.Files))
	for i, f := range s.Files {
		r.Files[i] = InputFile{Name: f.Name}
	}
	r.Env = make([]EnvVar, len(s.Env))
	for i, e := range s.Env {
		r.Env[i] = EnvVar{Name: e.Name}
	}
	return r
}

// typedOpen makes an untyped OpenSession error one of ours: nothing of a cell ran, so it is an
// IntegrationError from before any code could start.
func typedOpen(backend string, err error) error {
	if TypeOf(err) != "" {
		return err
	}
	return &IntegrationError{Op: "backend " + backend + ": open session", Err: err}
}

// GuardedSandbox is a session's sandbox behind the guard: each cell is checked again against the
// session's settings, runs under the backstop of timeout + grace, and its result has every limit
// re-applied. Its methods are not for concurrent use.
type GuardedSandbox struct {
	box     Sandbox
	session CheckedSession
	policy  Policy
	backend string

	mu         sync.Mutex
	brokenOnce sync.Once
	broken     chan struct{} // closed when a cell left the sandbox in an unknown state
	done       chan struct{} // closed when the sandbox ended or broke
}

// ID names the sandbox.
func (g *GuardedSandbox) ID() string { return g.box.ID() }

// ImageID is the image the sandbox runs, when its backend says (a sandbox with an ImageID
// method, such as a container's); "" otherwise.
func (g *GuardedSandbox) ImageID() string {
	if im, ok := g.box.(interface{ ImageID() string }); ok {
		return im.ImageID()
	}
	return ""
}

// Session is the checked session the sandbox was opened with.
func (g *GuardedSandbox) Session() CheckedSession { return g.session }

// Done is closed when the sandbox ended by itself, or when a cell that did not return within
// its backstop left it unusable.
func (g *GuardedSandbox) Done() <-chan struct{} { return g.done }

// Close removes the sandbox; it is safe to call more than once.
func (g *GuardedSandbox) Close(ctx context.Context) error { return g.box.Close(ctx) }

// RunCell checks cell again (CheckCell with the session's settings: its language, code and code
// digest), runs it with the session's limits under the backstop and returns its result with the
// limits re-applied, Digest the cell's digest over chain (CellDigest) and Backend set. A timeout
// is a result. A backend that does not return within the backstop leaves the sandbox broken: the
// cell is reported as timed out, the sandbox is removed, and later cells get a SandboxLost.
func (g *GuardedSandbox) RunCell(ctx context.Context, cell Cell, chain string) (Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.done:
		return Result{}, &SandboxLost{Msg: "sandbox " + g.box.ID() + " ended before the cell"}
	default:
	}
	checked, err := g.policy.CheckCell(g.session, cell.Index, cell.Language, cell.Code, cell.Packages...)
	if err != nil {
		return Result{}, err
	}
	if !checked.Equal(cell) {
		return Result{}, configf("cell %d does not match its check: %s checked as %s", cell.Index, cell, checked)
	}
	limits := g.session.Limits
	backstop := limits.Timeout + g.policy.Grace
	runCtx, cancel := context.WithTimeout(ctx, backstop)
	defer cancel()

	start := time.Now()
	done := make(chan backendOutcome, 1)
	go func() {
		res, err := g.box.RunCell(runCtx, cell, limits)
		done <- backendOutcome{res, err}
	}()
	var out backendOutcome
	select {
	case out = <-done:
	case <-runCtx.Done():
		// A cancelled cell: a backend that can stop the cell alone reports it within the grace
		// (Outcome cancelled). A backstop: the backend had its time.
		wait := 250 * time.Millisecond
		if ctx.Err() != nil {
			wait = max(wait, g.policy.Grace)
		}
		select {
		case out = <-done:
		case <-time.After(wait):
			// The backend may still be running the cell: the sandbox's state is unknown, so no
			// further cell may use it.
			g.breakSandbox()
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("guard: cell cancelled: %w", ctx.Err())
			}
			out = backendOutcome{res: Result{TimedOut: true, ExitCode: -1, Stderr: []byte(BackstopNote)}}
		}
	}
	elapsed := time.Since(start)
	stopped := out.err == nil && out.res.Outcome == OutcomeCancelled && ctx.Err() != nil
	if out.err != nil {
		var lost *SandboxLost
		switch {
		case errors.As(out.err, &lost):
			return Result{}, out.err
		case ctx.Err() != nil:
			return Result{}, fmt.Errorf("guard: cell cancelled: %w", ctx.Err())
		case errors.Is(runCtx.Err(), context.DeadlineExceeded) && TypeOf(out.err) == "":
			g.breakSandbox()
			out = backendOutcome{res: Result{TimedOut: true, ExitCode: -1, Stderr: []byte(BackstopNote)}}
		default:
			return Result{}, typed(g.backend, out.err)
		}
	}
	res := fitEncoding(Enforce(out.res, limits), limits)
	if stopped {
		res.markCancelled() // the backend stopped the cell alone: the sandbox goes on
	}
	res.Duration = elapsed
	res.Digest = CellDigest(g.session.Digest, cell.Index, cell.CodeDigest, chain)
	res.Backend = g.backend
	return res, nil
}

// breakSandbox marks the sandbox unusable and removes it.
func (g *GuardedSandbox) breakSandbox() {
	g.brokenOnce.Do(func() {
		close(g.broken)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = g.box.Close(ctx) // the reaper removes what this could not
		}()
	})
}

// fitEncoding cuts stdout and stderr further, flagging them truncated, until res's JSON is no
// larger than WorstResultEncodingBytes(l) with the outputs res holds: output that JSON escapes (<, >, &, control
// characters: six bytes each) would otherwise encode to more than the caps' bound, which the
// session's status budget and Temporal's payload limit rely on.
func fitEncoding(res Result, l Limits) Result {
	// The outputs' share is what they hold: escaped streams never take the room of outputs
	// the cell did not show.
	l.MaxOutputs, l.MaxTotalOutputBytes = len(res.Outputs), 0
	for _, o := range res.Outputs {
		l.MaxTotalOutputBytes += int64(len(o.Data))
	}
	budget := WorstResultEncodingBytes(l)
	for range 64 {
		b, err := json.Marshal(res)
		if err != nil || int64(len(b)) <= budget || (len(res.Stdout) == 0 && len(res.Stderr) == 0) {
			return res
		}
		if len(res.Stdout) >= len(res.Stderr) {
			res.Stdout, _ = Truncate(res.Stdout, int64(len(res.Stdout)*3/4))
			res.StdoutTruncated = true
		} else {
			res.Stderr, _ = Truncate(res.Stderr, int64(len(res.Stderr)*3/4))
			res.StderrTruncated = true
		}
	}
	return res
}
