package docker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// run is one start of one created container: attach → start → send → await → collect. It owns
// the one fact that decides retries: whether the code may have started. The supervisor runs
// nothing before it has read the whole request frame, so the code may have started exactly when
// every byte of the request was written, even if a deadline fired at the same moment.
type run struct {
	b       *Backend
	sb      *sandbox
	c       guard.Checked
	request []byte

	att     attachment
	writeMu sync.Mutex // serialises writes to att: the request, then the tunnel's frames
	rep     *report
	diag    *guard.CapBuffer
	demuxed chan error
	// sent is true once the whole request was written: from then on every failure says
	// CodeMayHaveStarted, and nothing may retry the run.
	sent bool
	// warm is set when the container came from the warm pool.
	warm bool
	// meter is the container's counters before the request was sent; used what the run used,
	// read when its end frame came (nil otherwise).
	meter *meter
	used  *guard.Usage
}

// ending is how await saw the run end.
type ending int

const (
	streamEnded    ending = iota // the supervisor's output ended
	workerDeadline               // timeout + DeadlineSlack passed without the end
	ctxDeadline                  // the run's context reached its deadline
)

// execute runs the request in the created container, or in warm, a started one from the pool.
// removeNow says whether the container must be removed before returning (it may still run);
// otherwise it has exited and its removal can happen off the critical path.
func (b *Backend) execute(ctx context.Context, sb *sandbox, c guard.Checked, request []byte, warm *warmSandbox) (guard.Result, bool, error) {
	r := &run{b: b, sb: sb, c: c, request: request, rep: newReport(c.Limits, guard.OutputOf(ctx)), diag: guard.NewCapBuffer(diagBytes)}
	if warm != nil {
		if err := r.takeWarm(warm); err != nil {
			warm.att.Close()
			return guard.Result{}, true, err
		}
	}
	if len(c.Egress) > 0 {
		t, err := b.newTunnel(c, r.write)
		if err != nil {
			return guard.Result{}, true, err
		}
		r.rep.tunnel = t
		defer t.close()
	}
	res, removeNow, err := r.execute(ctx)
	if r.rep.tunnel != nil && err == nil {
		rep := r.rep.tunnel.close()
		res.Egress = &rep
	}
	return res, removeNow, err
}

// write writes p to the container's stdin.
func (r *run) write(p []byte) error {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	n, err := r.att.Write(p)
	if err == nil && n < len(p) {
		err = errors.New("short write")
	}
	return err
}

// execute is Backend.execute once the run's egress tunnel, if any, is ready.
func (r *run) execute(ctx context.Context) (guard.Result, bool, error) {
	b, c := r.b, r.c
	if r.att == nil { // a cold container: attach, then start
		if err := r.attach(ctx); err != nil {
			return guard.Result{}, true, err
		}
		defer r.att.Close()
		if err := r.start(ctx); err != nil {
			return guard.Result{}, true, err
		}
	} else {
		defer r.att.Close()
	}
	r.meter = b.startMeter(ctx, r.sb.id, b.findCounters(ctx, r.sb.id))
	deadline := time.NewTimer(c.Limits.Timeout + b.cfg.DeadlineSlack)
	defer deadline.Stop()
	how, err := r.send(ctx, deadline.C)
	if r.warm && r.sent {
		// The container's labels name no run: this line is what ties it to one.
		b.log.Info("run sent to a warm sandbox", "container", r.sb.id, "workflow_id", c.Owner.WorkflowID,
			"run_id", c.Owner.RunID, "activity_id", c.Owner.ActivityID, "digest", c.Digest)
	}
	if err == nil && how == streamEnded {
		how, err = r.await(ctx, deadline.C)
	} else if err == nil {
		err = r.stopReading()
	}
	if err == nil && how == workerDeadline && r.sent {
		err = r.lostAtDeadline(ctx)
	}
	if err != nil {
		return guard.Result{}, true, err
	}
	if how != streamEnded {
		return r.b.outcome(measured{out: r.rep.output(), deadline: how}, c.Limits), true, nil
	}
	res, removeNow, err := r.collect(ctx)
	return withUsage(res, r.used, r.rep.exit), removeNow, err
}

