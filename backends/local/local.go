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
	"sync"
	"syscall"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Name is the backend's name, part of every digest it runs.
const Name = kinds.Local

// Warning is logged on every run and belongs in any description of the backend that a model or a
// reviewer reads.
const Warning = "the local backend is DEVELOPMENT ONLY: code runs as a plain process of the worker, with the worker's user, files and network; nothing is isolated"

// Config configures the local backend.
type Config struct {
	// AllowUnsafeLocal must be true: without it New returns a ConfigError.
	AllowUnsafeLocal bool
	// Python is the Python interpreter. Optional: defaults to "python3" found on PATH.
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
}

// Backend runs code as a local child process. Create it with New.
type Backend struct {
	python, shell, tempDir string
	logger                 *slog.Logger
	killWait               time.Duration
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
	if b.python == "" {
		b.python = "python3"
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
	var err error
	if b.python, err = exec.LookPath(b.python); err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("local backend: python interpreter: %v", err)}
	}
	if b.shell, err = exec.LookPath(b.shell); err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("local backend: shell: %v", err)}
	}
	return b, nil
}

// Name returns "local".
func (b *Backend) Name() string { return Name }

// Run runs the checked request in a fresh temporary folder and removes it afterwards.
func (b *Backend) Run(ctx context.Context, c guard.Checked) (guard.Result, error) {
	b.logger.Warn(Warning, "digest", c.Digest, "workflow_id", c.Owner.WorkflowID)

	base, err := os.MkdirTemp(b.tempDir, "sandboxflow-local-")
	if err != nil {
		return guard.Result{}, &guard.IntegrationError{Op: "local: make temporary folder", Err: err}
	}
	defer os.RemoveAll(base)
	work, codePath, err := prepare(base, c)
	if err != nil {
		return guard.Result{}, err
	}
	cmd, err := b.command(c, codePath)
	if err != nil {
		return guard.Result{}, err
	}
	cmd.Dir = work
	cmd.Env = environment(work, c.Env)

	stdout := guard.NewCapBuffer(c.Limits.MaxStdoutBytes)
	stderr := guard.NewCapBuffer(c.Limits.MaxStderrBytes)
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
	timedOut, cancelled, waitErr := wait(ctx, cmd, c.Limits.Timeout)
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
	}
	if timedOut {
		res.ExitCode = -1
	}
	res.Files, res.FilesTruncated = collectFiles(work, c.Files, c.Limits)
	return res, nil
}

// prepare makes the working folder with the input files, and the code file beside it.
func prepare(base string, c guard.Checked) (work, codePath string, err error) {
	work = filepath.Join(base, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return "", "", &guard.IntegrationError{Op: "local: make working folder", Err: err}
	}
	if err := writeInputs(work, c.Files); err != nil {
		return "", "", &guard.IntegrationError{Op: "local: write input files", Err: err}
	}
	codePath = filepath.Join(base, "main")
	if err := os.WriteFile(codePath, []byte(c.Code), 0o600); err != nil {
		return "", "", &guard.IntegrationError{Op: "local: write code", Err: err}
	}
	return work, codePath, nil
}

// command is the interpreter for the request's language, in a process group of its own that dies
// with the worker.
func (b *Backend) command(c guard.Checked, codePath string) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	switch c.Language {
	case guard.Python:
		// -I: ignore PYTHON* variables and the user's site folder; -u: unbuffered, so output
		// printed before a timeout is not lost in a buffer.
		cmd = exec.Command(b.python, "-I", "-u", codePath)
	case guard.Shell:
		cmd = exec.Command(b.shell, codePath)
	default:
		return nil, &guard.ToolUsageError{Msg: fmt.Sprintf("local backend: language %q is not offered", c.Language)}
	}
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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

func environment(work string, env []guard.EnvVar) []string {
	out := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + work,
		"TMPDIR=" + work,
		"LANG=C.UTF-8",
		"PYTHONDONTWRITEBYTECODE=1",
	}
	for _, e := range env {
		out = append(out, e.Name+"="+e.Value)
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
// input files left unchanged are not returned), reading at most the limits.
func collectFiles(work string, inputs []guard.InputFile, l guard.Limits) ([]guard.File, bool) {
	unchanged := make(map[string][]byte, len(inputs))
	for _, f := range inputs {
		unchanged[f.Name] = f.Content
	}
	var (
		files     []guard.File
		truncated bool
		total     int64
	)
	_ = filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(work, p)
		if err != nil {
			truncated = true
			return nil
		}
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() || guard.CheckFileName(rel) != nil {
			truncated = true
			return nil
		}
		if len(files) >= l.MaxFiles {
			truncated = true
			return filepath.SkipAll
		}
		content, over, err := readBounded(p, l.MaxFileBytes)
		if err != nil || over || total+int64(len(content)) > l.MaxTotalFileBytes {
			truncated = true
			return nil
		}
		if in, ok := unchanged[rel]; ok && bytes.Equal(in, content) {
			return nil
		}
		total += int64(len(content))
		files = append(files, guard.File{Name: rel, Size: int64(len(content)), Content: content})
		return nil
	})
	return files, truncated
}

// readBounded reads at most max bytes of a regular file without following a final symbolic link,
// and reports whether the file holds more.
func readBounded(p string, max int64) ([]byte, bool, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("not a regular file: %s", p)
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
