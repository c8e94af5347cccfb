package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/e2bfake"
)

// sessionPolicy offers both languages.
var sessionPolicy = guard.Policy{Languages: []string{guard.Python, guard.Shell}}

// openSession checks req and opens a session on b, closed when the test ends.
func openSession(t *testing.T, b *Backend, req guard.SessionRequest) (guard.Sandbox, guard.CheckedSession) {
	t.Helper()
	s, err := sessionPolicy.CheckSession(req, Name)
	if err != nil {
		t.Fatal(err)
	}
	s.Owner = guard.Owner{WorkflowID: "session-1", RunID: "run-1", ActivityID: "3"}
	sb, err := b.OpenSession(t.Context(), s)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb, s
}

// cell runs code as cell index of s in sb and fails the test on an error.
func cell(t *testing.T, sb guard.Sandbox, s guard.CheckedSession, index int, lang, code string) guard.Result {
	t.Helper()
	res, err := runCell(t, sb, s, index, lang, code)
	if err != nil {
		t.Fatalf("cell %d: %v", index, err)
	}
	return res
}

func runCell(t *testing.T, sb guard.Sandbox, s guard.CheckedSession, index int, lang, code string) (guard.Result, error) {
	t.Helper()
	return runCellWithin(t, sb, s, s.Limits, index, lang, code)
}

// cellWithin is cell with limits other than the session's.
func cellWithin(t *testing.T, sb guard.Sandbox, s guard.CheckedSession, limits guard.Limits, index int, lang, code string) guard.Result {
	t.Helper()
	res, err := runCellWithin(t, sb, s, limits, index, lang, code)
	if err != nil {
		t.Fatalf("cell %d: %v", index, err)
	}
	return res
}

func runCellWithin(t *testing.T, sb guard.Sandbox, s guard.CheckedSession, limits guard.Limits, index int, lang, code string) (guard.Result, error) {
	t.Helper()
	c, err := sessionPolicy.CheckCell(s, index, lang, code)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.RunCell(t.Context(), c, limits)
	noKey(t, res, err)
	return res, err
}

// fileNames lists a result's files as name=content.
func fileNames(res guard.Result) []string {
	var out []string
	for _, f := range res.Files {
		out = append(out, f.Name+"="+string(f.Content))
	}
	return out
}

func TestSessionKeepsStateAcrossCells(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{Settings: guard.Settings{
		Files: map[string][]byte{"in.csv": []byte("1,2,3")},
		Env:   map[string]string{"GREETING": "hi"},
	}})
	if r := f.Record(); r.Starts != 0 || r.Live != 1 || len(r.Creates) != 1 {
		t.Fatalf("after open: %d starts, %d live, %d creates; want no process started, one sandbox", r.Starts, r.Live, len(r.Creates))
	}
	create := f.Record().Creates[0]
	if create.Metadata[MetaDigest] != s.Digest || create.Metadata[MetaWorkflowID] != "session-1" || create.Metadata[MetaSessionEnd] == "" ||
		create.Timeout != 300 || create.AllowInternetAccess == nil || *create.AllowInternetAccess {
		t.Fatalf("create body %+v; want the session's digest and end, a 5 min time to live, no internet", create)
	}
	r1 := cell(t, sb, s, 1, guard.Python, "x = 41\nimport json\nlog = open('notes.txt', 'w')\nlog.write('a')\nlog.flush()\nprint('one')\n")
	if !r1.OK || string(r1.Stdout) != "one\n" || r1.StateReset || strings.Join(fileNames(r1), ",") != "notes.txt=a" {
		t.Fatalf("cell 1: ok %t stdout %q stderr %q reset %t files %v; want one, notes.txt=a (in.csv unchanged, left out)", r1.OK, r1.Stdout, r1.Stderr, r1.StateReset, fileNames(r1))
	}
	r2 := cell(t, sb, s, 2, guard.Python, "print(x + 1)\nprint(json.dumps({'n': sum(int(v) for v in open('in.csv').read().split(','))}))\nlog.write('b')\nlog.close()\n")
	if string(r2.Stdout) != "42\n{\"n\": 6}\n" || strings.Join(fileNames(r2), ",") != "notes.txt=ab" {
		t.Fatalf("cell 2: stdout %q stderr %q files %v; want 42, the import kept, the open file written", r2.Stdout, r2.Stderr, fileNames(r2))
	}
	r3 := cell(t, sb, s, 3, guard.Shell, "cat notes.txt; echo \" $GREETING\"; echo made > sh.txt")
	if string(r3.Stdout) != "ab hi\n" || strings.Join(fileNames(r3), ",") != "sh.txt=made\n" {
		t.Fatalf("sh cell: stdout %q stderr %q files %v; want what python wrote, the env, sh.txt", r3.Stdout, r3.Stderr, fileNames(r3))
	}
	r4 := cell(t, sb, s, 4, guard.Python, "import sys\nprint(open('sh.txt').read().strip(), x)\nsys.exit(3)\n")
	if r4.ExitCode != 3 || string(r4.Stdout) != "made 41\n" || len(r4.Files) != 0 {
		t.Fatalf("cell 4: exit %d stdout %q files %v; want 3, made 41, no files", r4.ExitCode, r4.Stdout, fileNames(r4))
	}
	r5 := cell(t, sb, s, 5, guard.Python, "print(x)\nraise ValueError('boom')\n")
	if r5.ExitCode != 1 || string(r5.Stdout) != "41\n" || r5.StateReset || !strings.Contains(string(r5.Stderr), "ValueError: boom") ||
		!strings.Contains(string(r5.Stderr), "raise ValueError('boom')") || strings.Contains(string(r5.Stderr), "_sandboxflow_driver") {
		t.Fatalf("cell 5: exit %d stdout %q stderr %q reset %t; want 1, state kept after sys.exit, the traceback of the cell alone", r5.ExitCode, r5.Stdout, r5.Stderr, r5.StateReset)
	}
	if r := f.Record(); r.Starts != 2 {
		t.Fatalf("%d processes started; want 2: one interpreter for every python cell, one sh", r.Starts)
	}
}

