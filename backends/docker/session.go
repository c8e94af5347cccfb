package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/wheels"
)

// Sessions (issue 28): one container per session, created as hardened as a run's and started
// cold, that runs the session's cells one after another (see doc.go, Sessions). The container's
// supervisor answers each cell frame with the cell's frames and an end-of-cell frame; the worker
// reads them into one report per cell, as untrusted as a run's.

var _ guard.SessionBackend = (*Backend)(nil)

// Session is a session's live sandbox: one container and the attached stream to its supervisor.
// It implements guard.Sandbox; its methods are not called concurrently (Close may be).
type Session struct {
	b  *Backend
	sb *sandbox
	// packages is the session's package environment (nil without packages), mounted at its
	// creation for every cell; fetchesTold says a cell's egress audit listed the install's
	// fetches already.
	packages    *wheels.Env
	fetchesTold bool
	// slot is the host folder mounted at PackagesMount ("" when the host installs no packages,
	// or for a session taken over from another worker); installed is the package set whose
	// environment this sandbox has: the settings' lock plus what its cells added
	// (cellpackages.go).
	slot      string
	installed []guard.Package
	// linked is the last cell whose packages were linked into the slot, and its folder's name
	// (index 0 for none): a second attempt of that cell finds its folder there.
	linked struct {
		index int
		name  string
	}
	s guard.CheckedSession
	// c is the session's run-shaped settings (CellChecked): its egress and secrets make each
	// cell's proxy.
	c   guard.Checked
	att attachment
	// writeMu serialises writes to att: cell frames and the egress tunnel's frames.
	writeMu sync.Mutex
	diag    *guard.CapBuffer
	// done is closed when the container's output ended: it exited, was removed, the connection
	// broke, or the stream could not be read.
	done     chan struct{}
	demuxErr error

	// mu guards cur and the parsing of each chunk of output into it.
	mu  sync.Mutex
	cur *report
	// stray is set when the supervisor wrote while no cell (or opening) was current.
	stray bool

	// stateMu guards lost and closed.
	stateMu sync.Mutex
	// lost says why no more cells can run (the container ended, a cell's stream was garbled, a
	// cell was abandoned): later cells get a guard.SandboxLost.
	lost      string
	closed    bool
	closeOnce sync.Once
	closeErr  error
	// releaseSlot gives back the backend's sandbox slot (Config.MaxSandboxes).
	releaseSlot func()
	// counters are the container's cgroup counters, found for the first cell (nil until then,
	// or when they could not be found); cells run one at a time.
	counters counters
}

var _ guard.Sandbox = (*Session)(nil)

// sessionStream is the writer the container's stdout is copied into: each chunk goes to the
// current cell's report, and output while none is current breaks the session.
type sessionStream struct{ s *Session }

func (w sessionStream) Write(p []byte) (int, error) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.end != nil {
		s.stray = true
		return 0, errors.New("the sandbox wrote while no cell was running")
	}
	return s.cur.Write(p)
}

// tryTakeSlot takes a sandbox slot when one is free now.
func (b *Backend) tryTakeSlot() (release func(), ok bool) {
	if b.slots == nil {
		return func() {}, true
	}
	select {
	case b.slots <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-b.slots }) }, true
	default:
		return nil, false
	}
}

// takeSlot waits for one of the backend's Config.MaxSandboxes slots; release gives it back.
func (b *Backend) takeSlot(ctx context.Context) (release func(), err error) {
	if b.slots == nil {
		return func() {}, nil
	}
	select {
	case b.slots <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-b.slots }) }, nil
	case <-ctx.Done():
		return nil, &guard.IntegrationError{Op: fmt.Sprintf("docker: wait for a free sandbox (all %d in use)", cap(b.slots)), Err: ctx.Err()}
	}
}

