package e2b

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/celldriver"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// Metadata keys of a session's sandbox: MetaSessionEnd is when the session's lifetime ends
// (RFC 3339, UTC); the reaper spares the sandbox until then.
const MetaSessionEnd = "sandboxflow.session_end"

// interpreterSlack is how long past the session's end envd lets the interpreter live
// (Connect-Timeout-Ms of its process stream).
const interpreterSlack = time.Minute

var _ guard.SessionBackend = (*Backend)(nil)

// OpenSession creates the session's sandbox (network as s asks, the ownership metadata, a time to
// live of Config.SessionTTL that a keeper extends until the session's lifetime is over), makes
// the working folder and the code's HOME and writes the input files. No cell code runs, and no
// interpreter starts: the first python cell starts it. Errors are retryable IntegrationErrors (a
// refused key or template is a ConfigError), and a sandbox made before a failure is killed.
func (b *Backend) OpenSession(ctx context.Context, s guard.CheckedSession) (guard.Sandbox, error) {
	for _, l := range s.Languages {
		if l != guard.Python && l != guard.Shell {
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("e2b backend: language %q is not offered (python, sh)", l)}
		}
	}
	end := time.Now().Add(s.Lifetime)
	body := b.newSandbox(s.CellChecked(guard.Cell{Language: guard.Python}))
	body.Metadata[MetaDigest] = s.Digest
	body.Metadata[MetaSessionEnd] = end.UTC().Format(time.RFC3339)
	body.Timeout = ttlSeconds(min(b.cfg.SessionTTL, s.Lifetime+b.cfg.TTLSlack))
	sb, err := b.api.create(ctx, body)
	if err != nil {
		return nil, err
	}
	b.log.Info("e2b session sandbox created", "sandbox_id", sb.SandboxID, "template", b.cfg.Template,
		"workflow_id", s.Owner.WorkflowID, "run_id", s.Owner.RunID, "digest", s.Digest, "session_end", end)
	if b.cfg.Created != nil {
		b.cfg.Created(ctx, sb.SandboxID)
	}
	ss := &session{b: b, s: s, id: sb.SandboxID, e: newEnvd(b.cfg, sb), end: end, files: map[string]fileMark{},
		done: make(chan struct{}), closed: make(chan struct{})}
	if err := ss.prepare(ctx); err != nil {
		b.kill(ctx, sb.SandboxID)
		return nil, &guard.IntegrationError{Op: "e2b: open session", Err: err}
	}
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	ss.stopKeeper = stop
	go ss.keep(kctx)
	return ss, nil
}

func ttlSeconds(d time.Duration) int { return max(int(math.Ceil(d.Seconds())), 1) }

// session is one session's E2B sandbox.
type session struct {
	b   *Backend
	s   guard.CheckedSession
	id  string
	e   envd
	end time.Time // the session's lifetime ends

	// interp is the python interpreter, nil before the first python cell and after one killed
	// it; reset says the next one starts because a cell killed the last.
	interp *interpreter
	reset  bool
	// files marks every regular file of the working folder as the last cell left it.
	files map[string]fileMark

	stopKeeper context.CancelFunc
	doneOnce   sync.Once
	done       chan struct{}
	lostWhy    string
	closeOnce  sync.Once
	closed     chan struct{}
	closeErr   error
}

// fileMark is what a file of the working folder was after a cell: its size and modified time as
// envd lists them and, when it was read, the hash of its bytes.
type fileMark struct {
	size     int64
	modified string
	sum      [32]byte
	read     bool
}

// ID is the E2B sandbox id.
func (ss *session) ID() string { return ss.id }

// Done is closed when E2B reports the sandbox gone (killed, or its time to live passed) without
// Close: a keeper asks every Config.SessionKeepAlive, and every failed envd call asks too.
func (ss *session) Done() <-chan struct{} { return ss.done }