func TestSessionExitOfTheInterpreterResetsIt(t *testing.T) {
	t.Parallel()
	_, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{})
	cell(t, sb, s, 1, guard.Python, "x = 1\nopen('keep.txt', 'w').write('kept')\n")
	r2 := cell(t, sb, s, 2, guard.Python, "import os\nprint('bye', flush=True)\nos._exit(7)\n")
	if r2.ExitCode != 7 || string(r2.Stdout) != "bye\n" || r2.StateReset || r2.TimedOut {
		t.Fatalf("os._exit cell: exit %d stdout %q reset %t; want its true exit 7 and output", r2.ExitCode, r2.Stdout, r2.StateReset)
	}
	r3 := cell(t, sb, s, 3, guard.Python, "print('x' in globals(), open('keep.txt').read())\n")
	if !r3.StateReset || string(r3.Stdout) != "False kept\n" {
		t.Fatalf("next cell: reset %t stdout %q stderr %q; want a fresh interpreter, the file kept", r3.StateReset, r3.Stdout, r3.Stderr)
	}
	r4 := cell(t, sb, s, 4, guard.Python, "print('ok')\n")
	if r4.StateReset || string(r4.Stdout) != "ok\n" {
		t.Fatalf("the cell after: reset %t stdout %q; want no reset", r4.StateReset, r4.Stdout)
	}
}

func TestSessionTimeoutIsAResultAndResets(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{Settings: guard.Settings{Limits: guard.Limits{Timeout: 2 * time.Second}}})
	cell(t, sb, s, 1, guard.Python, "y = 5\n")
	// Cells 2 and 4 get shorter timeouts than the session's: the interpreter is already up for
	// cell 2, and sh starts at once; cell 3 starts a fresh interpreter within the session's 2 s.
	short := s.Limits
	short.Timeout = time.Second
	start := time.Now()
	r2 := cellWithin(t, sb, s, short, 2, guard.Python, "print('spinning', flush=True)\nwhile True: pass\n")
	if !r2.TimedOut || r2.ExitCode != -1 || !strings.HasPrefix(string(r2.Stdout), "spinning") || !strings.Contains(string(r2.Stderr), "timeout") {
		t.Fatalf("busy cell: timed_out %t exit %d stdout %q stderr %q; want a timeout with its output", r2.TimedOut, r2.ExitCode, r2.Stdout, r2.Stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the timeout took %s; want about 1 s", d)
	}
	r3 := cell(t, sb, s, 3, guard.Python, "print('y' in globals())\n")
	if !r3.StateReset || string(r3.Stdout) != "False\n" {
		t.Fatalf("after the timeout: reset %t stdout %q; want a fresh interpreter", r3.StateReset, r3.Stdout)
	}
	short.Timeout = 500 * time.Millisecond
	r4 := cellWithin(t, sb, s, short, 4, guard.Shell, "sleep 30")
	if !r4.TimedOut {
		t.Fatalf("sh cell past its timeout: %+v; want timed out", r4)
	}
	if r := f.Record(); r.Live != 1 {
		t.Fatalf("%d live; want the session's sandbox kept after the timeouts", r.Live)
	}
}