// OpenSession creates and starts the session's container, cold (never from the warm pool), with
// the same spec as a run's (seccomp profile, a uid of its own, limits, labels, plus
// LabelSession), writes the input files into /work and sets the env once. No cell code runs.
// The container's stdin stays open when this worker's connection ends and the daemon keeps its
// output, so that a later worker can take it over (AdoptSession); it is removed by Close, or by
// the reaper once the session's workflow run has ended.
//
// Errors: a guard.ConfigError for a setting that cannot work (as Run's, and egress, which
// sessions do not offer yet); a guard.ToolUsageError for input files or env Run refuses; a
// guard.IntegrationError with CodeMayHaveStarted false for every other failure.
func (b *Backend) OpenSession(ctx context.Context, s guard.CheckedSession) (guard.Sandbox, error) {
	if len(s.Languages) == 0 {
		return nil, &guard.ConfigError{Msg: "docker backend: a session needs at least one language"}
	}
	for _, l := range s.Languages {
		if l != guard.Python && l != guard.Shell {
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: language %q is not offered (offered: %s, %s)", l, guard.Python, guard.Shell)}
		}
	}
	// The run-shaped settings: the spec, the labels and the refused inputs read them.
	c := s.CellChecked(guard.Cell{Language: s.Languages[0]})
	c.Digest = s.Digest
	if err := refuseNativeLoaders(c); err != nil {
		return nil, err
	}
	if _, err := encodeSession(s, 0, "", nil); err != nil {
		return nil, err
	}
	if len(c.Egress) > 0 {
		if _, err := b.proxyConfig(c); err != nil {
			return nil, err
		}
	}
	env, err := b.install(ctx, s.CheckedSettings)
	if err != nil {
		return nil, err
	}
	release, err := b.takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	img, err := b.resolveImage(ctx)
	if err != nil {
		release()
		return nil, err
	}
	if c.Image != "" && c.Image != img.ID {
		release()
		return nil, guard.ImageRefusal(c.Image, img.ID)
	}
	if b.pool != nil {
		b.pool.cold()
	}
	slot, err := b.sessionSlot(env)
	if err != nil {
		release()
		return nil, err
	}
	mount := packagesDir(env)
	if slot != "" {
		mount = slot
	}
	sb, err := b.create(ctx, img, &c, true, mount)
	if err != nil {
		b.removeSlot(slot)
		release()
		return nil, err
	}
	sess := &Session{b: b, sb: sb, packages: env, slot: slot, installed: slices.Clone(s.Packages), s: s, c: c, diag: guard.NewCapBuffer(diagBytes), done: make(chan struct{}), releaseSlot: release}
	if err := sess.open(ctx); err != nil {
		if sess.att != nil {
			sess.att.Close()
		}
		if rerr := b.remove(ctx, sb.id, true); rerr != nil {
			b.log.Warn("session container not removed; the reaper will retry", "container", sb.id, "error", rerr)
		}
		sb.release()
		b.removeSlot(slot)
		release()
		return nil, err
	}
	b.register(sess)
	b.log.Info("session sandbox opened", "container", sb.id, "workflow_id", s.Owner.WorkflowID, "run_id", s.Owner.RunID, "digest", s.Digest)
	return sess, nil
}

// register adds s to the sessions the backend's Close closes.
func (b *Backend) register(s *Session) {
	b.sessionsMu.Lock()
	defer b.sessionsMu.Unlock()
	if b.sessions == nil {
		b.sessions = map[*Session]struct{}{}
	}
	b.sessions[s] = struct{}{}
}

