package local

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/celldriver"
	"github.com/sandboxflow/sandboxflow/pysource"
)

var _ guard.SessionBackend = (*Backend)(nil)

// OpenSession makes the session's folder (work, HOME and TMPDIR in a fresh temporary folder,
// given to Config.UID when the code runs as it), writes the input files and starts the session's
// python3 (the driver of internal/celldriver, with pysource.Flags, in the working folder):
// that process is the session's sandbox. No cell code runs.
func (b *Backend) OpenSession(ctx context.Context, s guard.CheckedSession) (guard.Sandbox, error) {
	for _, l := range s.Languages {
		if l != guard.Python && l != guard.Shell {
			return nil, &guard.ConfigError{Msg: fmt.Sprintf("local backend: language %q is not offered (python, sh)", l)}
		}
	}
	b.logger.Warn(b.RunWarning(), "digest", s.Digest, "workflow_id", s.Owner.WorkflowID, "session", true)
	base, err := os.MkdirTemp(b.tempDir, "sandboxflow-session-")
	if err != nil {
		return nil, &guard.IntegrationError{Op: "local: make the session's folder", Err: err}
	}
	c := s.CellChecked(guard.Cell{Language: guard.Python})
	c.Code = ""
	d, err := prepare(base, c)
	if err == nil && b.uid >= 0 {
		if err = chownTree(base, b.uid); err != nil {
			err = &guard.IntegrationError{Op: "local: give the session's folder to uid " + fmt.Sprint(b.uid), Err: err}
		}
	}
	if err != nil {
		os.RemoveAll(base)
		return nil, err
	}
	ss := &session{b: b, s: s, base: base, d: d, env: environment(d, c), files: map[string]fileMark{}, done: make(chan struct{})}
	for _, f := range s.Files {
		if st, err := os.Lstat(filepath.Join(d.work, f.Name)); err == nil {
			m := markOf(st, time.Now())
			m.sum, m.read = sha256.Sum256(f.Content), true
			ss.files[f.Name] = m
		}
	}
	if ss.interp, err = ss.startInterpreter(); err != nil {
		os.RemoveAll(base)
		return nil, err
	}
	return ss, nil
}

// session is one session's local sandbox: its folder and its python3 process.
type session struct {
	b    *Backend
	s    guard.CheckedSession
	base string
	d    dirs
	env  []string

	// interp is the interpreter; nil after a cell killed it (reset: the next python cell starts
	// a fresh one and says so).
	interp *interpreter
	reset  bool
	files  map[string]fileMark

	doneOnce  sync.Once
	done      chan struct{}
	closeOnce sync.Once
	closed    atomic.Bool
}

// fileMark is a file of the working folder as the last cell left it.
type fileMark struct {
	size     int64
	modified time.Time
	// changed is the change time and inode the inode number: the code can set a file's
	// modification time back (os.utime), never its change time.
	changed time.Time
	inode   uint64
	// racy is set when the change time was within racyWindow of the walk that took the mark: a
	// write in the same tick of the file system's clock would leave every field as it is, so the
	// next walk reads the file again.
	racy bool
	sum  [32]byte
	read bool
}

// racyWindow is how close to a walk a file's change time makes its mark racy.
const racyWindow = 50 * time.Millisecond

// markOf is the mark of a file from its stat, taken by a walk that started at began.
func markOf(info fs.FileInfo, began time.Time) fileMark {
	m := fileMark{size: info.Size(), modified: info.ModTime(), racy: true}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		m.changed, m.inode = time.Unix(st.Ctim.Unix()), st.Ino
		m.racy = !m.changed.Before(began.Add(-racyWindow)) || !m.modified.Before(began.Add(-racyWindow))
	}
	return m
}

// same says whether a file's mark shows no change since the walk that took prev.
func (prev fileMark) same(m fileMark) bool {
	return !prev.racy && prev.size == m.size && prev.modified.Equal(m.modified) && prev.changed.Equal(m.changed) && prev.inode == m.inode
}

// ID names the session's folder.
func (ss *session) ID() string { return filepath.Base(ss.base) }

// Done is closed when the session's interpreter died while no cell was current (killed from
// outside, or by a thread an earlier cell left): the session's state is gone with it.
func (ss *session) Done() <-chan struct{} { return ss.done }

func (ss *session) lost() error {
	return &guard.SandboxLost{Msg: "local session " + ss.ID() + ": its python3 process ended while no cell was running"}
}

// interpreter is the session's python3 driver process.
type interpreter struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *celldriver.Stream
	changed        chan struct{}
	exited         chan struct{} // closed once the process was waited for and its output read
	waitErr        error
	// inCell is set while a cell is current; killed once the worker killed the process.
	inCell, killed atomic.Bool
}

