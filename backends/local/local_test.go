package local

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

func requirePython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed for the local backend tests: %v", err)
	}
}

func newBackend(t *testing.T) (*Backend, string) {
	t.Helper()
	requirePython(t)
	tmp := enterableTempDir(t)
	b, err := New(Config{AllowUnsafeLocal: true, TempDir: tmp, UID: DefaultUID})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b, tmp
}

func check(t *testing.T, req guard.Request) guard.Checked {
	t.Helper()
	p := guard.Policy{Languages: []string{guard.Python, guard.Shell}}
	c, err := p.Check(req, Name)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return c
}

func TestRefusesWithoutFlag(t *testing.T) {
	_, err := New(Config{})
	var ce *guard.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("New without AllowUnsafeLocal: got %v; want ConfigError", err)
	}
}

func TestRunsPythonAndShell(t *testing.T) {
	b, tmp := newBackend(t)
	tests := []struct {
		name, lang, code string
		wantExit         int
		wantOut          string
	}{
		{"python", guard.Python, "import sys\nprint(6*7)\nsys.exit(3)", 3, "42\n"},
		{"shell", guard.Shell, "echo hi; exit 0", 0, "hi\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := b.Run(context.Background(), check(t, guard.Request{Code: tt.code, Language: tt.lang}))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != tt.wantExit || string(res.Stdout) != tt.wantOut || res.TimedOut {
				t.Fatalf("got exit %d stdout %q timed_out %t; want exit %d stdout %q", res.ExitCode, res.Stdout, res.TimedOut, tt.wantExit, tt.wantOut)
			}
		})
	}
	assertEmpty(t, tmp)
}

func TestTimeoutKillsBusyLoop(t *testing.T) {
	b, tmp := newBackend(t)
	c := check(t, guard.Request{Code: "print('started', flush=True)\nwhile True: pass", Settings: guard.Settings{Limits: guard.Limits{Timeout: time.Second}}})
	res, err := b.Run(context.Background(), c)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.TimedOut || res.ExitCode != -1 {
		t.Fatalf("got timed_out %t exit %d; want true -1", res.TimedOut, res.ExitCode)
	}
	if !strings.Contains(string(res.Stdout), "started") {
		t.Fatalf("output printed before the timeout was lost: stdout %q", res.Stdout)
	}
	assertEmpty(t, tmp)
}

// A child forks a grandchild that ignores SIGTERM and sleeps; the child exits at once. The
// grandchild must not survive the run.
func TestNoProcessLeftBehind(t *testing.T) {
	b, _ := newBackend(t)
	code := `
import os, signal, sys, time
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)
    os._exit(0)
print(pid, flush=True)
`
	res, err := b.Run(context.Background(), check(t, guard.Request{Code: code}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("grandchild pid: %v (stdout %q, stderr %q)", err, res.Stdout, res.Stderr)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d that ignores SIGTERM is still running after the run", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid is a live process (a zombie waiting for its reaper counts as dead).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestLargeOutputIsCappedAndMemoryBounded(t *testing.T) {
	b, _ := newBackend(t)
	code := "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(50):\n    sys.stdout.buffer.write(chunk)\n"
	c := check(t, guard.Request{Code: code, Settings: guard.Settings{Limits: guard.Limits{MaxStdoutBytes: 1000}}})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := b.Run(context.Background(), c)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(res.Stdout) != 1000 || !res.StdoutTruncated || res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("got %d bytes truncated %t exit %d timed_out %t; want 1000 true 0 false", len(res.Stdout), res.StdoutTruncated, res.ExitCode, res.TimedOut)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Fatalf("the worker allocated %d bytes for 50 MB of output; want at most 8 MiB", grew)
	}
}

func TestWorkerEnvironmentIsNotInherited(t *testing.T) {
	b, _ := newBackend(t)
	t.Setenv("SANDBOXFLOW_TEST_WORKER_SECRET", "hunter2")
	code := "import os\nfor k, v in sorted(os.environ.items()):\n    print(k + '=' + v)\n"
	res, err := b.Run(context.Background(), check(t, guard.Request{Code: code, Settings: guard.Settings{Env: map[string]string{"GREETING": "hello"}}}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := string(res.Stdout)
	if strings.Contains(out, "hunter2") || strings.Contains(out, "SANDBOXFLOW_TEST_WORKER_SECRET") {
		t.Fatalf("the worker's environment leaked into the code:\n%s", out)
	}
	if !strings.Contains(out, "GREETING=hello\n") {
		t.Fatalf("the request's env is missing:\n%s", out)
	}
}

func TestFilesInAndOut(t *testing.T) {
	b, tmp := newBackend(t)
	in := []byte{0, 1, 2, 255, '\n', 'x'}
	code := `
import os
data = open('data/in.bin', 'rb').read()
open('out.bin', 'wb').write(data[::-1])
os.symlink('/etc/passwd', 'link')
`
	res, err := b.Run(context.Background(), check(t, guard.Request{Code: code, Settings: guard.Settings{Files: map[string][]byte{"data/in.bin": in}}}))
	if err != nil {
		t.Fatalf("Run: %v (stderr %s)", err, res.Stderr)
	}
	if len(res.Files) != 1 || res.Files[0].Name != "out.bin" || string(res.Files[0].Content) != "x\n\xff\x02\x01\x00" {
		t.Fatalf("got files %+v; want only out.bin with the input reversed", res.Files)
	}
	if !res.FilesTruncated {
		t.Fatalf("a symbolic link was produced but files_truncated is false")
	}
	assertEmpty(t, tmp)
}

func TestCancelStopsTheRun(t *testing.T) {
	b, tmp := newBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Run(ctx, check(t, guard.Request{Code: "import time\ntime.sleep(60)"}))
	var ie *guard.IntegrationError
	if !errors.As(err, &ie) || !ie.CodeMayHaveStarted {
		t.Fatalf("got %v; want an IntegrationError with CodeMayHaveStarted", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("cancel took %s", time.Since(start))
	}
	assertEmpty(t, tmp)
}

// The guard wrapper around the real local backend: the full path a worker takes.
func TestGuardedLocalRun(t *testing.T) {
	b, _ := newBackend(t)
	p := guard.Policy{Languages: []string{guard.Python}}
	c, err := p.Check(guard.Request{Code: "print('hi')"}, Name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := guard.New(b, p).Run(context.Background(), c)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.OK || string(res.Stdout) != "hi\n" || res.Backend != Name || res.Digest != c.Digest {
		t.Fatalf("got %+v; want ok with stdout hi", res)
	}
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("temporary folder %s still holds %d entries, first %s", dir, len(entries), entries[0].Name())
	}
}

// enterableTempDir is a temporary folder that the code's uid may enter (t.TempDir's is 0700 of
// the worker's user), removed when the test ends.
func enterableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandboxflow-local-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}
