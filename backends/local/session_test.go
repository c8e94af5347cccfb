package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/startuptest"
)

var sessionPolicy = guard.Policy{Languages: []string{guard.Python, guard.Shell}}

func openSession(t *testing.T, b *Backend, req guard.SessionRequest) (*session, guard.CheckedSession) {
	t.Helper()
	s, err := sessionPolicy.CheckSession(req, Name)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.OpenSession(t.Context(), s)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb.(*session), s
}

func runCell(t *testing.T, sb guard.Sandbox, s guard.CheckedSession, index int, lang, code string) (guard.Result, error) {
	t.Helper()
	c, err := sessionPolicy.CheckCell(s, index, lang, code)
	if err != nil {
		t.Fatal(err)
	}
	return sb.RunCell(t.Context(), c, s.Limits)
}

func cell(t *testing.T, sb guard.Sandbox, s guard.CheckedSession, index int, lang, code string) guard.Result {
	t.Helper()
	res, err := runCell(t, sb, s, index, lang, code)
	if err != nil {
		t.Fatalf("cell %d: %v", index, err)
	}
	return res
}

func fileNames(res guard.Result) string {
	var out []string
	for _, f := range res.Files {
		out = append(out, f.Name+"="+string(f.Content))
	}
	return strings.Join(out, ",")
}

func TestSessionKeepsStateAcrossCells(t *testing.T) {
	b, tmp := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{Settings: guard.Settings{Files: map[string][]byte{"in.csv": []byte("1,2,3")}, Env: map[string]string{"GREETING": "hi"}}})
	r1 := cell(t, sb, s, 1, guard.Python, "x = 41\nimport json\nlog = open('notes.txt', 'w')\nlog.write('a')\nlog.flush()\nprint('one')\n")
	if !r1.OK || string(r1.Stdout) != "one\n" || r1.StateReset || fileNames(r1) != "notes.txt=a" {
		t.Fatalf("cell 1: ok %t stdout %q stderr %q files %v; want one and notes.txt=a (the input left out)", r1.OK, r1.Stdout, r1.Stderr, fileNames(r1))
	}
	r2 := cell(t, sb, s, 2, guard.Python, "print(x + 1)\nprint(json.dumps({'n': sum(int(v) for v in open('in.csv').read().split(','))}))\nlog.write('b')\nlog.close()\n")
	if string(r2.Stdout) != "42\n{\"n\": 6}\n" || fileNames(r2) != "notes.txt=ab" {
		t.Fatalf("cell 2: stdout %q stderr %q files %v; want 42, the import and the open file kept", r2.Stdout, r2.Stderr, fileNames(r2))
	}
	r3 := cell(t, sb, s, 3, guard.Shell, "cat notes.txt; echo \" $GREETING\"; echo made > sh.txt")
	if string(r3.Stdout) != "ab hi\n" || fileNames(r3) != "sh.txt=made\n" {
		t.Fatalf("sh cell: stdout %q stderr %q files %v; want what python wrote", r3.Stdout, r3.Stderr, fileNames(r3))
	}
	r4 := cell(t, sb, s, 4, guard.Python, "print(open('sh.txt').read().strip(), x)\nraise SystemExit(3)\n")
	if r4.ExitCode != 3 || string(r4.Stdout) != "made 41\n" || r4.Files != nil {
		t.Fatalf("cell 4: exit %d stdout %q files %v", r4.ExitCode, r4.Stdout, fileNames(r4))
	}
	// The interpreter reported cell 4's status; the host measured the sh cell's process.
	if r4.ExitReportedBy != guard.ReportedByInterpreter || r3.ExitReportedBy != "" {
		t.Errorf("exit reported by %q (python) and %q (sh); want interpreter and the host's measure", r4.ExitReportedBy, r3.ExitReportedBy)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertEmpty(t, tmp)
}