// notifier hands writes to a stream and says that something came.
type notifier struct {
	s  *celldriver.Stream
	ch chan struct{}
}

func (n notifier) Write(p []byte) (int, error) {
	_, _ = n.s.Write(p)
	select {
	case n.ch <- struct{}{}:
	default:
	}
	return len(p), nil
}

// startInterpreter starts the driver with pipes of its own, in a process group of its own that
// dies with the worker, as the code's uid, and watches it.
func (ss *session) startInterpreter() (*interpreter, error) {
	idle := int(max(ss.s.Limits.MaxStdoutBytes, ss.s.Limits.MaxStderrBytes))
	ip := &interpreter{stdout: celldriver.NewStream(idle), stderr: celldriver.NewStream(idle),
		changed: make(chan struct{}, 1), exited: make(chan struct{})}
	cmd := exec.Command(ss.b.python, append(pysource.Flags(guard.InputNames(ss.s.Files), ss.d.pycache), "-c", celldriver.Source)...)
	cmd.Dir, cmd.Env = ss.d.work, ss.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if ss.b.uid >= 0 {
		cmd.SysProcAttr.Credential = ss.b.credential()
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, &guard.IntegrationError{Op: "local: session interpreter: make pipes", Err: err}
	}
	drained, closeWriters, closeReaders, err := attach(cmd, notifier{ip.stdout, ip.changed}, notifier{ip.stderr, ip.changed})
	if err != nil {
		return nil, &guard.IntegrationError{Op: "local: session interpreter: make pipes", Err: err}
	}
	err = cmd.Start()
	closeWriters()
	if err != nil {
		closeReaders()
		return nil, &guard.IntegrationError{Op: "local: start the session's interpreter", Err: err}
	}
	ip.cmd, ip.stdin = cmd, stdin
	go func() {
		ip.waitErr = cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-drained:
		case <-time.After(ss.b.killWait):
			closeReaders()
			<-drained
		}
		closeReaders()
		if !ip.inCell.Load() && !ip.killed.Load() && !ss.closed.Load() {
			ss.doneOnce.Do(func() { close(ss.done) })
			ss.b.logger.Warn("local session lost: its python3 ended while no cell was running", "session", ss.ID())
		}
		close(ip.exited)
		select {
		case ip.changed <- struct{}{}:
		default:
		}
	}()
	return ip, nil
}

// kill kills the interpreter's process group and waits for it to be reaped.
func (ip *interpreter) kill() {
	ip.killed.Store(true)
	_ = syscall.Kill(-ip.cmd.Process.Pid, syscall.SIGKILL)
	<-ip.exited
}

func (ip *interpreter) hasExited() bool {
	select {
	case <-ip.exited:
		return true
	default:
		return false
	}
}

// RunCell runs one cell: python in the session's python3 (a fresh one, with StateReset, after a
// cell killed the last), sh as a fresh sh -c in its own process group, killed when it ends; both
// in the working folder with the session's env. Files are the regular files this cell created or
// changed. A timeout is a result and kills the interpreter.
func (ss *session) RunCell(ctx context.Context, cell guard.Cell, limits guard.Limits) (guard.Result, error) {
	select {
	case <-ss.done:
		return guard.Result{}, ss.lost()
	default:
	}
	if ss.closed.Load() {
		return guard.Result{}, &guard.IntegrationError{Op: "local: session cell", Err: errors.New("the session was closed")}
	}
	if !slices.Contains(ss.s.Languages, cell.Language) {
		return guard.Result{}, &guard.ToolUsageError{Msg: fmt.Sprintf("local backend: language %q is not offered in this session", cell.Language)}
	}
	if len(cell.Packages) > 0 {
		return guard.Result{}, &guard.ConfigError{Msg: "local backend: this sandbox host installs no packages: it has no package index (worker --package-index)"}
	}
	ss.b.logger.Warn(ss.b.RunWarning(), "session", ss.ID(), "cell", cell.Index)
	start := time.Now()
	var (
		res guard.Result
		err error
	)
	if cell.Language == guard.Python {
		res, err = ss.runPython(ctx, cell, limits)
	} else {
		cmd := exec.Command(ss.b.shell, "-c", cell.Code)
		cmd.Dir, cmd.Env = ss.d.work, ss.env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if ss.b.uid >= 0 {
			cmd.SysProcAttr.Credential = ss.b.credential()
		}
		res, err = ss.b.runProcess(ctx, cmd, limits)
	}
	if err != nil {
		return guard.Result{}, err
	}
	files, truncated := ss.collect(limits)
	res.Files, res.FilesTruncated = files, res.FilesTruncated || truncated
	res = guard.Enforce(res, limits)
	res.Duration = time.Since(start)
	return res, nil
}

