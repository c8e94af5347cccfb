//go:build integration

package e2e

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// TestLateResultThroughACutConnection: the real worker binaries, runc. The sandbox host reaches
// Temporal through a proxy that the test cuts, while the approved code runs, for longer than the
// heartbeat timeout: the server times the sandbox activity out, the host goes on (its container
// lives), and once it reaches the server again it delivers the result with its receipt. The run
// ends with the true output the code printed after the cut, marked recovered, its receipt
// verified by starter result; the code ran once. Without late results the run ended "outcome
// unknown; the approval was used".
func TestLateResultThroughACutConnection(t *testing.T) {
	e := newLateEnv(t, "e2e-late", "")
	proxy := newFaultProxy(t, e.addr)
	e.startHost(t, proxy)
	s := e.s
	var started client.Started
	s.mustJSON(&started, "run", "--timeout", "60s", "--code",
		"import time\nprint('before', flush=True)\ntime.sleep(14)\nprint('after the cut')\n")
	s.mustJSON(&struct{}{}, "approve", started.WorkflowID, "--digest", started.Digest)

	// Once the code has printed, cut the host off for longer than the heartbeat timeout.
	waitRunning(t, s, started.WorkflowID)
	time.Sleep(2 * time.Second)
	proxy.cutFor(6 * time.Second)

	var res guard.Result
	s.mustJSON(&res, "result", started.WorkflowID, "--timeout", "3m")
	if string(res.Stdout) != "before\nafter the cut\n" || !res.OK {
		t.Fatalf("result %+v (stdout %q); want the code's whole output", res, res.Stdout)
	}
	if res.Recovered == nil || res.Recovered.How != guard.RecoveredLateResult || res.Receipt == nil {
		t.Fatalf("result recovered %+v, receipt %v; want a late result with its receipt", res.Recovered, res.Receipt != nil)
	}
	t.Logf("recovered: %+v", *res.Recovered)
}

// TestLateResultAfterTheWorkerIsKilled: the real worker binaries, runc. The sandbox host's
// worker is SIGKILLed while the approved code runs; its container runs on. A worker started
// again on the host (same data dir, same host key) adopts the run from the dead worker's spool,
// reads the container's report once the code ended, signs the receipt and delivers the result
// late: the run ends with the output the code printed after the kill, marked recovered, its
// receipt verified by starter result. Without adoption the run ended "outcome unknown; the
// approval was used".
func TestLateResultAfterTheWorkerIsKilled(t *testing.T) {
	e := newLateEnv(t, "e2e-adopt", t.TempDir())
	first := e.startHost(t, nil)
	s := e.s

	var started client.Started
	s.mustJSON(&started, "run", "--timeout", "60s", "--code",
		"import time\nprint('before', flush=True)\ntime.sleep(12)\nprint('after the kill')\n")
	s.mustJSON(&struct{}{}, "approve", started.WorkflowID, "--digest", started.Digest)
	waitRunning(t, s, started.WorkflowID)
	time.Sleep(2 * time.Second)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	time.Sleep(3 * time.Second) // the server times the attempt out: no worker heartbeats it
	second := e.startHost(t, nil)

	var res guard.Result
	s.mustJSON(&res, "result", started.WorkflowID, "--timeout", "3m")
	if string(res.Stdout) != "before\nafter the kill\n" || !res.OK {
		t.Fatalf("result %+v (stdout %q); want the code's whole output\nsecond worker:\n%s", res, res.Stdout, second.output())
	}
	if res.Recovered == nil || res.Recovered.How != guard.RecoveredLateResult || res.Receipt == nil {
		t.Fatalf("result recovered %+v, receipt %v; want a late result with its receipt", res.Recovered, res.Receipt != nil)
	}
	if out := second.output(); !strings.Contains(out, `"adopted":true`) && !strings.Contains(out, "adopted=true") {
		t.Errorf("the second worker logged no adopted late result:\n%s", out)
	}
	t.Logf("recovered: %+v", *res.Recovered)
}