// open attaches, starts the container, sends the session request and waits for the
// supervisor's ready frame. Every failure is an IntegrationError with CodeMayHaveStarted false
// (or a ConfigError): no cell has been sent.
func (s *Session) open(ctx context.Context) error {
	b := s.b
	fail := func(op string, err error) error {
		return &guard.IntegrationError{Op: op + " " + s.sb.id, Err: err}
	}
	att, err := b.eng.Attach(ctx, s.sb.id)
	if err != nil {
		return fail("docker: attach session container", err)
	}
	s.att = att
	rep := newReport(s.s.Limits, nil) // the opening prints nothing anyone asked for
	rep.session, rep.opening = true, true
	s.cur = rep
	go func() {
		s.demuxErr = att.Demux(sessionStream{s}, s.diag)
		close(s.done)
	}()
	if err := b.eng.Start(ctx, s.sb.id); err != nil {
		if ce := b.startError(s.sb.image, err); ce != nil {
			return ce
		}
		return fail("docker: start session container", err)
	}
	request, err := encodeSession(s.s, s.sb.uid, s.sb.nonce, b.egressPlan(s.c))
	if err != nil {
		return err
	}
	if _, err := s.write(ctx, request); err != nil {
		// No cell was sent: nothing of the code can have run, whatever reached the container.
		return fail("docker: write session request to container", err)
	}
	timer := time.NewTimer(b.cfg.CleanupTimeout)
	defer timer.Stop()
	select {
	case <-rep.endSeen:
	case <-s.done:
	case <-ctx.Done():
		return fail("docker: wait for session container", ctx.Err())
	case <-timer.C:
		return fail("docker: wait for session container", fmt.Errorf("no answer within %s", b.cfg.CleanupTimeout))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = nil
	switch {
	case rep.supErr != "" && rep.configErr:
		return &guard.ConfigError{Msg: fmt.Sprintf("docker backend: image %q: %s", b.cfg.Image, rep.supErr)}
	case rep.supErr != "":
		return fail("docker: session supervisor", errors.New(rep.supErr))
	case rep.err != nil:
		return fail("docker: read session container", rep.err)
	case rep.endKind != frameReady:
		return fail("docker: session container", fmt.Errorf("the supervisor ended before it was ready (%v); container stderr: %q", s.demuxErr, clip(s.diag.Bytes())))
	}
	return nil
}

// write writes p to the container's stdin; when ctx ends first the connection is closed (the
// session is then lost). sent says every byte was handed over (the supervisor may act on the
// frame, whatever error the write reports).
func (s *Session) write(ctx context.Context, p []byte) (sent bool, err error) {
	type answer struct {
		sent bool
		err  error
	}
	wrote := make(chan answer, 1)
	go func() {
		n, err := s.writeLocked(p)
		if err == nil && n < len(p) {
			err = errors.New("short write")
		}
		wrote <- answer{n == len(p), err}
	}()
	select {
	case a := <-wrote:
		return a.sent, a.err
	case <-ctx.Done():
		s.att.Close()
		a := <-wrote
		if a.err != nil {
			return a.sent, fmt.Errorf("%w (%w)", ctx.Err(), a.err)
		}
		return a.sent, ctx.Err()
	}
}

// writeLocked writes p to the container's stdin, after any write in progress.
func (s *Session) writeLocked(p []byte) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.att.Write(p)
}

// writeFrame is the egress tunnel's writer.
func (s *Session) writeFrame(p []byte) error {
	n, err := s.writeLocked(p)
	if err == nil && n < len(p) {
		err = errors.New("short write")
	}
	return err
}

// ID is the container's id.
func (s *Session) ID() string { return s.sb.id }

// Done is closed when the container's output ended: it exited or was removed, the connection
// broke, or the supervisor wrote what the worker could not read.
func (s *Session) Done() <-chan struct{} { return s.done }

// lose records why no more cells can run and kills the container; it stays until Close (or the
// reaper) removes it.
func (s *Session) lose(why string) {
	s.stateMu.Lock()
	first := s.lost == ""
	if first {
		s.lost = why
	}
	s.stateMu.Unlock()
	if first {
		s.att.Close()
		ctx, cancel := context.WithTimeout(context.Background(), s.b.cfg.CleanupTimeout)
		defer cancel()
		_ = s.b.eng.Kill(ctx, s.sb.id)
	}
}