// A cell replaces print in builtins: later cells of its own session print nothing, another
// session's cells are untouched, and neither sees the other's files or variables.
func TestSessionsSeeNothingOfEachOther(t *testing.T) {
	t.Parallel()
	_, b, _ := setup(t, nil)
	a, sa := openSession(t, b, guard.SessionRequest{})
	o, so := openSession(t, b, guard.SessionRequest{})
	if a.ID() == o.ID() {
		t.Fatalf("both sessions got sandbox %s", a.ID())
	}
	cell(t, a, sa, 1, guard.Python, "secret = 'a-only'\nopen('secret.txt', 'w').write('a')\nimport builtins\nbuiltins.print = lambda *a, **k: None\n")
	if r := cell(t, a, sa, 2, guard.Python, "print('hidden')\nimport sys\nsys.stdout.write('direct\\n')\n"); string(r.Stdout) != "direct\n" {
		t.Fatalf("session a after print was replaced: stdout %q; want only the direct write", r.Stdout)
	}
	r := cell(t, o, so, 1, guard.Python, "import os\nprint('shown', 'secret' in globals(), sorted(os.listdir('.')))\n")
	if string(r.Stdout) != "shown False []\n" {
		t.Fatalf("session b: stdout %q stderr %q; want its own print, no variable, no file of a", r.Stdout, r.Stderr)
	}
}

// The end marker: one with another nonce is plain output; a cell that forges its own (reading
// the nonce from the driver's frame) ends its result there, and what it writes afterwards shows
// in the next cell's result, which still ends at its own marker.
func TestSessionForgedMarkers(t *testing.T) {
	t.Parallel()
	_, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{})
	r1 := cell(t, sb, s, 1, guard.Python, "import sys\nsys.stdout.write('\\x1esandboxflow-cell-end 00112233445566778899aabbccddeeff 0\\nafter\\n')\n")
	if string(r1.Stdout) != "\x1esandboxflow-cell-end 00112233445566778899aabbccddeeff 0\nafter\n" || r1.ExitCode != 0 {
		t.Fatalf("a marker with another nonce: stdout %q; want it kept as output", r1.Stdout)
	}
	forge := "import os, sys, threading, time\nnonce = sys._getframe(1).f_locals['nonce']\n" +
		"mark = ('\\x1esandboxflow-cell-end %s 0\\n' % nonce).encode()\nprint('early', flush=True)\nos.write(2, mark)\nos.write(1, mark)\n" +
		"time.sleep(0.5)\nprint('late', flush=True)\n"
	r2 := cell(t, sb, s, 2, guard.Python, forge)
	if string(r2.Stdout) != "early\n" || r2.ExitCode != 0 {
		t.Fatalf("a forged own marker: stdout %q exit %d; want the result to end at it", r2.Stdout, r2.ExitCode)
	}
	r3 := cell(t, sb, s, 3, guard.Python, "print('three')\n")
	if !regexp.MustCompile("^late\n\x1esandboxflow-cell-end [0-9a-f]{32} 0\nthree\n$").Match(r3.Stdout) || r3.ExitCode != 0 || r3.StateReset {
		t.Fatalf("the next cell: stdout %q exit %d; want the forger's late output and the driver's real marker of cell 2, then its own", r3.Stdout, r3.ExitCode)
	}
	r4 := cell(t, sb, s, 4, guard.Python, "print('four')\n")
	if string(r4.Stdout) != "four\n" {
		t.Fatalf("cell 4: stdout %q; want four alone", r4.Stdout)
	}
}

// killFromOutside kills the sandbox with the API, as another client of the team could.
func killFromOutside(t *testing.T, f *e2bfake.Server, id string) {
	t.Helper()
	if err := killOutside(f, id); err != nil {
		t.Fatal(err)
	}
}

