package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/tracing"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// Name is the backend's name, part of every digest it runs.
const Name = kinds.Local

// Warning is logged on every run and belongs in any description of the backend that a model or a
// reviewer reads.
const Warning = "the local backend is DEVELOPMENT ONLY: code runs as a plain process on the worker's host, with its network and every file its user can read; nothing is isolated"

// SameUserWarning is added to Warning when the code runs as the worker's own user (the worker
// is not root, or Config.UID is zero; see Backend.RunWarning).
const SameUserWarning = "the code runs as the worker's own user: it can read and change every file the worker can, " +
	"the reviewer key of worker --dev (DATA_DIR/reviewer/id_ed25519) and the reviewers file included, and so approve runs of its own; " +
	"run the worker as root (it then runs the code as uid 65534) or use the Docker backend"

// DefaultUID is the uid (and gid) the worker's local backend runs the code as when the worker
// runs as root: nobody.
const DefaultUID = 65534

// Config configures the local backend.
type Config struct {
	// AllowUnsafeLocal must be true: without it New returns a ConfigError.
	AllowUnsafeLocal bool
	// Python is the Python interpreter; when the worker runs as root, UID must be able to run
	// it. Optional: defaults to DefaultPython().
	Python string
	// Shell is the POSIX shell for language "sh". Optional: defaults to "/bin/sh".
	Shell string
	// TempDir is where each run's temporary folder is made. Optional: defaults to os.TempDir().
	TempDir string
	// Logger receives the WARNING logged on every run. Optional: defaults to slog.Default().
	Logger *slog.Logger
	// KillWait bounds how long output is drained after the process group was killed. Optional:
	// defaults to 2 s.
	KillWait time.Duration
	// UID, when set and the worker runs as root, is the uid and gid the code runs as, with no
	// supplementary groups: it cannot read the worker's own files (0600 of root, such as the
	// development reviewer key), and the run's folders are given to it (TempDir must be
	// enterable by it, Python runnable by it). The worker sets DefaultUID. Optional: zero runs
	// the code as the worker's user, as does a worker that is not root; RunWarning then says
	// what that means.
	UID int
	// Unreadable lists files of the worker that the code must not read (the payload key file:
	// with it and the Temporal server on the host's network, the code could read every run's
	// code, input and output). Unchangeable lists files it must not change or replace (the
	// reviewers file). When the code runs as UID, New refuses, with a ConfigError naming the
	// file, any that UID can read, or write or replace (its folder writable). Optional: empty.
	Unreadable, Unchangeable []string
}

// Backend runs code as a local child process. Create it with New.
type Backend struct {
	python, shell, tempDir string
	logger                 *slog.Logger
	killWait               time.Duration
	// uid is the code's uid and gid, or -1 to run it as the worker's user (not root).
	uid int
}

// New validates cfg and returns the backend, or a guard.ConfigError when AllowUnsafeLocal is not
// set or an interpreter cannot be found.
func New(cfg Config) (*Backend, error) {
	if !cfg.AllowUnsafeLocal {
		return nil, &guard.ConfigError{Msg: "local backend: refusing to start without AllowUnsafeLocal (--allow-unsafe-local): " + Warning}
	}
	b := &Backend{
		python:   cfg.Python,
		shell:    cfg.Shell,
		tempDir:  cfg.TempDir,
		logger:   cfg.Logger,
		killWait: cfg.KillWait,
	}
	if b.shell == "" {
		b.shell = "/bin/sh"
	}
	if b.tempDir == "" {
		b.tempDir = os.TempDir()
	}
	if b.logger == nil {
		b.logger = slog.Default()
	}
	if b.killWait <= 0 {
		b.killWait = 2 * time.Second
	}
	b.uid = -1
	if cfg.UID < 0 {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("local backend: uid %d: want a positive uid, or zero to run as the worker's user", cfg.UID)}
	}
	if cfg.UID > 0 && os.Geteuid() == 0 {
		b.uid = cfg.UID
	}
	var err error
	if b.python == "" {
		b.python, err = DefaultPython()
	} else {
		b.python, err = exec.LookPath(b.python)
	}
	if err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("local backend: python interpreter: %v", err)}
	}
	if b.shell, err = exec.LookPath(b.shell); err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("local backend: shell: %v", err)}
	}
	if b.uid >= 0 {
		for _, argv := range [][]string{{b.python, "-E", "-s", "-c", "pass"}, {b.shell, "-c", ":"}} {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir, cmd.Env = b.tempDir, []string{"PATH=" + codePath}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.credential()}
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, &guard.ConfigError{Msg: fmt.Sprintf("local backend: the code runs as uid %d (the worker is root), which cannot run %s in %s: %v %q; "+
					"give an interpreter it can run (such as /usr/bin/python3) and a temporary folder it can enter", b.uid, argv[0], b.tempDir, err, clip(out))}
			}
		}
		if err := b.checkOutOfReach(cfg.Unreadable, cfg.Unchangeable); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// replaceableBy reports whether uid could replace file when it can write file's folder: not when