// prepare makes the folders, writes the input files and marks them as the session's start.
func (ss *session) prepare(ctx context.Context) error {
	for _, dir := range []string{ss.b.cfg.WorkDir, homeDir} {
		if err := ss.e.makeDir(ctx, dir); err != nil {
			return fmt.Errorf("make folder %s: %w", dir, err)
		}
	}
	inputs := map[string][]byte{}
	for _, f := range ss.s.Files {
		if err := ss.e.upload(ctx, path.Join(ss.b.cfg.WorkDir, f.Name), f.Content); err != nil {
			return fmt.Errorf("write input file %s: %w", f.Name, err)
		}
		inputs[f.Name] = f.Content
	}
	entries, err := ss.e.listDir(ctx, ss.b.cfg.WorkDir, maxListDepth)
	if err != nil {
		return fmt.Errorf("list the working folder: %w", err)
	}
	for _, en := range ss.fileEntries(entries) {
		if in, ok := inputs[en.name]; ok && int64(len(in)) == en.size {
			ss.files[en.name] = fileMark{size: en.size, modified: en.Modified, sum: sha256.Sum256(in), read: true}
		}
	}
	return nil
}

// keep extends the sandbox's time to live every SessionKeepAlive, to SessionTTL but never past
// the session's end plus TTLSlack; once that has passed it only asks whether the sandbox is
// still there. A 404 closes Done.
func (ss *session) keep(ctx context.Context) {
	t := time.NewTicker(ss.b.cfg.SessionKeepAlive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ttl := min(ss.b.cfg.SessionTTL, time.Until(ss.end)+ss.b.cfg.TTLSlack)
		var err error
		if ttl > 0 {
			err = ss.b.api.setTimeout(ctx, ss.id, ttl)
		} else if ss.b.api.gone(ctx, ss.id) {
			err = errGone
		}
		switch {
		case errors.Is(err, errGone):
			ss.lost("E2B reports the sandbox gone")
			return
		case err != nil && ctx.Err() == nil:
			ss.b.log.Warn("e2b: extend the session sandbox's time to live failed; the keeper tries again", "sandbox_id", ss.id, "error", err)
		}
	}
}

// lost closes Done once, with why; not after Close, which ended the sandbox itself.
func (ss *session) lost(why string) {
	select {
	case <-ss.closed:
		return
	default:
	}
	ss.doneOnce.Do(func() {
		ss.lostWhy = why
		close(ss.done)
		ss.b.log.Warn("e2b session sandbox lost", "sandbox_id", ss.id, "why", why)
	})
}

func (ss *session) lostErr() error {
	return &guard.SandboxLost{Msg: fmt.Sprintf("e2b sandbox %s: %s", ss.id, ss.lostWhy)}
}

// failed is the error of a cell whose envd call failed with err: a SandboxLost when E2B
// reports the sandbox gone, else an IntegrationError (whose outcome is unknown when
// mayHaveStarted).
func (ss *session) failed(ctx context.Context, op string, err error, mayHaveStarted bool) error {
	select {
	case <-ss.done:
		return ss.lostErr()
	default:
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ss.b.cfg.RequestTimeout)
	defer cancel()
	if ss.b.api.gone(cctx, ss.id) {
		ss.lost("E2B reports the sandbox gone (" + op + " failed)")
		return ss.lostErr()
	}
	return &guard.IntegrationError{Op: "e2b: session cell: " + op, Err: err, CodeMayHaveStarted: mayHaveStarted}
}

// RunCell runs one cell: python in the session's interpreter (started afresh, with StateReset,
// after a cell killed the last), sh as a fresh /bin/sh -c; both in the working folder with the
// session's env. Files are the working folder's regular files this cell created or changed. A
// timeout is a result, and kills the interpreter. A sandbox E2B reports gone is a SandboxLost.
func (ss *session) RunCell(ctx context.Context, cell guard.Cell, limits guard.Limits) (guard.Result, error) {
	select {
	case <-ss.closed:
		return guard.Result{}, &guard.IntegrationError{Op: "e2b: session cell", Err: errors.New("the session's sandbox was closed")}
	case <-ss.done:
		return guard.Result{}, ss.lostErr()
	default:
	}
	if !slices.Contains(ss.s.Languages, cell.Language) {
		return guard.Result{}, &guard.ToolUsageError{Msg: fmt.Sprintf("e2b backend: language %q is not offered in this session", cell.Language)}
	}
	if len(cell.Packages) > 0 {
		return guard.Result{}, &guard.ConfigError{Msg: "e2b backend: this sandbox host installs no packages: it has no package index (worker --package-index)"}
	}
	start := time.Now()
	var (
		res guard.Result
		err error
	)
	switch cell.Language {
	case guard.Python:
		res, err = ss.runPython(ctx, cell, limits)
	default:
		res, err = ss.runShell(ctx, cell, limits)
	}
	if err != nil {
		return guard.Result{}, err
	}
	files, truncated, err := ss.collect(ctx, limits)
	if err != nil {
		return guard.Result{}, ss.failed(ctx, "read produced files", err, true)
	}
	res.Files, res.FilesTruncated = files, res.FilesTruncated || truncated
	res = guard.Enforce(res, limits)
	res.Duration = time.Since(start)
	return res, nil
}