func killOutside(f *e2bfake.Server, id string) error {
	req, _ := http.NewRequest(http.MethodDelete, f.APIURL()+"/sandboxes/"+id, nil)
	req.Header.Set("X-API-Key", testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("kill from outside: status %d", resp.StatusCode)
	}
	return nil
}

func waitDone(t *testing.T, sb guard.Sandbox, within time.Duration) {
	t.Helper()
	select {
	case <-sb.Done():
	case <-time.After(within):
		t.Fatalf("Done was not closed within %s of the sandbox's end", within)
	}
}

func fastKeeper(c *Config) {
	c.SessionTTL, c.SessionKeepAlive, c.TTLSlack = 2*time.Second, 100*time.Millisecond, time.Second
}

func TestSessionSandboxKilledFromOutsideIsLost(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, fastKeeper)
	sb, s := openSession(t, b, guard.SessionRequest{})
	cell(t, sb, s, 1, guard.Python, "x = 1\n")
	killFromOutside(t, f, sb.ID())
	waitDone(t, sb, 5*time.Second)
	_, err := runCell(t, sb, s, 2, guard.Python, "print(x)\n")
	var lost *guard.SandboxLost
	if !errors.As(err, &lost) || guard.TypeOf(err) != guard.TypeSandboxLost || guard.Retryable(err) {
		t.Fatalf("cell after the kill: %v; want a SandboxLost, never retried", err)
	}
}

func TestSessionSandboxKilledMidCellIsLost(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{guard.Python, guard.Shell} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			f, b, _ := setup(t, nil) // the default keeper (30 s): the cell itself finds the loss
			sb, s := openSession(t, b, guard.SessionRequest{})
			// The kill comes once the cell's "up" reaches the worker: its code runs, and sleeps.
			// (A session's stream holds back the last bytes that could start an end marker: the
			// dots push "up" past them.)
			var once sync.Once
			ctx := guard.WithOutput(t.Context(), func(st guard.Stream, p []byte) {
				if st == guard.StreamStdout && strings.Contains(string(p), "up") {
					once.Do(func() {
						go func() {
							if err := killOutside(f, sb.ID()); err != nil {
								t.Error(err)
							}
						}()
					})
				}
			})
			code := map[string]string{guard.Python: "import time\nprint('up', '.' * 100, flush=True)\ntime.sleep(20)\n", guard.Shell: "echo up; sleep 20"}[lang]
			c, err := sessionPolicy.CheckCell(s, 1, lang, code)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := sb.RunCell(ctx, c, s.Limits)
			noKey(t, res, err)
			if guard.TypeOf(err) != guard.TypeSandboxLost {
				t.Fatalf("cell whose sandbox was killed: %v; want a SandboxLost", err)
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("the loss was found after %s; want at once", time.Since(start))
			}
			waitDone(t, sb, time.Second)
		})
	}
}

func TestSessionKeeperExtendsTheTimeToLiveUntilTheLifetime(t *testing.T) {
	t.Parallel()
	// E2B's time to live is whole seconds: 1 s is the shortest there is.
	f, b, _ := setup(t, func(c *Config) {
		c.SessionTTL, c.SessionKeepAlive, c.TTLSlack = time.Second, 100*time.Millisecond, 100*time.Millisecond
	})
	sb, s := openSession(t, b, guard.SessionRequest{Lifetime: 1500 * time.Millisecond})
	if got := f.Record().Creates[0].Timeout; got != 1 {
		t.Fatalf("create timeout %d; want SessionTTL, 1 s", got)
	}
	time.Sleep(1300 * time.Millisecond) // past the first time to live
	if r := cell(t, sb, s, 1, guard.Shell, "echo alive"); string(r.Stdout) != "alive\n" {
		t.Fatalf("after the first time to live: %q", r.Stdout)
	}
	if n := len(f.Record().Timeouts); n == 0 {
		t.Fatal("the keeper never extended the time to live")
	}
	// Lifetime 1.5 s + TTLSlack 0.1 s, and up to the last whole second of time to live given
	// before then: E2B ends it, and Done says so.
	waitDone(t, sb, 4*time.Second)
	if r := f.Record(); len(r.Expired) != 1 || r.Expired[0] != sb.ID() {
		t.Fatalf("expired %v; want the session's sandbox ended by its time to live", r.Expired)
	}
}