// the folder is sticky (as /tmp is) and file is another's.
func replaceableBy(file string, uid int) (bool, error) {
	dir, err := os.Stat(filepath.Dir(file))
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil // nothing to write into: the probe says no
	}
	if err != nil {
		return false, err
	}
	if dir.Mode()&fs.ModeSticky == 0 {
		return true, nil
	}
	st, err := os.Lstat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return !ok || int(sys.Uid) == uid, nil
}

// checkOutOfReach asks the shell, run as the code's uid, whether it can read a file of
// unreadable, or write a file of unchangeable or its folder (to replace it): the kernel's answer
// (access(2) for that uid, every folder on the way and ACLs counted), not a reading of modes.
func (b *Backend) checkOutOfReach(unreadable, unchangeable []string) error {
	probe := func(test, file string) (bool, error) {
		cmd := exec.Command(b.shell, "-c", `test `+test+` "$1"`, "sh", file)
		cmd.Dir, cmd.Env = b.tempDir, []string{"PATH=" + codePath}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.credential()}
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return true, nil
		case errors.As(err, &exit) && exit.ExitCode() == 1:
			return false, nil
		}
		return false, &guard.ConfigError{Msg: fmt.Sprintf("local backend: checking whether uid %d can reach %s: %v", b.uid, file, err)}
	}
	for _, f := range unreadable {
		if f == "" {
			continue
		}
		f, err := filepath.Abs(f) // the probe runs in TempDir
		if err != nil {
			return &guard.ConfigError{Msg: fmt.Sprintf("local backend: %v", err)}
		}
		yes, err := probe("-r", f)
		if err != nil {
			return err
		}
		if yes {
			return &guard.ConfigError{Msg: fmt.Sprintf("local backend: the code runs as uid %d, which can read %s; "+
				"make it readable by the worker's user only (chmod 600, or a folder of mode 700)", b.uid, f)}
		}
	}
	for _, f := range unchangeable {
		if f == "" {
			continue
		}
		f, err := filepath.Abs(f)
		if err != nil {
			return &guard.ConfigError{Msg: fmt.Sprintf("local backend: %v", err)}
		}
		targets := []string{f, filepath.Dir(f)}
		if replaceable, err := replaceableBy(f, b.uid); err != nil {
			return &guard.ConfigError{Msg: fmt.Sprintf("local backend: %v", err)}
		} else if !replaceable {
			targets = targets[:1]
		}
		for _, target := range targets {
			yes, err := probe("-w", target)
			if err != nil {
				return err
			}
			if yes {
				return &guard.ConfigError{Msg: fmt.Sprintf("local backend: the code runs as uid %d, which can write %s and so change %s; "+
					"make them writable by the worker's user only", b.uid, target, f)}
			}
		}
	}
	return nil
}

// codePath is the code's PATH.
const codePath = "/usr/local/bin:/usr/bin:/bin"