// usable returns a SandboxLost when no cell can run any more.
func (s *Session) usable() error {
	s.stateMu.Lock()
	lost, closed := s.lost, s.closed
	s.stateMu.Unlock()
	switch {
	case closed:
		return &guard.SandboxLost{Msg: "session container " + s.sb.id + " was closed"}
	case lost != "":
		return &guard.SandboxLost{Msg: "session container " + s.sb.id + ": " + lost}
	}
	select {
	case <-s.done:
		s.lose("its container ended")
		return &guard.SandboxLost{Msg: "session container " + s.sb.id + " ended"}
	default:
		return nil
	}
}

// RunCell runs one cell in the session's container under limits l (its timeout, output and file
// caps): see guard.Sandbox. The worker's own deadline is l.Timeout + Config.DeadlineSlack; past
// it, or when ctx ends, the container is killed (the session is lost) and the cell reported as
// timed out. A stream the worker cannot read is a guard.IntegrationError with CodeMayHaveStarted
// set; a container that ended during the cell a guard.SandboxLost, or the memory-limit result
// when the memory limit ended it.
func (s *Session) RunCell(ctx context.Context, cell guard.Cell, l guard.Limits) (guard.Result, error) {
	start := time.Now()
	request, err := s.prepareCell(ctx, cell, l)
	if err != nil {
		return guard.Result{}, err
	}
	b := s.b
	rep := newReport(l, guard.OutputOf(ctx))
	rep.session = true
	if len(s.c.Egress) > 0 {
		// A proxy for this cell: its report is the cell's egress, its caps the cell's.
		t, err := b.newTunnel(s.c, s.writeFrame)
		if err != nil {
			return guard.Result{}, err
		}
		rep.tunnel = t
		defer t.close()
	}
	s.mu.Lock()
	s.cur = rep
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cur = nil
		s.mu.Unlock()
	}()
	if s.counters == nil {
		s.counters = b.findCounters(ctx, s.sb.id)
	}
	m := b.startMeter(ctx, s.sb.id, s.counters)
	if sent, err := s.write(ctx, request); err != nil {
		// The supervisor runs nothing of a cell before its whole frame arrived; a frame cut
		// short leaves the stream unusable. A frame handed over in full may have started.
		ended := false
		select {
		case <-s.done: // the container's output had ended already: it is gone
			ended = true
		default:
		}
		s.lose("the cell frame could not be written")
		if ended && !sent {
			return guard.Result{}, &guard.SandboxLost{Msg: fmt.Sprintf("session container %s ended before %s: %v", s.sb.id, cell, err)}
		}
		return guard.Result{}, s.cellError(cell, "docker: write cell to session container", err, sent)
	}
	deadline := time.NewTimer(l.Timeout + b.cfg.DeadlineSlack)
	defer deadline.Stop()
	how, reported := streamEnded, false
	select {
	case <-rep.endSeen:
		reported = true
	case <-s.done:
	case <-deadline.C:
		how = workerDeadline
	case <-ctx.Done():
		how = ctxDeadline
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) && s.stopCell(rep, deadline.C) {
			how, reported = streamEnded, true // the supervisor stopped the cell and reported it: the session lives on
		}
	}
	var used *guard.Usage
	if reported {
		used = b.usage(ctx, s.sb.id, m)
	}
	res, err := s.cellOutcome(ctx, cell, rep, how, l, start)
	if err != nil || !reported {
		return res, err
	}
	s.mu.Lock()
	exit := rep.exit
	s.mu.Unlock()
	return withUsage(res, used, exit), nil
}

// prepareCell returns cell's frame once nothing refuses it and its packages are in the
// session's package folder (addPackages). Nothing is written to the container.
func (s *Session) prepareCell(ctx context.Context, cell guard.Cell, l guard.Limits) ([]byte, error) {
	if err := s.refuseCell(cell); err != nil {
		return nil, err
	}
	if _, err := encodeCell(cell, l, ""); err != nil {
		return nil, err
	}
	pkgDir, err := s.addPackages(ctx, cell)
	if err != nil {
		return nil, err
	}
	return encodeCell(cell, l, pkgDir)
}