// env is the environment of every cell's process, as a run's (command).
func (ss *session) env() map[string]string {
	c := ss.s.CellChecked(guard.Cell{Language: guard.Python})
	envs := c.EnvMap()
	envs["HOME"] = homeDir
	envs["PYTHONNOUSERSITE"] = "1"
	envs["PYTHONDONTWRITEBYTECODE"] = "1"
	if pysource.BytecodeAmongInputs(guard.InputNames(ss.s.Files)) {
		envs["PYTHONPYCACHEPREFIX"] = pycacheDir
	}
	return envs
}

// runShell runs an sh cell as a fresh /bin/sh -c, with the cell's timeout and caps.
func (ss *session) runShell(ctx context.Context, cell guard.Cell, limits guard.Limits) (guard.Result, error) {
	pc := processConfig{Cmd: "/bin/sh", Args: []string{"-c", cell.Code}, Envs: ss.env(), Cwd: ss.b.cfg.WorkDir}
	res, err := ss.b.execute(ctx, ss.e, pc, limits)
	if err != nil {
		var ie *guard.IntegrationError
		started := errors.As(err, &ie) && ie.CodeMayHaveStarted
		return guard.Result{}, ss.failed(ctx, "run sh", err, started)
	}
	return res, nil
}

// runPython sends the cell to the interpreter and waits for its end marker, the interpreter's
// death, the timeout or ctx.
func (ss *session) runPython(ctx context.Context, cell guard.Cell, limits guard.Limits) (guard.Result, error) {
	ip, fresh, err := ss.readyInterpreter(ctx, limits)
	if err != nil {
		return guard.Result{}, err
	}
	c := celldriver.BeginCell(ctx, ip.stdout, ip.stderr, limits)
	result := func() guard.Result { return c.Result(fresh) }
	if err := ss.e.sendInput(ctx, ip.pid, celldriver.Command(c.Nonce, cell.Index, cell.Code)); err != nil {
		_ = ss.killInterpreter(ctx, ip)
		ss.dropInterpreter(ip)
		return guard.Result{}, ss.failed(ctx, "send the cell to the interpreter", err, true)
	}
	timer := time.NewTimer(limits.Timeout)
	defer timer.Stop()
	for {
		select {
		case <-ip.changed:
			if ended, exitCode := c.Ended(); ended {
				res := result()
				res.ExitCode, res.ExitReportedBy = exitCode, guard.ReportedByInterpreter
				return res, nil
			}
			if !ip.finished() {
				continue
			}
			return ss.diedDuringCell(ctx, ip, result)
		case <-timer.C:
			killErr := ss.killInterpreter(ctx, ip)
			ip.wait(ss.b.cfg.RequestTimeout)
			c.Abandon()
			ss.dropInterpreter(ip)
			if killErr != nil {
				if err := ss.failed(ctx, "kill the interpreter at the timeout", killErr, true); guard.TypeOf(err) == guard.TypeSandboxLost {
					return guard.Result{}, err
				}
			}
			res := result()
			res.TimedOut, res.ExitCode = true, -1
			res.Stderr = append(res.Stderr, TimeoutNote...)
			return res, nil
		case <-ctx.Done():
			_ = ss.killInterpreter(ctx, ip)
			c.Abandon()
			ss.dropInterpreter(ip)
			return guard.Result{}, &guard.IntegrationError{Op: "e2b: session cell (outcome unknown; the approval was used)",
				Err: fmt.Errorf("run cancelled: %w", ctx.Err()), CodeMayHaveStarted: true}
		}
	}
}

