//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/local"
)

// binaries builds bin/worker and bin/starter once for the package's tests.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func binaries(t *testing.T) (worker, starter string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "sandboxflow-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "github.com/sandboxflow/sandboxflow/worker", "github.com/sandboxflow/sandboxflow/starter")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "worker"), filepath.Join(binDir, "starter")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if tsExamples.dir != "" {
		os.RemoveAll(tsExamples.dir)
	}
	os.Exit(code)
}

// It picks below Linux's ephemeral range (32768-60999): a worker restarted on the same ports
// (TestEndToEnd) would otherwise find one taken, between the stop and the start, as the local
// port of some other test's outgoing connection.
func freePort(t *testing.T) int {
	t.Helper()
	for range 1000 {
		port := 20000 + mrand.IntN(12000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		return port
	}
	t.Fatal("no free port in 20000-31999 on 127.0.0.1")
	return 0
}

// devWorker is a `worker --dev` process.
type devWorker struct {
	cmd *exec.Cmd
	log interface {
		io.Writer
		String() string
	}
	mu   *sync.Mutex
	done chan struct{}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// startDevWorker starts `worker --dev ARGS` and waits until it polls.
// codeWritableDir is a folder outside the sandbox that the code of a root worker's local backend
// (uid local.DefaultUID) may write to, for the files tests count runs by (t.TempDir's is 0700).
func codeWritableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandboxflow-worker-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startDevWorker(t *testing.T, bin string, env []string, args ...string) *devWorker {
	t.Helper()
	// Tests run in parallel: no --dev worker takes the inbox's default port unless asked to.
	if !slices.Contains(args, "--inbox-port") {
		args = append([]string{"--inbox-port", "-1"}, args...)
	}
	return startWorker(t, bin, env, append([]string{"--dev"}, args...)...)
}

// startWorker starts `worker ARGS` and waits until it polls; it is stopped when t ends.
func startWorker(t *testing.T, bin string, env []string, args ...string) *devWorker {
	t.Helper()
	w := &devWorker{log: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	w.cmd = exec.Command(bin, args...)
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stdout = lockedWriter{w.mu, w.log}
	w.cmd.Stderr = lockedWriter{w.mu, w.log}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() { w.stop(t) })
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(w.output(), "worker running") {
		select {
		case <-w.done:
			t.Fatalf("worker %v exited before it was ready:\n%s", args, w.output())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %v not ready after 2 minutes:\n%s", args, w.output())
		}
	}
	return w
}

func (w *devWorker) output() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.log.String()
}

func (w *devWorker) stop(t *testing.T) {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
		t.Errorf("worker did not stop on SIGTERM within 30s")
	}
}

type starterCLI struct {
	t   *testing.T
	bin string
	env []string
}

func (s starterCLI) run(args ...string) (stdout string, code int) {
	s.t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), s.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("starter %v: %v", args, err)
	}
	if code != 0 {
		s.t.Logf("starter %v exited %d; stderr: %s", args, code, errb.String())
	}
	return out.String(), code
}

// runErr runs the starter and returns its stdout and stderr, whatever its exit code.
func (s starterCLI) runErr(args ...string) (stdout, stderr string) {
	s.t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), s.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run()
	return out.String(), errb.String()
}

func (s starterCLI) mustJSON(v any, args ...string) {
	s.t.Helper()
	out, code := s.run(args...)
	if code != 0 {
		s.t.Fatalf("starter %v exited %d: %s", args, code, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		s.t.Fatalf("starter %v printed %q: %v", args, out, err)
	}
}

type startedJSON struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Digest     string `json:"digest"`
}