// runPython sends the cell to the interpreter and waits for its end marker, the interpreter's
// death, the timeout or ctx.
func (ss *session) runPython(ctx context.Context, cell guard.Cell, limits guard.Limits) (guard.Result, error) {
	fresh := false
	if ss.interp == nil {
		ip, err := ss.startInterpreter()
		if err != nil {
			return guard.Result{}, err
		}
		ss.interp, fresh, ss.reset = ip, ss.reset, false
	}
	ip := ss.interp
	ip.inCell.Store(true)
	defer ip.inCell.Store(false)
	if ip.hasExited() {
		// Closed Done already, unless the cell had begun: either way nothing of it ran.
		ss.doneOnce.Do(func() { close(ss.done) })
		return guard.Result{}, ss.lost()
	}
	c := celldriver.BeginCell(ctx, ip.stdout, ip.stderr, limits)
	result := func() guard.Result { return c.Result(fresh) }
	ended := func() {
		c.Abandon()
		ss.interp, ss.reset = nil, true
	}
	// A write to an interpreter that just died fails (EPIPE): its death is then the cell's result.
	_, _ = ip.stdin.Write(celldriver.Command(c.Nonce, cell.Index, cell.Code))
	timer := time.NewTimer(limits.Timeout)
	defer timer.Stop()
	for {
		select {
		case <-ip.changed:
			if done, exitCode := c.Ended(); done {
				res := result()
				res.ExitCode, res.ExitReportedBy = exitCode, guard.ReportedByInterpreter
				return res, nil
			}
			if !ip.hasExited() {
				continue
			}
			ended()
			res := result()
			res.ExitCode = exitCode(ip.cmd, ip.waitErr)
			return res, nil
		case <-timer.C:
			ip.kill()
			ended()
			res := result()
			res.TimedOut, res.ExitCode = true, -1
			return res, nil
		case <-ctx.Done():
			ip.kill()
			ended()
			return guard.Result{}, &guard.IntegrationError{Op: "local: session cell cancelled", Err: ctx.Err(), CodeMayHaveStarted: true}
		}
	}
}

// collect returns the regular files of the working folder that are new or changed since the last
// cell, within the limits, reading through an os.Root (nothing outside the folder is opened). A
// file whose size, modification and change times and inode are as the last cell left them (and
// were not racy, see fileMark) is not read again; one that was read is compared by its bytes. Anything else (links, files over a limit) that is new
// or changed sets truncated.
func (ss *session) collect(l guard.Limits) ([]guard.File, bool) {
	var (
		files []guard.File
		total int64
	)
	seen := map[string]bool{}
	began := time.Now()
	truncated, err := walkFiles(ss.d.work, func(root *os.Root, rel string, d fs.DirEntry) (bool, error) {
		info, err := d.Info()
		if err != nil {
			return true, nil
		}
		seen[rel] = true
		prev, had := ss.files[rel]
		mark := markOf(info, began)
		if had && prev.same(mark) {
			return false, nil
		}
		ss.files[rel] = mark
		if !d.Type().IsRegular() || guard.CheckFileName(rel) != nil || len(files) >= l.MaxFiles {
			return true, nil
		}
		content, over, err := readBounded(root, rel, l.MaxFileBytes)
		if err != nil || over {
			return true, nil
		}
		mark.sum, mark.read = sha256.Sum256(content), true
		ss.files[rel] = mark
		if had && prev.read && prev.sum == mark.sum {
			return false, nil
		}
		if total+int64(len(content)) > l.MaxTotalFileBytes {
			return true, nil
		}
		total += int64(len(content))
		files = append(files, guard.File{Name: rel, Size: int64(len(content)), Content: content})
		return false, nil
	})
	if err != nil {
		return nil, true
	}
	for name := range ss.files {
		if !seen[name] {
			delete(ss.files, name)
		}
	}
	return files, truncated
}

// Close kills the interpreter's process group and removes the session's folder. It is safe to
// call more than once.
func (ss *session) Close(context.Context) error {
	var err error
	ss.closeOnce.Do(func() {
		ss.closed.Store(true)
		if ss.interp != nil {
			ss.interp.kill()
		}
		if rerr := os.RemoveAll(ss.base); rerr != nil {
			err = &guard.IntegrationError{Op: "local: remove the session's folder", Err: rerr}
		}
	})
	return err
}