// readyInterpreter is the session's interpreter, started when there is none; fresh says that it
// replaces one that died, so the cell starts without the earlier cells' state.
func (ss *session) readyInterpreter(ctx context.Context, limits guard.Limits) (ip *interpreter, fresh bool, err error) {
	if ip := ss.interp; ip != nil && ip.finished() {
		// It died between cells (a thread of an earlier cell ended it, or a memory kill): the
		// next cell starts afresh, unless the sandbox itself is gone.
		ss.interp, ss.reset = nil, true
		if ip.streamErr != nil || !ip.ended {
			if err := ss.failed(ctx, "interpreter stream", fmt.Errorf("the interpreter's stream broke between cells: %v", ip.streamErr), false); guard.TypeOf(err) == guard.TypeSandboxLost {
				return nil, false, err
			}
		}
	}
	if ss.interp == nil {
		ip, err := ss.startInterpreter(ctx, limits)
		if err != nil {
			return nil, false, ss.failed(ctx, "start the interpreter", err, false)
		}
		ss.interp, fresh = ip, ss.reset
		ss.reset = false
	}
	return ss.interp, fresh, nil
}

// dropInterpreter stops following ip, which is dead or killed: the next cell starts a fresh one.
func (ss *session) dropInterpreter(ip *interpreter) {
	ip.stop()
	ss.interp, ss.reset = nil, true
}

// diedDuringCell ends a cell whose interpreter died during it (os._exit, a signal, a memory kill,
// or the sandbox itself): its output so far with the interpreter's exit code, or the failure of
// a stream that broke.
func (ss *session) diedDuringCell(ctx context.Context, ip *interpreter, result func() guard.Result) (guard.Result, error) {
	ip.stdout.Abandon()
	ip.stderr.Abandon()
	ss.dropInterpreter(ip)
	if ip.streamErr != nil || !ip.ended {
		err := ip.streamErr
		if err == nil {
			err = errors.New("the stream ended without an end event")
		}
		return guard.Result{}, ss.failed(ctx, "interpreter stream", err, true)
	}
	res := result()
	res.ExitCode = ip.exitCode
	if !ip.exited && res.ExitCode == 0 {
		res.ExitCode = -1
	}
	return res, nil
}

// killInterpreter kills the interpreter's process through envd (a failure is logged: the stream
// is dropped anyway, and the sandbox ends with the session).
func (ss *session) killInterpreter(ctx context.Context, ip *interpreter) error {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ss.b.cfg.KillTimeout)
	defer cancel()
	err := ss.e.kill(kctx, ip.pid)
	if err != nil {
		ss.b.log.Warn("e2b: kill the session's interpreter failed", "sandbox_id", ss.id, "pid", ip.pid, "error", err)
	}
	return err
}

// interpreter is the python driver process of a session, read by a goroutine of its own.
type interpreter struct {
	pid            int64
	stdout, stderr *celldriver.Stream
	changed        chan struct{} // gets a value after every event
	cancel         context.CancelFunc
	done           chan struct{} // closed when the stream ended

	// Set before done is closed.
	ended     bool
	exitCode  int
	exited    bool
	streamErr error
}

func (ip *interpreter) finished() bool {
	select {
	case <-ip.done:
		return true
	default:
		return false
	}
}

func (ip *interpreter) wait(d time.Duration) {
	select {
	case <-ip.done:
	case <-time.After(d):
	}
}

// stop drops the interpreter's stream.
func (ip *interpreter) stop() { ip.cancel() }

func (ip *interpreter) notify() {
	select {
	case ip.changed <- struct{}{}:
	default:
	}
}