// DefaultPython is the interpreter New uses when Config.Python is empty: python3 on the code's
// PATH (/usr/local/bin:/usr/bin:/bin) when the worker runs as root, where the code's uid can run
// it; else the interpreter behind python3 on the worker's PATH (its sys.executable: a pyenv shim
// does not run in the code's minimal environment).
func DefaultPython() (string, error) {
	if os.Geteuid() == 0 {
		for _, dir := range filepath.SplitList(codePath) {
			p := filepath.Join(dir, "python3")
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o001 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("no python3 that others may run in %s", codePath)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	if real := strings.TrimSpace(string(out)); err == nil && real != "" {
		return real, nil
	}
	return py, nil
}

func (b *Backend) credential() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.uid), Groups: []uint32{}}
}

func clip(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

// Name returns "local".
func (b *Backend) Name() string { return Name }

// RunWarning is the WARNING logged on every run: Warning, plus SameUserWarning when the code
// runs as the worker's own user.
func (b *Backend) RunWarning() string {
	if b.uid < 0 {
		return Warning + "; " + SameUserWarning
	}
	return Warning
}

// Run runs the checked request in a fresh temporary folder and removes it afterwards.
func (b *Backend) Run(ctx context.Context, c guard.Checked) (guard.Result, error) {
	b.logger.Warn(b.RunWarning(), "digest", c.Digest, "workflow_id", c.Owner.WorkflowID)

	_, span := tracing.Start(ctx, tracing.SpanTakeSandbox)
	base, err := os.MkdirTemp(b.tempDir, "sandboxflow-local-")
	if err != nil {
		err = &guard.IntegrationError{Op: "local: make temporary folder", Err: err}
		tracing.End(span, err, guard.TypeOf(err))
		return guard.Result{}, err
	}
	defer os.RemoveAll(base)
	d, err := prepare(base, c)
	tracing.End(span, err, guard.TypeOf(err))
	if err != nil {
		return guard.Result{}, err
	}
	if b.uid >= 0 {
		if err := chownTree(base, b.uid); err != nil {
			return guard.Result{}, &guard.IntegrationError{Op: "local: give the run's folder to uid " + fmt.Sprint(b.uid), Err: err}
		}
	}
	cmd, err := b.command(c, d)
	if err != nil {
		return guard.Result{}, err
	}
	if cmd.Stdin != nil {
		defer cmd.Stdin.(*os.File).Close()
	}
	cmd.Dir = d.work
	cmd.Env = environment(d, c)
	res, err := b.runProcess(ctx, cmd, c.Limits)
	if err != nil {
		return guard.Result{}, err
	}
	res.Files, res.FilesTruncated = collectFiles(d.work, c.Files, c.Limits)
	return res, nil
}

// runProcess starts cmd with pipes of its own and waits for it within the limits' timeout (a
// timeout is a result) or ctx (an IntegrationError whose outcome is unknown); nothing of its
// process group outlives it.
func (b *Backend) runProcess(ctx context.Context, cmd *exec.Cmd, l guard.Limits) (guard.Result, error) {
	stdout := guard.NewCapBuffer(l.MaxStdoutBytes).Tee(guard.OutputOf(ctx), guard.StreamStdout)
	stderr := guard.NewCapBuffer(l.MaxStderrBytes).Tee(guard.OutputOf(ctx), guard.StreamStderr)
	drained, closeWriters, closeReaders, err := attach(cmd, stdout, stderr)
	if err != nil {
		return guard.Result{}, &guard.IntegrationError{Op: "local: make pipes", Err: err}
	}
	defer closeReaders()

	start := time.Now()
	err = cmd.Start()
	closeWriters()
	if err != nil {
		return guard.Result{}, &guard.IntegrationError{Op: "local: start interpreter", Err: err}
	}
	timedOut, cancelled, waitErr := wait(ctx, cmd, l.Timeout)
	duration := time.Since(start)

	select {
	case <-drained:
	case <-time.After(b.killWait):
		closeReaders()
		<-drained
	}
	if cancelled {
		return guard.Result{}, &guard.IntegrationError{Op: "local: run cancelled", Err: ctx.Err(), CodeMayHaveStarted: true}
	}
	res := guard.Result{
		ExitCode:        exitCode(cmd, waitErr),
		TimedOut:        timedOut,
		Stdout:          stdout.Bytes(),
		Stderr:          stderr.Bytes(),
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
		Duration:        duration,
		Measured:        guard.MeasuredOf(stdout, stderr),
	}
	if timedOut {
		res.ExitCode = -1
	}
	return res, nil
}

// dirs are a run's folders under its base folder: work (the input files, where the code starts),
// home and tmp (its HOME and TMPDIR, empty), pycache (a pycache prefix nothing creates) and the
// code file.
type dirs struct {
	work, home, tmp, pycache, code string
}

// prepare makes the run's folders, the input files and the code file.
func prepare(base string, c guard.Checked) (dirs, error) {
	d := dirs{
		work: filepath.Join(base, "work"), home: filepath.Join(base, "home"), tmp: filepath.Join(base, "tmp"),
		pycache: filepath.Join(base, "pycache"), code: filepath.Join(base, "main"),
	}
	for _, dir := range []string{d.work, d.home, d.tmp} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return dirs{}, &guard.IntegrationError{Op: "local: make working folders", Err: err}
		}
	}
	if err := writeInputs(d.work, c.Files); err != nil {
		return dirs{}, &guard.IntegrationError{Op: "local: write input files", Err: err}
	}
	if err := os.WriteFile(d.code, []byte(c.Code), 0o600); err != nil {
		return dirs{}, &guard.IntegrationError{Op: "local: write code", Err: err}
	}
	return d, nil
}