func TestSessionExitAndTimeoutReset(t *testing.T) {
	b, _ := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{Settings: guard.Settings{Limits: guard.Limits{Timeout: 2 * time.Second}}})
	cell(t, sb, s, 1, guard.Python, "x = 1\nopen('keep.txt', 'w').write('kept')\n")
	r2 := cell(t, sb, s, 2, guard.Python, "import os\nprint('bye', flush=True)\nos._exit(7)\n")
	if r2.ExitCode != 7 || string(r2.Stdout) != "bye\n" || r2.StateReset || r2.ExitReportedBy != "" {
		t.Fatalf("os._exit: exit %d stdout %q; want 7 and bye", r2.ExitCode, r2.Stdout)
	}
	select {
	case <-sb.Done():
		t.Fatal("Done closed by a cell's own exit; want a reset, not a lost sandbox")
	default:
	}
	r3 := cell(t, sb, s, 3, guard.Python, "print('x' in globals(), open('keep.txt').read())\ny = 2\n")
	if !r3.StateReset || string(r3.Stdout) != "False kept\n" {
		t.Fatalf("after os._exit: reset %t stdout %q stderr %q; want a fresh interpreter, the file kept", r3.StateReset, r3.Stdout, r3.Stderr)
	}
	r4 := cell(t, sb, s, 4, guard.Python, "print('spin', flush=True)\nwhile True: pass\n")
	if !r4.TimedOut || r4.ExitCode != -1 || string(r4.Stdout) != "spin\n" {
		t.Fatalf("busy cell: %+v; want timed out with its output", r4)
	}
	r5 := cell(t, sb, s, 5, guard.Python, "print('y' in globals())\n")
	if !r5.StateReset || string(r5.Stdout) != "False\n" {
		t.Fatalf("after the timeout: reset %t stdout %q; want a fresh interpreter", r5.StateReset, r5.Stdout)
	}
	if r6 := cell(t, sb, s, 6, guard.Python, "print(6)\n"); r6.StateReset {
		t.Fatal("the cell after the reset says reset too")
	}
}

func TestSessionsSeeNothingOfEachOther(t *testing.T) {
	b, _ := newBackend(t)
	a, sa := openSession(t, b, guard.SessionRequest{})
	o, so := openSession(t, b, guard.SessionRequest{})
	cell(t, a, sa, 1, guard.Python, "secret = 'a'\nopen('secret.txt', 'w').write('a')\nimport builtins\nbuiltins.print = lambda *a, **k: None\n")
	if r := cell(t, a, sa, 2, guard.Python, "print('hidden')\nimport sys\nsys.stdout.write('direct\\n')\n"); string(r.Stdout) != "direct\n" {
		t.Fatalf("session a: stdout %q; want print replaced in its own interpreter", r.Stdout)
	}
	r := cell(t, o, so, 1, guard.Python, "import os\nprint('shown', 'secret' in globals(), sorted(os.listdir('.')))\n")
	if string(r.Stdout) != "shown False []\n" {
		t.Fatalf("session b: stdout %q stderr %q; want its own print, nothing of a", r.Stdout, r.Stderr)
	}
	if a.d.work == o.d.work {
		t.Fatal("both sessions share a folder")
	}
}

func TestSessionInterpreterKilledFromOutsideIsLost(t *testing.T) {
	b, tmp := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{})
	cell(t, sb, s, 1, guard.Python, "x = 1\n")
	if err := syscall.Kill(sb.interp.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sb.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the interpreter was killed from outside")
	}
	_, err := runCell(t, sb, s, 2, guard.Python, "print(x)\n")
	var lost *guard.SandboxLost
	if !errors.As(err, &lost) || guard.TypeOf(err) != guard.TypeSandboxLost {
		t.Fatalf("cell after the kill: %v; want a SandboxLost", err)
	}
	if err := sb.Close(t.Context()); err != nil || sb.Close(t.Context()) != nil {
		t.Fatalf("Close: %v", err)
	}
	assertEmpty(t, tmp)
}