func TestSessionCloseRemovesTheSandbox(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{})
	cell(t, sb, s, 1, guard.Python, "x = 1\n")
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("second Close: %v; want nil", err)
	}
	if r := f.Record(); r.Live != 0 || len(r.Kills) != 1 || r.Kills[0] != sb.ID() {
		t.Fatalf("live %d, kills %v; want the sandbox killed", r.Live, r.Kills)
	}
	if _, err := runCell(t, sb, s, 2, guard.Python, "print(x)\n"); err == nil || guard.Retryable(err) && guard.TypeOf(err) != guard.TypeIntegrationError {
		t.Fatalf("cell after Close: %v; want an error", err)
	}
	select {
	case <-sb.Done():
		t.Fatal("Done closed by Close; want it only for a sandbox that ended by itself")
	default:
	}
}

func TestSessionFilesAreTheCellsOwn(t *testing.T) {
	t.Parallel()
	_, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{Settings: guard.Settings{
		Files:  map[string][]byte{"in.txt": []byte("in")},
		Limits: guard.Limits{MaxFileBytes: 100},
	}})
	r1 := cell(t, sb, s, 1, guard.Python, "open('a.txt', 'w').write('1')\nopen('big.bin', 'w').write('x' * 500)\n")
	if strings.Join(fileNames(r1), ",") != "a.txt=1" || !r1.FilesTruncated {
		t.Fatalf("cell 1: files %v truncated %t; want a.txt, big.bin left out", fileNames(r1), r1.FilesTruncated)
	}
	r2 := cell(t, sb, s, 2, guard.Python, "open('b.txt', 'w').write('2')\n")
	if strings.Join(fileNames(r2), ",") != "b.txt=2" || r2.FilesTruncated {
		t.Fatalf("cell 2: files %v truncated %t; want b.txt alone (a.txt and big.bin unchanged)", fileNames(r2), r2.FilesTruncated)
	}
	r3 := cell(t, sb, s, 3, guard.Shell, "printf 3 > a.txt; printf changed > in.txt; rm b.txt")
	if strings.Join(fileNames(r3), ",") != "a.txt=3,in.txt=changed" {
		t.Fatalf("cell 3: files %v; want the changed a.txt and input", fileNames(r3))
	}
	// Same bytes written again: not a change.
	if r4 := cell(t, sb, s, 4, guard.Python, "import time\ntime.sleep(0.01)\nopen('a.txt', 'w').write('3')\n"); len(r4.Files) != 0 {
		t.Fatalf("cell 4: files %v; want none (a.txt holds the same bytes)", fileNames(r4))
	}
}

func TestReaperSparesLiveSessions(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	// The session's end is written in whole seconds (rounded down): at least 0.5 s after the open.
	sb, _ := openSession(t, b, guard.SessionRequest{Lifetime: 1500 * time.Millisecond})
	time.Sleep(10 * time.Millisecond)
	if n, err := b.Reap(t.Context(), time.Millisecond); err != nil || n != 0 {
		t.Fatalf("Reap during the session = %d, %v; want 0: its lifetime is not over", n, err)
	}
	time.Sleep(1600 * time.Millisecond)
	if n, err := b.Reap(t.Context(), time.Hour); err != nil || n != 1 {
		t.Fatalf("Reap after the session's end = %d, %v; want 1", n, err)
	}
	if r := f.Record(); r.Live != 0 || r.Kills[0] != sb.ID() {
		t.Fatalf("live %d kills %v; want the session's sandbox reaped", r.Live, r.Kills)
	}
}

// A thread an earlier cell left prints between cells: the next cell's result shows it (its
// reviewer and the next cell's see it), and the next cell still ends at its own marker.
func TestSessionOutputBetweenCellsShowsInTheNext(t *testing.T) {
	t.Parallel()
	_, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{})
	r1 := cell(t, sb, s, 1, guard.Python, "import threading, time\ndef later():\n    time.sleep(0.1)\n    print('tick', flush=True)\nthreading.Thread(target=later, daemon=True).start()\nprint('one')\n")
	if string(r1.Stdout) != "one\n" {
		t.Fatalf("cell 1: %q", r1.Stdout)
	}
	time.Sleep(600 * time.Millisecond)
	if r2 := cell(t, sb, s, 2, guard.Python, "print('two')\n"); string(r2.Stdout) != "tick\ntwo\n" {
		t.Fatalf("cell 2: stdout %q; want the thread's tick, then its own", r2.Stdout)
	}
}