// startInterpreter starts the driver (python3 with pysource.Flags, -c celldriver.Source) with
// stdin kept open and waits for its start event.
func (ss *session) startInterpreter(ctx context.Context, limits guard.Limits) (*interpreter, error) {
	idle := int(max(limits.MaxStdoutBytes, limits.MaxStderrBytes))
	ip := &interpreter{stdout: celldriver.NewStream(idle), stderr: celldriver.NewStream(idle),
		changed: make(chan struct{}, 1), done: make(chan struct{})}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ip.cancel = cancel
	args := append(pysource.Flags(guard.InputNames(ss.s.Files), pycacheDir), "-c", celldriver.Source)
	pc := processConfig{Cmd: "python3", Args: args, Envs: ss.env(), Cwd: ss.b.cfg.WorkDir}
	started := make(chan int64, 1)
	go func() {
		defer ip.notify() // after done is closed: a waiter that sees it finds done closed
		defer close(ip.done)
		end, err := ss.e.stream(sctx, pc, max(time.Until(ss.end), 0)+interpreterSlack, true, func(ev processEvent) {
			switch x := ev.Event; {
			case x.Start != nil:
				select {
				case started <- int64(x.Start.Pid):
				default: // a second start event: not envd's; the first pid stands
				}
			case x.Data != nil:
				_, _ = ip.stdout.Write(x.Data.Stdout)
				_, _ = ip.stderr.Write(x.Data.Stderr)
			case x.End != nil:
				ip.ended, ip.exitCode, ip.exited = true, x.End.ExitCode, x.End.Exited
			}
			ip.notify()
		})
		switch {
		case err != nil:
			ip.streamErr = err
		case end != nil:
			ip.streamErr = end
		}
	}()
	select {
	case ip.pid = <-started:
		return ip, nil
	case <-ip.done:
		cancel()
		if ip.streamErr != nil {
			return nil, ip.streamErr
		}
		return nil, errors.New("the interpreter ended before it started")
	case <-time.After(ss.b.cfg.RequestTimeout):
		cancel()
		return nil, errors.New("no start event from envd within the request timeout")
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
}

// listed is a regular file of the working folder, named relative to it.
type listed struct {
	entry
	name string
	size int64
}

// fileEntries keeps the regular files under the working folder.
func (ss *session) fileEntries(entries []entry) []listed {
	prefix := strings.TrimRight(ss.b.cfg.WorkDir, "/") + "/"
	var out []listed
	for _, en := range entries {
		name, under := strings.CutPrefix(en.Path, prefix)
		if under && en.isFile() {
			out = append(out, listed{entry: en, name: name, size: int64(en.Size)})
		}
	}
	return out
}

// collect returns the regular files of the working folder that are new or changed since the
// last cell, within the limits (anything over a limit sets truncated). A file whose size and
// modified time are as the last cell left them is not read again; one that was read is
// compared by its bytes.
func (ss *session) collect(ctx context.Context, l guard.Limits) ([]guard.File, bool, error) {
	entries, err := ss.e.listDir(ctx, ss.b.cfg.WorkDir, maxListDepth)
	if err != nil {
		return nil, false, err
	}
	var (
		files     []guard.File
		total     int64
		truncated bool
	)
	seen := map[string]bool{}
	for _, en := range ss.fileEntries(entries) {
		seen[en.name] = true
		prev, had := ss.files[en.name]
		if had && en.Modified != "" && prev.modified == en.Modified && prev.size == en.size {
			continue
		}
		mark := fileMark{size: en.size, modified: en.Modified}
		if en.size > l.MaxFileBytes || total+en.size > l.MaxTotalFileBytes || len(files) >= l.MaxFiles {
			ss.files[en.name] = mark
			truncated = true
			continue
		}
		data, err := ss.e.download(ctx, en.Path, l.MaxFileBytes)
		if err != nil {
			return nil, false, err
		}
		mark.sum, mark.read = sha256.Sum256(data), true
		ss.files[en.name] = mark
		if had && prev.read && prev.sum == mark.sum {
			continue
		}
		if int64(len(data)) > l.MaxFileBytes || total+int64(len(data)) > l.MaxTotalFileBytes {
			truncated = true
			continue
		}
		total += int64(len(data))
		files = append(files, guard.File{Name: en.name, Size: int64(len(data)), Content: data})
	}
	for name := range ss.files {
		if !seen[name] {
			delete(ss.files, name)
		}
	}
	return files, truncated, nil
}

// Close kills the sandbox (its time to live ends it if the kill fails). It is safe to call more
// than once; later calls return nil.
func (ss *session) Close(ctx context.Context) error {
	first := false
	ss.closeOnce.Do(func() {
		first = true
		close(ss.closed)
		ss.stopKeeper()
		if ss.interp != nil {
			ss.interp.stop()
		}
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ss.b.cfg.KillTimeout)
		defer cancel()
		if err := ss.b.api.kill(kctx, ss.id); err != nil {
			ss.closeErr = fmt.Errorf("e2b: close session sandbox %s: %w", ss.id, err)
			ss.b.log.Warn("e2b: kill session sandbox failed; its time to live and the reaper will end it", "sandbox_id", ss.id, "error", err)
			return
		}
		ss.b.log.Info("e2b session sandbox killed", "sandbox_id", ss.id)
	})
	if !first {
		return nil
	}
	return ss.closeErr
}