// A session's cells run as the code's uid, as runs do: a root worker's 0600 file is out of
// their reach.
func TestSessionCellCannotReadRootsFiles(t *testing.T) {
	// Not root, the worker runs the code as its own user (RunWarning says so): nothing to check.
	need.Need(t, need.Root)
	b, _ := newBackend(t)
	dir := enterableTempDir(t)
	key := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(key, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	sb, s := openSession(t, b, guard.SessionRequest{})
	code := "import os\ntry:\n    print(open(" + pyString(key) + ").read())\nexcept OSError as e:\n    print('no', e.errno, os.getuid())\n"
	if r := cell(t, sb, s, 1, guard.Python, code); string(r.Stdout) != "no 13 65534\n" {
		t.Fatalf("python cell: %q %q; want EACCES as uid 65534", r.Stdout, r.Stderr)
	}
	if r := cell(t, sb, s, 2, guard.Shell, "cat "+key+" 2>/dev/null || echo no $(id -u)"); string(r.Stdout) != "no 65534\n" {
		t.Fatalf("sh cell: %q; want no as 65534", r.Stdout)
	}
}

func TestSessionShellCellLeavesNoProcess(t *testing.T) {
	b, _ := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{})
	r := cell(t, sb, s, 1, guard.Shell, "sleep 600 & echo $!")
	pid := strings.TrimSpace(string(r.Stdout))
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := strconv.Atoi(pid)
		if err != nil {
			t.Fatalf("pid %q: %v", pid, err)
		}
		if !alive(n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sh cell's background sleep %d outlived the cell", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A thread an earlier cell left prints between cells: the next cell's result shows it, and the
// next cell still ends at its own marker.
func TestSessionOutputBetweenCellsShowsInTheNext(t *testing.T) {
	b, _ := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{})
	r1 := cell(t, sb, s, 1, guard.Python, "import threading, time\ndef later():\n    time.sleep(0.3)\n    print('tick', flush=True)\nthreading.Thread(target=later, daemon=True).start()\nprint('one')\n")
	if string(r1.Stdout) != "one\n" {
		t.Fatalf("cell 1: %q", r1.Stdout)
	}
	time.Sleep(time.Second)
	if r2 := cell(t, sb, s, 2, guard.Python, "print('two')\n"); string(r2.Stdout) != "tick\ntwo\n" {
		t.Fatalf("cell 2: stdout %q; want the thread's tick, then its own", r2.Stdout)
	}
}

func TestSessionCancelKillsTheCell(t *testing.T) {
	b, _ := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{})
	c, err := sessionPolicy.CheckCell(s, 1, guard.Python, "import time\ntime.sleep(60)\n")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err = sb.RunCell(ctx, c, s.Limits)
	var ie *guard.IntegrationError
	if !errors.As(err, &ie) || !ie.CodeMayHaveStarted {
		t.Fatalf("got %v; want an outcome-unknown IntegrationError", err)
	}
	if r := cell(t, sb, s, 2, guard.Python, "print(2)\n"); !r.StateReset || string(r.Stdout) != "2\n" {
		t.Fatalf("after the cancel: reset %t stdout %q", r.StateReset, r.Stdout)
	}
}

// A cell that closes every descriptor the driver holds (its stdin, its copies of stdout and
// stderr) kills the interpreter when the driver writes its marker: the cell still gets a result,
// and the next cell a fresh interpreter.
func TestSessionCellClosingTheDriversDescriptors(t *testing.T) {
	b, _ := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{Settings: guard.Settings{Limits: guard.Limits{Timeout: 5 * time.Second}}})
	r1 := cell(t, sb, s, 1, guard.Python, "import os\nprint('closing', flush=True)\nos.closerange(3, 4096)\n")
	if r1.TimedOut || r1.OK || !strings.HasPrefix(string(r1.Stdout), "closing\n") {
		t.Fatalf("cell 1: %+v; want a failed result with its output, not a timeout", r1)
	}
	if r2 := cell(t, sb, s, 2, guard.Python, "print(2)\n"); !r2.StateReset || string(r2.Stdout) != "2\n" {
		t.Fatalf("cell 2: reset %t stdout %q; want a fresh interpreter", r2.StateReset, r2.Stdout)
	}
}

