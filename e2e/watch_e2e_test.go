//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// timedLines reads r line by line, stamping each line with when it was read.
type timedLines struct {
	mu    sync.Mutex
	lines []string
	at    []time.Time
	done  chan struct{}
}

func readTimed(r io.Reader) *timedLines {
	l := &timedLines{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				l.mu.Lock()
				l.lines = append(l.lines, line)
				l.at = append(l.at, time.Now())
				l.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	return l
}

// startStarter starts the starter with args, its stdout and stderr read line by line.
func startStarter(t *testing.T, s starterCLI, args ...string) (cmd *exec.Cmd, stdout, stderr *timedLines) {
	t.Helper()
	cmd = exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), s.env...)
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, readTimed(outR), readTimed(errR)
}

// finish waits for the command and its readers, within d.
func finish(t *testing.T, cmd *exec.Cmd, d time.Duration, readers ...*timedLines) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for _, r := range readers {
			<-r.done
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("starter %v: %v", cmd.Args[1:], err)
		}
	case <-time.After(d):
		t.Fatalf("starter %v did not end within %s", cmd.Args[1:], d)
	}
}

var numbered = regexp.MustCompile(`^line (\d+) at ([0-9.]+)\n$`)

// TestStarterWatchShowsOutputAsItIsPrinted drives the binaries as a new user would: worker --dev
// with the Docker backend (runc), starter run, then `starter watch` and `starter result --follow`
// started before the approval. The code prints a numbered line with its time every 200 ms for
// 6 s, with ANSI and OSC escape sequences and bytes that are not UTF-8 among them: watch prints
// line 1 within a second of its printing and every line in order, each hostile byte escaped,
// then the result; result --follow prints the same on stderr and only the result on stdout. A
// 200 MiB flood then shows as skip markers on stderr and a truncated result; starter's own lines
// (the markers, the result) begin with the record separator, which the code's escaped output
// never holds.
func TestStarterWatchShowsOutputAsItIsPrinted(t *testing.T) {
	requireDocker(t)
	workerBin, starterBin := binaries(t)
	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=e2e-watch", "USER=alice", devReviewerKeyEnv(data)}
	startDevWorker(t, workerBin, env, "--data-dir", data, "--ui-port", "-1", "--backend", "docker",
		"--docker-image", testPythonImage(), "--docker-runtime", "runc")
	s := starterCLI{t: t, bin: starterBin, env: env}

	code := "import sys, time\n" +
		"for i in range(1, 31):\n" +
		"    print('line %d at %.3f' % (i, time.time()), flush=True)\n" +
		"    if i == 3:\n" +
		"        sys.stdout.buffer.write(b'red \\x1b[31mX\\x1b[0m title \\x1b]0;pwned\\x07 bad \\xff\\xfe\\n'); sys.stdout.flush()\n" +
		"        sys.stderr.write('warn \\x1b[2J\\n'); sys.stderr.flush()\n" +
		"    time.sleep(0.2)\n"
	var started startedJSON
	s.mustJSON(&started, "run", "--code", code, "--timeout", "30s")
	waitPending(t, s, started.WorkflowID)
	watch, wOut, wErr := startStarter(t, s, "watch", started.WorkflowID)
	follow, fOut, fErr := startStarter(t, s, "result", started.WorkflowID, "--follow")
	time.Sleep(300 * time.Millisecond) // both poll before the code runs
	approveRun(t, s, started)
	finish(t, watch, 60*time.Second, wOut, wErr)
	finish(t, follow, 30*time.Second, fOut, fErr)

	// watch: the lines in order, each within a second of its printing, then the result.
	var live []string
	var resultJSON strings.Builder
	for i, line := range wOut.lines {
		if r, ok := strings.CutPrefix(line, "\x1e"); ok || resultJSON.Len() > 0 {
			resultJSON.WriteString(r)
			continue
		}
		live = append(live, line)
		m := numbered.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ts, _ := strconv.ParseFloat(m[2], 64)
		late := wOut.at[i].Sub(time.Unix(0, int64(ts*1e9)))
		if m[1] == "1" {
			t.Logf("line 1 reached the terminal %s after its printing", late)
			if late > time.Second {
				t.Errorf("line 1 came %s after its printing; want within 1 s", late)
			}
		}
	}
	var want []string
	for i := 1; i <= 30; i++ {
		want = append(want, "line "+strconv.Itoa(i)+" ")
		if i == 3 {
			want = append(want, `red \x1b[31mX\x1b[0m title \x1b]0;pwned\x07 bad \xff\xfe`+"\n")
		}
	}
	if len(live) != len(want) {
		t.Fatalf("watch printed %d lines before the result; want %d:\n%s", len(live), len(want), strings.Join(live, ""))
	}
	for i, w := range want {
		if !strings.HasPrefix(live[i], w) {
			t.Errorf("line %d: %q; want it to start %q", i+1, live[i], w)
		}
	}
	var res guard.Result
	if err := json.Unmarshal([]byte(resultJSON.String()), &res); err != nil || !res.OK || !bytes.Contains(res.Stdout, []byte("line 30 at")) {
		t.Fatalf("watch's result %q: %v", resultJSON.String(), err)
	}
	if got := strings.Join(wErr.lines, ""); got != `warn \x1b[2J`+"\n" {
		t.Errorf("watch's stderr %q; want the code's stderr, escaped", got)
	}
	for what, lines := range map[string][]string{"watch stdout": wOut.lines, "watch stderr": wErr.lines, "follow stdout": fOut.lines, "follow stderr": fErr.lines} {
		for _, l := range lines {
			if strings.ContainsAny(l, "\x1b\x07\r") || !utf8Valid(l) {
				t.Errorf("%s: a raw control byte or invalid UTF-8 reached the terminal: %q", what, l)
			}
		}
	}
	// result --follow: stdout is the result alone; the output went to stderr.
	var followed guard.Result
	if err := json.Unmarshal([]byte(strings.Join(fOut.lines, "")), &followed); err != nil || !bytes.Equal(followed.Stdout, res.Stdout) {
		t.Errorf("result --follow's stdout is not the result alone: %v\n%s", err, strings.Join(fOut.lines, ""))
	}
	if got := strings.Join(fErr.lines, ""); !strings.Contains(got, "line 30 at") || !strings.Contains(got, `warn \x1b[2J`) {
		t.Errorf("result --follow's stderr %q; want the output", got)
	}

	// A 200 MiB flood: the watcher reads within the caps, counting what it missed.
	flood := "import sys\nb = b'y' * 65536\nfor _ in range(3200):\n    sys.stdout.buffer.write(b)\nsys.stdout.flush()\nimport time\ntime.sleep(1.5)  # still running: the watcher reads the flood's tail\n"
	s.mustJSON(&started, "run", "--code", flood, "--timeout", "60s")
	waitPending(t, s, started.WorkflowID)
	watch, wOut, wErr = startStarter(t, s, "watch", started.WorkflowID)
	time.Sleep(300 * time.Millisecond)
	approveRun(t, s, started)
	finish(t, watch, 90*time.Second, wOut, wErr)
	out := strings.Join(wOut.lines, "")
	skips := regexp.MustCompile("\x1e\\[starter: (\\d+) bytes of the code's stdout skipped\\]\n").FindAllStringSubmatch(strings.Join(wErr.lines, ""), -1)
	if len(skips) == 0 {
		t.Fatalf("watch of the flood printed no skip on stderr: %.300q", strings.Join(wErr.lines, ""))
	}
	i := strings.Index(out, "\x1e{")
	if i < 0 || json.Unmarshal([]byte(out[i+1:]), &res) != nil || !res.StdoutTruncated {
		t.Fatalf("flood result: %.300q; want it after the record separator, truncated", out[max(i, 0):])
	}
	skipped := 0
	for _, m := range skips {
		n, _ := strconv.Atoi(m[1])
		skipped += n
	}
	if printed := strings.Count(out[:i], "y"); printed+skipped != len(res.Stdout) {
		t.Errorf("watch printed %d bytes and skipped %d; the result kept %d", printed, skipped, len(res.Stdout))
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestStarterWatchFollowsACell drives a session's cell through the binaries (worker --dev with the
// Docker backend, runc): `starter watch SESSION --cell 1`, started before the approval, prints
// the cell's lines as it prints them, escaped, then the cell's result.
func TestStarterWatchFollowsACell(t *testing.T) {
	requireDocker(t)
	workerBin, starterBin := binaries(t)
	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=e2e-watch-cell", "USER=alice", devReviewerKeyEnv(data)}
	startDevWorker(t, workerBin, env, "--data-dir", data, "--ui-port", "-1", "--backend", "docker",
		"--docker-image", testPythonImage(), "--docker-runtime", "runc")
	s := sessionCLI{starterCLI{t: t, bin: starterBin, env: env}}
	sess := s.open()
	var sub contract.CellSubmitted
	s.mustJSON(&sub, "session", "cell", sess.WorkflowID, "--code",
		"import time\nfor i in range(1, 9):\n    print('cell line %d at %.3f \\x1b[1m' % (i, time.time()), flush=True)\n    time.sleep(0.25)\n")
	watch, wOut, wErr := startStarter(t, s.starterCLI, "watch", sess.WorkflowID, "--cell", strconv.Itoa(sub.Cell))
	time.Sleep(300 * time.Millisecond)
	var decided client.Decided
	s.mustJSON(&decided, "approve", sess.WorkflowID, "--cell", strconv.Itoa(sub.Cell))
	finish(t, watch, 60*time.Second, wOut, wErr)
	var live []string
	var result strings.Builder
	for _, line := range wOut.lines {
		if r, ok := strings.CutPrefix(line, "\x1e"); ok || result.Len() > 0 {
			result.WriteString(r)
			continue
		}
		live = append(live, line)
	}
	if len(live) != 8 {
		t.Fatalf("watch --cell printed %d lines before the result; want 8:\n%s", len(live), strings.Join(live, ""))
	}
	for i, line := range live {
		if want := "cell line " + strconv.Itoa(i+1) + " at "; !strings.HasPrefix(line, want) || !strings.HasSuffix(line, ` \x1b[1m`+"\n") {
			t.Errorf("line %d: %q; want it to start %q and end with the escape, escaped", i+1, line, want)
		}
	}
	var res guard.Result
	if err := json.Unmarshal([]byte(result.String()), &res); err != nil || !bytes.Contains(res.Stdout, []byte("cell line 8 at")) {
		t.Fatalf("watch --cell's result %q: %v", result.String(), err)
	}
	s.mustJSON(&struct{}{}, "session", "close", sess.WorkflowID)
}