type resultJSON struct {
	OK         bool   `json:"ok"`
	ExitCode   int    `json:"exit_code"`
	TimedOut   bool   `json:"timed_out"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMS *int64 `json:"duration_ms"`
	ApprovalID string `json:"approval_id"`
	Reviewer   string `json:"reviewer"`
	Digest     string `json:"digest"`
	Backend    string `json:"backend"`
	Files      []struct {
		Name string `json:"name"`
		Size int64  `json:"size"`
	} `json:"files"`
}

func waitPending(t *testing.T, s starterCLI, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var page struct {
			Pending []startedJSON `json:"pending"`
		}
		s.mustJSON(&page, "pending", "--json", "--page-size", "1000")
		pending := page.Pending
		for _, p := range pending {
			if p.WorkflowID == id {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never listed by starter pending (got %+v)", id, pending)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestEndToEnd drives the two binaries as a person would: worker --dev with the local backend,
// then starter run, pending, show, approve, result; a restart with a run still waiting; deny.
func TestEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	workerBin, starterBin := binaries(t)
	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	uiPort := freePort(t)
	// worker --dev makes the reviewer key for $USER in the data dir; the starter signs with it.
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=e2e",
		"USER=alice", "SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")}
	args := []string{"--data-dir", data, "--ui-port", strconv.Itoa(uiPort), "--backend", "local", "--allow-unsafe-local"}
	w := startDevWorker(t, workerBin, env, args...)
	s := starterCLI{t: t, bin: starterBin, env: env}

	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(uiPort) + "/")
	if err != nil {
		t.Fatalf("Web UI: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Web UI answered %d; want 200", resp.StatusCode)
	}

	code := "import sys\nprint('hello', sys.argv[0] != '')\nopen('out.txt', 'w').write('made')\n"
	var started startedJSON
	s.mustJSON(&started, "run", "--code", code)
	if !strings.HasPrefix(started.WorkflowID, "sandbox-") || started.RunID == "" || !strings.HasPrefix(started.Digest, "sha256:") {
		t.Fatalf("starter run printed %+v", started)
	}
	waitPending(t, s, started.WorkflowID)

	var show struct {
		WorkflowID string `json:"workflow_id"`
		State      string `json:"state"`
		Request    struct {
			Code     string `json:"code"`
			Digest   string `json:"digest"`
			Language string `json:"language"`
		} `json:"request"`
	}
	s.mustJSON(&show, "show", started.WorkflowID, "--json")
	if show.State != "awaiting_approval" || show.Request.Code != code || show.Request.Digest != started.Digest || show.Request.Language != "python" {
		t.Fatalf("starter show --json printed %+v", show)
	}
	// For a person: the code with line numbers, the limits in units, the digest, the deadline;
	// pending as a table naming the run.
	text, rc := s.run("show", started.WorkflowID)
	for _, want := range []string{"2 | print('hello', sys.argv[0] != '')", "timeout", "30s", "512 KiB", "digest", started.Digest, "deadline", "left)"} {
		if rc != 0 || !strings.Contains(text, want) {
			t.Fatalf("starter show (exit %d) printed %q; want it to contain %q", rc, text, want)
		}
	}
	if text, rc := s.run("pending"); rc != 0 || !strings.Contains(text, "WORKFLOW ID") || !strings.Contains(text, started.WorkflowID) {
		t.Fatalf("starter pending (exit %d) printed %q; want a table naming %s", rc, text, started.WorkflowID)
	}

	if _, code := s.run("approve", started.WorkflowID, "--digest", "sha256:"+strings.Repeat("0", 64)); code == 0 {
		t.Fatalf("approve with a wrong digest exited 0")
	}
	var decided struct {
		State    string `json:"state"`
		Reviewer string `json:"reviewer"`
	}
	s.mustJSON(&decided, "approve", started.WorkflowID, "--digest", started.Digest)
	if decided.State != "running" || decided.Reviewer != "alice" {
		t.Fatalf("approve printed %+v", decided)
	}
	var res resultJSON
	s.mustJSON(&res, "result", started.WorkflowID)
	if !res.OK || res.ExitCode != 0 || res.Stdout != "hello True\n" || res.Reviewer != "alice" || res.Digest != started.Digest ||
		res.Backend != "local" || res.ApprovalID == "" || res.DurationMS == nil || len(res.Files) != 1 || res.Files[0].Name != "out.txt" {
		t.Fatalf("result printed %+v", res)
	}
	if _, code := s.run("approve", started.WorkflowID, "--digest", started.Digest); code == 0 {
		t.Fatalf("a second approval after the run exited 0")
	}

	// Approved code that goes for the development reviewer key, to sign approvals of its own: a
	// root worker runs it as uid 65534, which can neither read the key nor add to the reviewers
	// file; a worker that is not root says on every run that it could.
	key, signers := filepath.Join(data, "reviewer", "id_ed25519"), filepath.Join(data, "reviewer", "allowed_signers")
	thief := fmt.Sprintf(`import os
for name, f in (("key", lambda: open(%q, "rb").read()), ("signers", lambda: open(%q, "a").write("mallory ssh-ed25519 AAAA\n"))):
    try:
        f()
        print(name, "taken")
    except OSError as e:
        print(name, "errno", e.errno)
print("uid", os.getuid())
`, key, signers)
	var thiefRun startedJSON
	s.mustJSON(&thiefRun, "run", "--code", thief)
	waitPending(t, s, thiefRun.WorkflowID)
	s.mustJSON(&decided, "approve", thiefRun.WorkflowID, "--digest", thiefRun.Digest)
	s.mustJSON(&res, "result", thiefRun.WorkflowID)
	if os.Geteuid() == 0 {
		if res.Stdout != "key errno 13\nsigners errno 13\nuid 65534\n" {
			t.Fatalf("the code went for the reviewer key and printed %q; want both refused (EACCES) as uid 65534", res.Stdout)
		}
	} else if !strings.Contains(w.output(), local.SameUserWarning) {
		t.Fatalf("worker not root: its log lacks the warning that the code can read the reviewer key:\n%s", w.output())
	}

	// A run that waits across a restart of the worker (and of its embedded server) is approved
	// afterwards and runs once.
	marker := filepath.Join(codeWritableDir(t), "ran.txt")
	once := fmt.Sprintf("open(%q, 'a').write('ran\\n')\nprint('after restart')\n", marker)
	var waiting startedJSON
	s.mustJSON(&waiting, "run", "--code", once)
	waitPending(t, s, waiting.WorkflowID)
	w.stop(t)
	startDevWorker(t, workerBin, env, args...)
	waitPending(t, s, waiting.WorkflowID)
	// approve --wait prints one document, the result.
	awOut, awCode := s.run("approve", waiting.WorkflowID, "--digest", waiting.Digest, "--wait")
	if awCode != 0 || json.Unmarshal([]byte(awOut), &res) != nil || !res.OK || res.Stdout != "after restart\n" || res.Digest != waiting.Digest {
		t.Fatalf("approve --wait after restart: exit %d, %s", awCode, awOut)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "ran\n" {
		t.Fatalf("the approved code ran %q times (err %v); want exactly once", b, err)
	}

	// Deny: result prints the typed error and exits 1.
	var denied startedJSON
	s.mustJSON(&denied, "run", "--code", "print('never')")
	if _, code := s.run("deny", denied.WorkflowID, "--reason", "not today"); code != 0 {
		t.Fatalf("deny exited %d", code)
	}
	out, code2 := s.run("result", denied.WorkflowID)
	var errOut struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if code2 != 1 || json.Unmarshal([]byte(out), &errOut) != nil || errOut.Error.Type != "ApprovalDenied" || !strings.Contains(errOut.Error.Message, "not today") {
		t.Fatalf("result of a denied run: exit %d, %q", code2, out)
	}

	// A bad request fails at once with its typed error.
	out, code2 = s.run("run", "--code", "print(1)", "--env", "LD_PRELOAD=/x.so")
	if code2 != 1 || !strings.Contains(out, `"type":"ToolUsageError"`) {
		t.Fatalf("bad request: exit %d, %q", code2, out)
	}
}

func TestDoctorFailsWithoutTemporal(t *testing.T) {
	workerBin, _ := binaries(t)
	cmd := exec.Command(workerBin, "doctor", "--backend", "local", "--allow-unsafe-local")
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS=127.0.0.1:"+strconv.Itoa(freePort(t)))
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() == 0 {
		t.Fatalf("doctor exited %v; want non-zero\n%s", err, out)
	}
	var failLine string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "FAIL temporal") {
			failLine = sc.Text()
		}
	}
	if !strings.Contains(failLine, "cannot reach Temporal at 127.0.0.1:") {
		t.Fatalf("doctor printed no clear FAIL line for Temporal:\n%s", out)
	}
	if !strings.Contains(string(out), "PASS backend local") {
		t.Fatalf("doctor did not check the backend:\n%s", out)
	}
}