// lostAtDeadline tells the worker's deadline that the code ran into from one the daemon caused.
// The supervisor stops the code at its timeout and reports it, so the worker's deadline (timeout
// + DeadlineSlack) passes only when it could not: a container that still runs then is the
// backstop's case (a timeout), but one the daemon no longer knows, or that stopped with no report
// from its supervisor, was taken from under the run (a dockerd restart kills its containers and
// leaves the attach stream open): the outcome is unknown, not a timeout of the code's.
func (r *run) lostAtDeadline(ctx context.Context) error {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.b.cfg.CleanupTimeout)
	defer cancel()
	st, err := r.b.eng.Inspect(ictx, r.sb.id)
	if err != nil {
		return r.fail("docker: the container was lost while the code ran: inspect at the deadline", err)
	}
	if !st.Running {
		return r.fail("docker: the container was lost while the code ran", fmt.Errorf(
			"it stopped (exit code %d) with no report from its supervisor before the deadline; the daemon may have restarted", st.ExitCode))
	}
	return nil
}

// fail is an IntegrationError for op; whether it may be retried follows r.sent.
func (r *run) fail(op string, err error) error {
	return &guard.IntegrationError{Op: op + " " + r.sb.id, Err: err, CodeMayHaveStarted: r.sent}
}

// attach connects to the container's stdio before it starts, so no output is missed.
func (r *run) attach(ctx context.Context) error {
	att, err := r.b.eng.Attach(ctx, r.sb.id)
	if err != nil {
		return r.fail("docker: attach container", err)
	}
	r.att = att
	r.demuxed = make(chan error, 1)
	go func() { r.demuxed <- att.Demux(r.rep, r.diag) }()
	return nil
}

func (r *run) start(ctx context.Context) error {
	if err := r.b.eng.Start(ctx, r.sb.id); err != nil {
		if ce := r.b.startError(r.sb.image, err); ce != nil {
			return ce
		}
		return r.fail("docker: start container", err)
	}
	return nil
}

// send writes the request frame. If ctx or the deadline ends first, the connection is closed
// and the write's own answer decides whether the request went out in full; if it did, the
// returned ending says what stopped the run.
func (r *run) send(ctx context.Context, deadline <-chan time.Time) (ending, error) {
	wrote := make(chan error, 1)
	go func() {
		r.writeMu.Lock()
		n, err := r.att.Write(r.request)
		r.writeMu.Unlock()
		if n == len(r.request) {
			// Every byte was handed over: the supervisor may run the code, whatever else
			// the write reports.
			r.sent = true
		} else if err == nil {
			err = errors.New("short write")
		}
		wrote <- err
	}()
	how, err := streamEnded, error(nil)
	select {
	case err = <-wrote:
	case <-ctx.Done():
		how, err = ctxDeadline, r.interruptWrite(wrote, ctx.Err())
		if err == nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return how, r.fail("docker: run cancelled; container", ctx.Err())
		}
	case <-deadline:
		how, err = workerDeadline, r.interruptWrite(wrote, errors.New("the deadline passed while the request was written"))
	}
	if err != nil {
		return how, r.fail("docker: write request to container", fmt.Errorf("%w; container stderr: %q", err, clip(r.diag.Bytes())))
	}
	return how, nil
}

// interruptWrite closes the connection under a write in progress and waits for its answer: nil
// (the request went out in full, so r.sent) or the write's error.
func (r *run) interruptWrite(wrote <-chan error, why error) error {
	r.att.Close()
	select {
	case err := <-wrote:
		if err == nil || r.sent {
			return nil
		}
		return fmt.Errorf("%w (%w)", why, err)
	case <-time.After(r.b.cfg.CleanupTimeout):
		return fmt.Errorf("%w (the write did not return)", why)
	}
}