// The interpreter's process killed inside the sandbox between cells (the sandbox still there):
// the next python cell starts a fresh one and says so; the session goes on.
func TestSessionInterpreterKilledInsideTheSandboxResets(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{})
	cell(t, sb, s, 1, guard.Python, "x = 1\n")
	pids := f.Pids(sb.ID())
	if len(pids) != 1 {
		t.Fatalf("pids %v; want the interpreter alone", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	r := cell(t, sb, s, 2, guard.Python, "print('x' in globals())\n")
	if !r.StateReset || string(r.Stdout) != "False\n" {
		t.Fatalf("after the kill: reset %t stdout %q; want a fresh interpreter", r.StateReset, r.Stdout)
	}
	select {
	case <-sb.Done():
		t.Fatal("Done closed; the sandbox is still there")
	default:
	}
}

// The interpreter's stream cut mid-cell with the sandbox still there: outcome unknown, never
// retried, and the next python cell starts afresh.
func TestSessionStreamCutIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{})
	cell(t, sb, s, 1, guard.Shell, "true")
	f.SetFaults(e2bfake.Faults{CutStream: true}) // the interpreter's stream, which cell 2 starts
	_, err := runCell(t, sb, s, 2, guard.Python, "print('partial', flush=True)\nimport time\ntime.sleep(1)\n")
	var ie *guard.IntegrationError
	if !errors.As(err, &ie) || !ie.CodeMayHaveStarted || guard.Retryable(err) {
		t.Fatalf("got %v; want an outcome-unknown IntegrationError", err)
	}
	f.SetFaults(e2bfake.Faults{})
	if r := cell(t, sb, s, 3, guard.Python, "print('ok')\n"); !r.StateReset || string(r.Stdout) != "ok\n" {
		t.Fatalf("after the cut: reset %t stdout %q", r.StateReset, r.Stdout)
	}
}

// A cell that closes every descriptor the driver holds kills the interpreter when the driver
// writes its marker: the cell still gets a result, the next cell a fresh interpreter.
func TestSessionCellClosingTheDriversDescriptors(t *testing.T) {
	t.Parallel()
	_, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{Settings: guard.Settings{Limits: guard.Limits{Timeout: 5 * time.Second}}})
	r1 := cell(t, sb, s, 1, guard.Python, "import os\nprint('closing', flush=True)\nos.closerange(3, 4096)\n")
	if r1.TimedOut || r1.OK || !strings.HasPrefix(string(r1.Stdout), "closing\n") {
		t.Fatalf("cell 1: %+v; want a failed result with its output, not a timeout", r1)
	}
	if r2 := cell(t, sb, s, 2, guard.Python, "print(2)\n"); !r2.StateReset || string(r2.Stdout) != "2\n" {
		t.Fatalf("cell 2: reset %t stdout %q; want a fresh interpreter", r2.StateReset, r2.Stdout)
	}
}

// E2B installs no packages: a cell that brings some gets the ConfigError a worker without a
// package index gives a run with packages; no process starts for it and the next cell runs.
func TestSessionCellWithPackagesRefused(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	sb, s := openSession(t, b, guard.SessionRequest{})
	pkgs := []guard.Package{{Name: "beta", Version: "2.0", Hashes: []string{"sha256:" + strings.Repeat("b", 64)}}}
	c, err := (guard.Policy{Languages: []string{guard.Python}, Packages: true}).CheckCell(s, 1, guard.Python, "print('RAN')", pkgs...)
	if err != nil {
		t.Fatal(err)
	}
	var ce *guard.ConfigError
	if _, err := sb.RunCell(t.Context(), c, s.Limits); !errors.As(err, &ce) || !strings.Contains(err.Error(), "installs no packages") {
		t.Fatalf("a cell with packages: %v; want the ConfigError", err)
	}
	if n := f.Record().Starts; n != 0 {
		t.Errorf("%d processes started for the refused cell", n)
	}
	if res := cell(t, sb, s, 2, guard.Python, "print('next')"); string(res.Stdout) != "next\n" {
		t.Errorf("the next cell: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}