// refuseCell says why cell cannot run in this session before anything is written: the session
// is lost or closed, the cell's language is not offered, or it brings packages this session
// cannot add (refuseCellPackages).
func (s *Session) refuseCell(cell guard.Cell) error {
	if err := s.usable(); err != nil {
		return err
	}
	if !slices.Contains(s.s.Languages, cell.Language) {
		return &guard.ToolUsageError{Msg: fmt.Sprintf("docker backend: language %q is not offered in this session (offered: %v)", cell.Language, s.s.Languages)}
	}
	return s.refuseCellPackages(cell)
}

// cellStopWait bounds how long a cancelled cell's supervisor has to stop it and report.
const cellStopWait = 4 * time.Second

// stopCell asks the supervisor to stop the running cell (SIGUSR1, sent by the daemon from
// outside the container) and reports whether the cell's end frame came within cellStopWait:
// the cell's processes were killed and the container lives on for the next cell.
func (s *Session) stopCell(rep *report, deadline <-chan time.Time) bool {
	ctx, cancel := context.WithTimeout(context.Background(), cellStopWait)
	defer cancel()
	if err := s.b.eng.Signal(ctx, s.sb.id, "USR1"); err != nil {
		return false
	}
	select {
	case <-rep.endSeen:
		return true
	case <-s.done:
	case <-deadline:
	case <-ctx.Done():
	}
	return false
}

// cellOutcome is the result of a cell whose wait ended how: the output so far of a cell the
// worker abandoned (its session lost), else what the supervisor's report says, or why it cannot
// be read.
func (s *Session) cellOutcome(ctx context.Context, cell guard.Cell, rep *report, how ending, l guard.Limits, start time.Time) (guard.Result, error) {
	b := s.b
	fail := func(op string, err error, started bool) error { return s.cellError(cell, op, err, started) }
	if how != streamEnded {
		s.lose(fmt.Sprintf("%s was abandoned (%s)", cell, map[ending]string{workerDeadline: "no report within its timeout", ctxDeadline: "its context ended"}[how]))
		if rep.tunnel != nil {
			// A frame reader waiting for the proxy to take a connection's bytes returns.
			rep.tunnel.mux.Shutdown()
		}
		<-s.doneOrTimeout()
		s.mu.Lock()
		out := rep.output()
		s.mu.Unlock()
		if how == ctxDeadline && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return guard.Result{}, fail("docker: cell cancelled; session container", ctx.Err(), true)
		}
		return s.finish(b.outcome(measured{out: out, deadline: how}, l), l, start), nil
	}
	s.mu.Lock()
	ended := rep.end != nil
	parseErr, stray := rep.err, s.stray
	s.mu.Unlock()
	switch {
	case parseErr != nil || stray:
		s.lose("its output could not be read")
		if parseErr == nil {
			parseErr = errors.New("the sandbox wrote outside its cell")
		}
		return guard.Result{}, fail("docker: read cell output of session container", parseErr, true)
	case rep.supErr != "":
		s.lose("its supervisor failed")
		return guard.Result{}, fail("docker: session supervisor", errors.New(rep.supErr), true)
	case ended && (rep.endKind != frameCellEnd || rep.exit == nil):
		s.lose("its supervisor ended the session")
		return guard.Result{}, fail("docker: read cell result of session container", errors.New("the cell ended without an exit report"), true)
	case !ended:
		// The container's output ended during the cell: it exited, was killed or removed.
		s.lose("its container ended during " + cell.String())
		return s.ended(cell, rep, l, start)
	}
	return s.reported(rep, l, start), nil
}