// await waits for the supervisor's output to end, the worker's deadline or the run's context.
// Output read so far is kept in every case.
func (r *run) await(ctx context.Context, deadline <-chan time.Time) (ending, error) {
	select {
	case err := <-r.demuxed:
		if err != nil {
			return streamEnded, r.fail("docker: read output of container", err)
		}
		return streamEnded, nil
	case <-r.rep.endSeen:
		// The supervisor's last frame: it holds the container until stdin ends, so its
		// counters are read first. Then stop reading now rather than when the container's
		// teardown closes the stream. What came with it must still parse.
		r.used = r.b.usage(ctx, r.sb.id, r.meter)
		if err := r.stopReading(); err != nil {
			return streamEnded, err
		}
		if r.rep.err != nil {
			return streamEnded, r.fail("docker: read output of container", r.rep.err)
		}
		return streamEnded, nil
	case <-deadline:
		return workerDeadline, r.stopReading()
	case <-ctx.Done():
		if err := r.stopReading(); err != nil {
			return ctxDeadline, err
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ctxDeadline, nil
		}
		return ctxDeadline, r.fail("docker: run cancelled; container", ctx.Err())
	}
}

// stopReading closes the connection and waits for the copy into r.rep to return, so the report
// can be read.
func (r *run) stopReading() error {
	r.att.Close()
	if r.rep.tunnel != nil {
		// A frame reader waiting for the proxy to take a connection's bytes returns.
		r.rep.tunnel.mux.Shutdown()
	}
	select {
	case <-r.demuxed:
		return nil
	case <-time.After(r.b.cfg.CleanupTimeout):
		return r.fail("docker: stop reading container", errors.New("the output copy did not return"))
	}
}

// collect turns what the supervisor reported, completed by the container's exit and state when
// the supervisor could not see them, into a result.
func (r *run) collect(ctx context.Context) (guard.Result, bool, error) {
	rep := r.rep
	if rep.supErr != "" {
		if rep.configErr {
			return guard.Result{}, false, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: image %q: %s", r.b.cfg.Image, rep.supErr)}
		}
		return guard.Result{}, false, r.fail("docker: sandbox supervisor", errors.New(rep.supErr))
	}
	m := measured{out: rep.output(), exit: rep.exit, containerExit: -1}
	if rep.end != nil && rep.exit != nil && (rep.exit.LimitsKnown || r.cleanUnderRunsc()) {
		// Fast path: the supervisor saw the cgroup counters itself, or nothing is left to
		// learn from the container's state; the container is exiting and its removal happens
		// off the critical path.
		return r.b.outcome(m, r.c.Limits), false, nil
	}
	// The output has ended, so the supervisor (PID 1) has exited and the container with it.
	wctx, cancel := context.WithTimeout(ctx, r.b.cfg.DeadlineSlack+5*time.Second)
	defer cancel()
	code, err := r.b.eng.Wait(wctx, r.sb.id)
	if err != nil {
		return guard.Result{}, true, r.fail("docker: wait for container", err)
	}
	if m.state, err = r.b.eng.Inspect(wctx, r.sb.id); err != nil {
		return guard.Result{}, true, r.fail("docker: inspect container", err)
	}
	m.containerExit = int(code)
	if rep.exit != nil || r.b.limitKill(m) != 0 {
		return r.b.outcome(m, r.c.Limits), false, nil
	}
	if code == 127 && rep.received == 0 {
		return guard.Result{}, false, &guard.ConfigError{Msg: fmt.Sprintf(
			"docker backend: image %q cannot run the sandbox supervisor (exit 127: python3 not found?); use an image with python3 and sh. Container stderr: %q",
			r.b.cfg.Image, clip(r.diag.Bytes()))}
	}
	return guard.Result{}, false, r.fail("docker: read result of container",
		fmt.Errorf("the supervisor ended without a report (exit code %d); container stderr: %q", code, clip(r.diag.Bytes())))
}