// waitRunning waits until the run id is running (approved, its code sent).
func waitRunning(t *testing.T, s starterCLI, id string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var st struct {
			State string `json:"state"`
		}
		s.mustJSON(&st, "show", id, "--json")
		if st.State == contract.StatusRunning {
			return
		}
		if time.Now().After(deadline) || st.State != contract.StatusAwaitingApproval {
			t.Fatalf("the run is %s, not running", st.State)
		}
	}
}

// TestCellLateResultThroughACutConnection: the real worker binaries, runc. The session's host
// reaches Temporal through a proxy the test cuts, while an approved cell runs, for longer than
// the heartbeat timeout: the server times the cell's activity (and the session's hold) out, the
// host runs the cell on and, once it reaches the server again, delivers the cell's result with
// its receipt. The cell ends with the output it printed after the cut, marked recovered, and
// the session goes on in the same sandbox. Before, the session ended SandboxLost.
func TestCellLateResultThroughACutConnection(t *testing.T) {
	e := newLateEnv(t, "e2e-cell-late", "")
	proxy := newFaultProxy(t, e.addr)
	e.startHost(t, proxy)
	s := sessionCLI{e.s}
	sess := s.open()
	var sub contract.CellSubmitted
	s.mustJSON(&sub, "session", "cell", sess.WorkflowID, "--code",
		"import time\nx = 41\nprint('before', flush=True)\ntime.sleep(12)\nprint('after the cut')\n")
	s.mustJSON(&struct{}{}, "approve", sess.WorkflowID, "--cell", strconv.Itoa(sub.Cell))
	for deadline := time.Now().Add(time.Minute); s.show(sess.WorkflowID).Cells[0].State != contract.StatusRunning; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("cell 1 never ran")
		}
	}
	time.Sleep(2 * time.Second)
	proxy.cutFor(6 * time.Second)

	var cell contract.CellStatus
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		r := s.show(sess.WorkflowID)
		if cell = r.Cells[0]; cell.State != contract.StatusRunning || r.State == contract.SessionError || time.Now().After(deadline) {
			break
		}
	}
	if res := cell.Result; res == nil || string(res.Stdout) != "before\nafter the cut\n" || !res.OK || res.Recovered == nil || res.Receipt == nil {
		t.Fatalf("cell 1: %s, %s, result %+v; want its whole output, recovered, with its receipt", cell.State, cell.Error, res)
	}
	if next := s.cell(sess.WorkflowID, "print(x + 1)"); string(next.Stdout) != "42\n" {
		t.Errorf("cell 2 printed %q; want 42, in the same sandbox", next.Stdout)
	}
	s.mustJSON(&struct{}{}, "session", "close", sess.WorkflowID)
}