// A background process a python cell leaves lives on in the session (it is the session's) and
// dies with it at Close.
func TestSessionBackgroundProcessDiesAtClose(t *testing.T) {
	b, tmp := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{})
	r := cell(t, sb, s, 1, guard.Python, "import subprocess\np = subprocess.Popen(['sleep', '600'])\nprint(p.pid)\n")
	pid, err := strconv.Atoi(strings.TrimSpace(string(r.Stdout)))
	if err != nil {
		t.Fatalf("pid: %v (stdout %q stderr %q)", err, r.Stdout, r.Stderr)
	}
	if r2 := cell(t, sb, s, 2, guard.Python, "print(p.poll())\n"); string(r2.Stdout) != "None\n" {
		t.Fatalf("cell 2: %q; want the process still running within the session", r2.Stdout)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the cell's background process %d outlived the session", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	assertEmpty(t, tmp)
}

// A cell that rewrites a file with bytes of the same size and sets its modification time back
// (os.utime) still has the change in its files: the change time, which no call of the code sets,
// is compared too. Without it the change was hidden from the cell's result and every later one.
func TestSessionFileChangeWithTimeSetBack(t *testing.T) {
	b, _ := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{Settings: guard.Settings{Files: map[string][]byte{"in.txt": []byte("aaaa")}}})
	time.Sleep(100 * time.Millisecond) // past the input file's clock tick
	r := cell(t, sb, s, 1, guard.Python, "import os\nst = os.stat('in.txt')\nopen('in.txt', 'w').write('bbbb')\nos.utime('in.txt', ns=(st.st_atime_ns, st.st_mtime_ns))\n")
	if got := fileNames(r); got != "in.txt=bbbb" {
		t.Fatalf("cell 1: files %q; want in.txt=bbbb", got)
	}
	time.Sleep(100 * time.Millisecond)
	r = cell(t, sb, s, 2, guard.Python, "import os\nst = os.stat('in.txt')\nopen('in.txt', 'w').write('cccc')\nos.utime('in.txt', ns=(st.st_atime_ns, st.st_mtime_ns))\n")
	if got := fileNames(r); got != "in.txt=cccc" {
		t.Fatalf("cell 2: files %q; want in.txt=cccc", got)
	}
	if r := cell(t, sb, s, 3, guard.Python, "pass\n"); fileNames(r) != "" {
		t.Fatalf("cell 3: files %q; want none", fileNames(r))
	}
}

// A module in the working folder named like one the cell driver imports never runs before a
// cell, at the first cell or after an interpreter reset (startuptest.ShadowCells).
func TestSessionShadowedDriverModules(t *testing.T) {
	b, _ := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{Settings: guard.Settings{Files: startuptest.DriverShadows()}})
	for i, c := range startuptest.ShadowCells() {
		if why := c.Check(cell(t, sb, s, i+1, guard.Python, c.Code)); why != "" {
			t.Errorf("%s: %s", c.Name, why)
		}
	}
}

// The local backend installs no packages: a cell that brings some gets the ConfigError a
// worker without a package index gives a run with packages, and nothing of it runs.
func TestSessionCellWithPackagesRefused(t *testing.T) {
	b, tmp := newBackend(t)
	sb, s := openSession(t, b, guard.SessionRequest{})
	ran := filepath.Join(tmp, "ran")
	pkgs := []guard.Package{{Name: "beta", Version: "2.0", Hashes: []string{"sha256:" + strings.Repeat("b", 64)}}}
	c, err := (guard.Policy{Languages: []string{guard.Python}, Packages: true}).CheckCell(s, 1, guard.Python, "open("+strconv.Quote(ran)+", 'w')", pkgs...)
	if err != nil {
		t.Fatal(err)
	}
	var ce *guard.ConfigError
	if _, err := sb.RunCell(t.Context(), c, s.Limits); !errors.As(err, &ce) || !strings.Contains(err.Error(), "installs no packages") {
		t.Fatalf("a cell with packages: %v; want the ConfigError", err)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cell ran (%v)", err)
	}
	if res := cell(t, sb, s, 2, guard.Python, "print('next')"); string(res.Stdout) != "next\n" {
		t.Errorf("the next cell: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}