// cleanUnderRunsc reports a run under runsc whose code exited 0 by itself. gVisor's supervisor
// cannot read the cgroup counters, but the host's memory limit kills gVisor's whole sandbox, and
// one killed could not have reported an exit: there is no limit kill to find in the container's
// state, and its exit need not be waited for.
func (r *run) cleanUnderRunsc() bool {
	e := r.rep.exit
	return IsGVisor(r.b.cfg.Runtime) && e.ExitCode == 0 && e.Signal == 0 && !e.TimedOut
}

// measured is everything the worker measured about one run.
type measured struct {
	// out is the output and files received, limits applied.
	out guard.Result
	// exit is the supervisor's report of how the code ended; nil when it sent none.
	exit *exitReport
	// containerExit is the container's exit code, -1 when not asked.
	containerExit int
	state         containerState
	// deadline is how the run ended when the worker stopped it (streamEnded when it did not).
	deadline ending
}

// limitKill names the resource limit that explains a run (guard.OutcomeMemoryLimit or
// guard.OutcomePidsLimit), or 0.
func (b *Backend) limitKill(m measured) guard.Outcome {
	switch {
	case m.state.OOMKilled || (m.exit != nil && m.exit.OOMKills > 0):
		return guard.OutcomeMemoryLimit
	case m.exit != nil && m.exit.PidsLimitHit:
		return guard.OutcomePidsLimit
	case m.exit == nil && IsGVisor(b.cfg.Runtime) && m.containerExit == 2:
		// gVisor's sandbox exits with 2 and no message when its own threads hit the pids limit.
		return guard.OutcomePidsLimit
	case m.exit == nil && IsGVisor(b.cfg.Runtime) && m.containerExit == 137 && m.deadline == streamEnded:
		// The host's memory limit kills gVisor's whole sandbox (its supervisor too, so no
		// report), and the daemon need not see it as an OOM kill (Debian's runsc on cgroup v1
		// under load): nothing in the sandbox can SIGKILL its own PID 1, and the worker did not.
		return guard.OutcomeMemoryLimit
	}
	return 0
}

// outcome maps what was measured to a result. It is the one place that decides exit code,
// signal, timeout and limit kill (the guard's outcome is derived from these fields).
func (b *Backend) outcome(m measured, l guard.Limits) guard.Result {
	res := m.out
	switch {
	case m.deadline == workerDeadline:
		res.TimedOut, res.ExitCode = true, -1
		res = withNote(res, NoteDeadline, l.MaxStderrBytes)
	case m.deadline == ctxDeadline:
		res.TimedOut, res.ExitCode = true, -1
		res = withNote(res, NoteCancelled, l.MaxStderrBytes)
	case m.exit != nil:
		res.ExitCode, res.Signal, res.TimedOut = m.exit.ExitCode, m.exit.Signal, m.exit.TimedOut
	default:
		res.ExitCode = m.containerExit
	}
	failed := res.TimedOut || res.ExitCode != 0
	switch b.limitKill(m) {
	case guard.OutcomeMemoryLimit:
		if failed {
			res.Outcome = guard.OutcomeMemoryLimit
		}
		res = withNote(res, fmt.Sprintf(NoteMemoryLimit, b.cfg.MemoryBytes), l.MaxStderrBytes)
	case guard.OutcomePidsLimit:
		if failed {
			res.Outcome = guard.OutcomePidsLimit
		}
		res = withNote(res, fmt.Sprintf(NotePidsLimit, b.cfg.PidsLimit), l.MaxStderrBytes)
	}
	if res.TimedOut {
		res.ExitCode = -1
	}
	if res.Measured == nil {
		res.Measured = &guard.Measured{}
	}
	res.Measured.Runtime = b.runtimeName()
	return res
}

// runtimeName is the OCI runtime the containers run under, as a receipt names it: "default" for
// the daemon's default runtime (runc unless the daemon says otherwise).
func (b *Backend) runtimeName() string {
	if b.cfg.Runtime == "" {
		return "default"
	}
	return b.cfg.Runtime
}