// TestSessionSurvivesItsWorkerKilled: the real worker binaries, runc. The session's host worker
// is SIGKILLed while an approved cell runs; the session's container runs on, its interpreter's
// state with it. A worker started again on the host (same data dir, same host key) takes the
// sandbox over from the dead worker's spool: it reads the cell's report from the container's
// start once the cell ended, signs the receipt and delivers the cell's result late, and polls
// the dead worker's host task queue, where the session's next hold and cells come. The cell ends
// with the output it printed after the kill, marked recovered, and the next cell sees the state
// the cells before it left. Before, the session ended SandboxLost.
func TestSessionSurvivesItsWorkerKilled(t *testing.T) {
	e := newLateEnv(t, "e2e-session-adopt", t.TempDir())
	first := e.startHost(t, nil)
	s := sessionCLI{e.s}
	sess := s.open()
	if got := s.cell(sess.WorkflowID, "x = 41"); !got.OK {
		t.Fatalf("cell 1: %+v", got)
	}
	var sub contract.CellSubmitted
	s.mustJSON(&sub, "session", "cell", sess.WorkflowID, "--code",
		"import time\nprint('before', flush=True)\ntime.sleep(10)\nprint('after the kill', x + 1)\n")
	s.mustJSON(&struct{}{}, "approve", sess.WorkflowID, "--cell", strconv.Itoa(sub.Cell))
	for deadline := time.Now().Add(time.Minute); s.show(sess.WorkflowID).Cells[1].State != contract.StatusRunning; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("cell 2 never ran")
		}
	}
	time.Sleep(2 * time.Second)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	time.Sleep(3 * time.Second) // the server times the cell and the hold out: no worker heartbeats them
	second := e.startHost(t, nil)

	var cell contract.CellStatus
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		r := s.show(sess.WorkflowID)
		if cell = r.Cells[1]; cell.State != contract.StatusRunning || r.State == contract.SessionError || time.Now().After(deadline) {
			break
		}
	}
	if res := cell.Result; res == nil || string(res.Stdout) != "before\nafter the kill 42\n" || !res.OK || res.Recovered == nil || res.Receipt == nil {
		t.Fatalf("cell 2: %s, %s, result %+v; want its whole output, recovered, with its receipt\nsecond worker:\n%s", cell.State, cell.Error, res, second.output())
	}
	if next := s.cell(sess.WorkflowID, "print(x)"); string(next.Stdout) != "41\n" {
		t.Errorf("cell 3 printed %q; want 41, in the same sandbox\nsecond worker:\n%s", next.Stdout, second.output())
	}
	if out := second.output(); !strings.Contains(out, "session.adopted") {
		t.Errorf("the second worker logged no session.adopted event:\n%s", out)
	}
	s.mustJSON(&struct{}{}, "session", "close", sess.WorkflowID)
}

// lateEnv is the production split of the late-result tests: a worker --dev that runs the
// workflows only, and a sandbox host (runc, a 2 s heartbeat timeout, a 2 min late-result wait,
// its receipts signed with the dev host key) that reaches Temporal directly, or through a fault
// proxy the test cuts.
type lateEnv struct {
	s         starterCLI
	workerBin string
	// env is the starters' and workers' environment; host the sandbox host's arguments.
	env, host []string
	addr      string
}

// newLateEnv starts the workflow worker of task queue queue and returns the env to start a host
// in (startHost); hostData is the host's data dir ("" for the default).
func newLateEnv(t *testing.T, queue, hostData string) *lateEnv {
	t.Helper()
	requireDocker(t)
	workerBin, starterBin := binaries(t)
	data := t.TempDir()
	e := &lateEnv{workerBin: workerBin, addr: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	e.env = []string{"TEMPORAL_ADDRESS=" + e.addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=" + queue,
		"USER=alice", "SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")}
	common := []string{"--backend", "docker", "--docker-image", testPythonImage(), "--docker-runtime", "runc",
		"--heartbeat-timeout", "2s", "--late-result-wait", "2m", "--sandbox-task-queue", queue + "-sbx"}
	startDevWorker(t, workerBin, e.env, append([]string{"--data-dir", data, "--ui-port", "-1", "--role", "workflows"}, common...)...)
	e.host = append([]string{"--role", "sandboxes", "--reviewers", filepath.Join(data, "reviewer", "allowed_signers"),
		"--host-key", filepath.Join(data, "host", "id_ed25519"), "--warm-sandboxes", "0"}, common...)
	if hostData != "" {
		e.host = append(e.host, "--data-dir", hostData)
	}
	e.s = starterCLI{t: t, bin: starterBin, env: e.env}
	return e
}

// startHost starts the sandbox host, reaching Temporal through proxy when it is not nil.
func (e *lateEnv) startHost(t *testing.T, proxy *faultProxy) *devWorker {
	t.Helper()
	env := e.env
	if proxy != nil {
		env = append(slices.Clone(e.env), "TEMPORAL_ADDRESS="+proxy.addr())
	}
	return startWorker(t, e.workerBin, env, e.host...)
}