// reported is the result of a cell whose supervisor reported its end (rep.exit is set).
func (s *Session) reported(rep *report, l guard.Limits, start time.Time) guard.Result {
	res := s.b.outcome(measured{out: rep.output(), exit: rep.exit, containerExit: -1}, l)
	res.StateReset, res.ThreadsAlive, res.ExitReportedBy = rep.exit.StateReset, rep.exit.ThreadsAlive, rep.exit.ReportedBy
	if rep.tunnel != nil {
		audit := rep.tunnel.close()
		res.Egress = &audit
	}
	res = s.finish(res, l, start)
	res = s.withPackages(res)
	if rep.exit.Cancelled {
		// Stopped by stopCell: the guard marks it cancelled (finish settled it from the exit).
		res.Outcome = guard.OutcomeCancelled
	}
	return res
}

// withPackages records the session's packages in a cell's result; the install's fetches go in
// the first such cell's egress audit.
func (s *Session) withPackages(res guard.Result) guard.Result {
	if s.packages == nil {
		return res
	}
	env := *s.packages
	if s.fetchesTold {
		env.Fetches = nil
	}
	s.fetchesTold = true
	return withPackages(res, &env)
}

// cellError is the failure of a cell of the session at op: CodeMayHaveStarted says whether the
// cell may have run.
func (s *Session) cellError(cell guard.Cell, op string, err error, started bool) error {
	return &guard.IntegrationError{Op: fmt.Sprintf("%s %s (%s)", op, s.sb.id, cell), Err: err, CodeMayHaveStarted: started}
}

// doneOrTimeout is Done, or a channel closed after the cleanup timeout.
func (s *Session) doneOrTimeout() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		select {
		case <-s.done:
		case <-time.After(s.b.cfg.CleanupTimeout):
		}
	}()
	return ch
}

// ended is the outcome of a cell whose container's output ended before the cell's end: the
// memory limit's result when the daemon says the kernel's OOM killer ended it, else a
// SandboxLost. Unlike a run's, a session's container may be killed from outside between its
// start and its removal (the session lives long), so gVisor's exit 137 alone is not taken for
// the memory limit here.
func (s *Session) ended(cell guard.Cell, rep *report, l guard.Limits, start time.Time) (guard.Result, error) {
	b := s.b
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.DeadlineSlack+5*time.Second)
	defer cancel()
	code, werr := b.eng.Wait(ctx, s.sb.id)
	state, ierr := b.eng.Inspect(ctx, s.sb.id)
	if werr == nil && ierr == nil {
		m := measured{out: rep.output(), containerExit: int(code), state: state}
		if state.OOMKilled {
			return s.finish(b.outcome(m, l), l, start), nil
		}
		return guard.Result{}, &guard.SandboxLost{Msg: fmt.Sprintf("session container %s exited with code %d during %s", s.sb.id, code, cell)}
	}
	return guard.Result{}, &guard.SandboxLost{Msg: fmt.Sprintf("session container %s ended during %s (%v)", s.sb.id, cell, errors.Join(werr, ierr))}
}

// finish applies the limits and fills the fields the backend owns. Digest is left for the
// caller, which knows the cell's chain.
func (s *Session) finish(res guard.Result, l guard.Limits, start time.Time) guard.Result {
	res = guard.Enforce(res, l)
	res.Duration = time.Since(start)
	res.Backend = Name
	res.ImageID = s.sb.image.ID
	return res
}

// Close kills and removes the container and frees its uid and sandbox slot. It is safe to call
// more than once; later calls return the first one's error.
func (s *Session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.stateMu.Lock()
		s.closed = true
		s.stateMu.Unlock()
		s.att.Close()
		s.closeErr = s.b.remove(ctx, s.sb.id, true)
		<-s.doneOrTimeout()
		s.sb.release()
		s.b.removeSlot(s.slot)
		s.releaseSlot()
		s.b.sessionsMu.Lock()
		delete(s.b.sessions, s)
		s.b.sessionsMu.Unlock()
		if s.closeErr != nil {
			s.b.log.Warn("session container not removed; the reaper will retry", "container", s.sb.id, "error", s.closeErr)
		}
	})
	return s.closeErr
}