// chownTree gives base and everything under it to uid (and the same gid), links not followed.
func chownTree(base string, uid int) error {
	return filepath.WalkDir(base, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// command is the interpreter for the request's language, in a process group of its own that dies
// with the worker, as b.uid when that is set. Python reads the code from its stdin, as in the
// Docker backend, with pysource.Flags: the working folder is sys.path[0] (input modules
// import) and nothing there or in the environment runs first.
func (b *Backend) command(c guard.Checked, d dirs) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	switch c.Language {
	case guard.Python:
		code, err := os.Open(d.code)
		if err != nil {
			return nil, &guard.IntegrationError{Op: "local: open code", Err: err}
		}
		cmd = exec.Command(b.python, append(pysource.Flags(guard.InputNames(c.Files), d.pycache), "-")...)
		cmd.Stdin = code
	case guard.Shell:
		cmd = exec.Command(b.shell, d.code)
	default:
		return nil, &guard.ToolUsageError{Msg: fmt.Sprintf("local backend: language %q is not offered", c.Language)}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if b.uid >= 0 {
		cmd.SysProcAttr.Credential = b.credential()
	}
	return cmd, nil
}

// wait waits for the started command until it exits, the timeout passes or ctx ends; whatever
// ended the run, nothing of the code's process group outlives it.
func wait(ctx context.Context, cmd *exec.Cmd, timeout time.Duration) (timedOut, cancelled bool, waitErr error) {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case waitErr = <-exited:
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
		cancelled = true
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if timedOut || cancelled {
		waitErr = <-exited
	}
	return timedOut, cancelled, waitErr
}

// attach gives the command pipes of its own and drains them into the buffers. Using *os.File
// pipes means cmd.Wait returns when the process exits, even while a grandchild holds them open.
// closeWriters must be called once the command started (the child holds its own copies);
// closeReaders ends draining that a surviving process would otherwise keep going.
func attach(cmd *exec.Cmd, stdout, stderr io.Writer) (drained <-chan struct{}, closeWriters, closeReaders func(), err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(stdout, outR) }()
	go func() { defer wg.Done(); _, _ = io.Copy(stderr, errR) }()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var wOnce, rOnce sync.Once
	closeWriters = func() { wOnce.Do(func() { outW.Close(); errW.Close() }) }
	closeReaders = func() { rOnce.Do(func() { outR.Close(); errR.Close() }) }
	return done, closeWriters, closeReaders, nil
}

// environment is the code's: LANG (the request may override it), the request's env, then the
// backend's own, which win (os/exec keeps the last of a repeated name). HOME is not the working
// folder, where input files land; the PYTHON* names are for interpreters the code starts (its
// own Python ignores them, -E).
func environment(d dirs, c guard.Checked) []string {
	out := []string{"LANG=C.UTF-8"}
	for _, e := range c.Env {
		out = append(out, e.Name+"="+e.Value)
	}
	out = append(out,
		"PATH="+codePath,
		"HOME="+d.home,
		"TMPDIR="+d.tmp,
		"PYTHONNOUSERSITE=1",
		"PYTHONDONTWRITEBYTECODE=1",
	)
	if pysource.BytecodeAmongInputs(guard.InputNames(c.Files)) {
		out = append(out, "PYTHONPYCACHEPREFIX="+d.pycache)
	}
	return out
}

func exitCode(cmd *exec.Cmd, waitErr error) int {
	if cmd.ProcessState == nil {
		return -1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return -1
	}
	return cmd.ProcessState.ExitCode()
}

// writeInputs writes input files under work through an os.Root, so no name can reach outside it
// even if a check upstream were wrong.
func writeInputs(work string, files []guard.InputFile) error {
	if len(files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(work)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range files {
		if err := guard.CheckFileName(f.Name); err != nil {
			return err
		}
		if dir := filepath.Dir(f.Name); dir != "." {
			if err := root.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("input %s: %w", f.Name, err)
			}
		}
		if err := root.WriteFile(f.Name, f.Content, 0o600); err != nil {
			return fmt.Errorf("input %s: %w", f.Name, err)
		}
	}
	return nil
}

// collectFiles returns the regular files the code left in work (symbolic links are not followed,
// input files left unchanged are not returned), reading at most the limits. It reads through an
// os.Root: the worker may be root and the folder the code's, and a process of the code that
// outlived the run could swap a folder for a link while it is walked; nothing outside work is
// ever opened.
func collectFiles(work string, inputs []guard.InputFile, l guard.Limits) ([]guard.File, bool) {
	unchanged := make(map[string][]byte, len(inputs))
	for _, f := range inputs {
		unchanged[f.Name] = f.Content
	}
	var (
		files []guard.File
		total int64
	)
	truncated, err := walkFiles(work, func(root *os.Root, rel string, d fs.DirEntry) (bool, error) {
		if !d.Type().IsRegular() || guard.CheckFileName(rel) != nil {
			return true, nil
		}
		if len(files) >= l.MaxFiles {
			return true, filepath.SkipAll
		}
		content, over, err := readBounded(root, rel, l.MaxFileBytes)
		if err != nil || over || total+int64(len(content)) > l.MaxTotalFileBytes {
			return true, nil
		}
		if in, ok := unchanged[rel]; ok && bytes.Equal(in, content) {
			return false, nil
		}
		total += int64(len(content))
		files = append(files, guard.File{Name: rel, Size: int64(len(content)), Content: content})
		return false, nil
	})
	if err != nil {
		return nil, true
	}
	return files, truncated
}

// walkFiles walks work in lexical order through an os.Root, so that no link is followed and
// nothing outside work is opened, and calls visit with each entry that is not a folder. visit
// reports whether it left the entry out, and may stop the walk with filepath.SkipAll. walkFiles
// reports whether anything was left out (an entry that could not be read included); its error
// is the one of opening work.
func walkFiles(work string, visit func(root *os.Root, rel string, d fs.DirEntry) (leftOut bool, err error)) (bool, error) {
	root, err := os.OpenRoot(work)
	if err != nil {
		return true, err
	}
	defer root.Close()
	truncated := false
	_ = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			truncated = true
			return nil
		}
		if d.IsDir() {
			return nil
		}
		leftOut, err := visit(root, rel, d)
		truncated = truncated || leftOut
		return err
	})
	return truncated, nil
}

// readBounded reads at most max bytes of a regular file under root without following a final
// symbolic link, and reports whether the file holds more.
func readBounded(root *os.Root, name string, max int64) ([]byte, bool, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("not a regular file: %s", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > max {
		return nil, true, nil
	}
	return b, false, nil
}
