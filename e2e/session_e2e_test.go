//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// sessionCLI drives sessions through the starter binary.
type sessionCLI struct{ starterCLI }

func (s sessionCLI) open(args ...string) client.SessionStarted {
	s.t.Helper()
	var st client.SessionStarted
	s.mustJSON(&st, append([]string{"session", "open"}, args...)...)
	if st.WorkflowID == "" {
		s.t.Fatalf("session open %v printed no session id", args)
	}
	return st
}

// cell submits code as the session's next cell, approves it and returns its result.
func (s sessionCLI) cell(id, code string, args ...string) guard.Result {
	s.t.Helper()
	var sub contract.CellSubmitted
	s.mustJSON(&sub, append([]string{"session", "cell", id, "--code", code}, args...)...)
	out, rc := s.run("approve", id, "--cell", strconv.Itoa(sub.Cell), "--wait")
	var res guard.Result
	if rc != 0 || json.Unmarshal([]byte(out), &res) != nil {
		s.t.Fatalf("approve %s --cell %d --wait: exit %d, %s", id, sub.Cell, rc, out)
	}
	return res
}

func (s sessionCLI) show(id string) client.SessionReview {
	s.t.Helper()
	var r client.SessionReview
	s.mustJSON(&r, "session", "show", id, "--json")
	return r
}

// waitEnded waits until the session has ended and returns its status.
func (s sessionCLI) waitEnded(id string, within time.Duration) client.SessionReview {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := s.show(id)
		if r.State == contract.SessionClosed || r.State == contract.SessionError {
			return r
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("session %s not ended after %s: state %s", id, within, r.State)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// sessionContainers lists the containers of a session, by the label the Docker backend puts on
// them.
func sessionContainers(t *testing.T, id string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label="+docker.LabelSession+"="+id, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// sessionLabel returns a label of a session's container.
func sessionLabel(t *testing.T, id, key string) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label="+docker.LabelSession+"="+id, "--format", "{{.Label \""+key+"\"}}").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// namespaceIDOf returns the id of the namespace default on the server at addr.
func namespaceIDOf(t *testing.T, addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tc, err := client.Dial(ctx, client.Connection{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	resp, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetNamespaceInfo().GetId()
}

// waitNoContainers waits until no container of the sessions is left.
func waitNoContainers(t *testing.T, within time.Duration, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var left []string
		for _, id := range ids {
			left = append(left, sessionContainers(t, id)...)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers of ended sessions %v still there after %s: %v", ids, within, left)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestSessionsThroughTheBinaries drives sessions as an orchestrator and a reviewer would, through
// the worker and starter binaries, a workflows worker (with Temporal) and a separate sandbox host
// with the Docker backend, under runc and runsc:
//   - state survives between cells (x = 41, then print(x + 1) prints 42);
//   - a reset of the session workflow runs no cell again: each cell calls an upstream outside the
//     sandbox through the egress proxy, and the upstream's count does not move after the reset;
//   - the sandbox host SIGKILLed mid-session ends the session with the typed SandboxLost error,
//     and a new host's reaper removes the container once the workflow has ended;
//   - the idle timeout ends a session and removes its container.
func TestSessionsThroughTheBinaries(t *testing.T) {
	requireDocker(t)
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) { sessionsThroughTheBinaries(t, rt) })
	}
}

func sessionsThroughTheBinaries(t *testing.T, runtime string) {
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "counted")
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	target := "127.0.0.1:" + port

	workerBin, starterBin := binaries(t)
	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	queue := "e2e-sessions-" + runtime
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=" + queue,
		"USER=alice", "SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")}
	common := []string{"--backend", "docker", "--docker-image", testPythonImage(), "--docker-runtime", runtime,
		"--languages", "python,sh", "--heartbeat-timeout", "3s",
		"--egress-allow", target, "--egress-private-ok", "127.0.0.0/8", "--sandbox-task-queue", queue + "-sbx"}
	startDevWorker(t, workerBin, env, append([]string{"--data-dir", data, "--ui-port", "-1", "--role", "workflows"}, common...)...)
	hostArgs := append([]string{"--role", "sandboxes", "--reviewers", filepath.Join(data, "reviewer", "allowed_signers"),
		"--host-key", filepath.Join(data, "host", "id_ed25519"), "--warm-sandboxes", "0"}, common...)
	host := startWorker(t, workerBin, env, append(hostArgs, "--reap-interval", "1h")...)
	s := sessionCLI{starterCLI{t: t, bin: starterBin, env: env}}

	// The upstream is on the sandbox's NO_PROXY list (its own loopback): the cells clear it.
	hit := "import os, urllib.request\nos.environ.pop('no_proxy', None); os.environ.pop('NO_PROXY', None)\n" +
		"urllib.request.urlopen('http://" + target + "/', timeout=20).read()\n"

	// State survives; each cell is counted outside the sandbox.
	a := s.open("--allow-host", target)
	if res := s.cell(a.WorkflowID, hit+"x = 41\n"); !res.OK {
		t.Fatalf("cell 1: %+v (stderr %s)", res, res.Stderr)
	}
	if res := s.cell(a.WorkflowID, hit+"print(x + 1)\n"); string(res.Stdout) != "42\n" {
		t.Fatalf("cell 2 printed %q (stderr %s); want 42, from cell 1's x", res.Stdout, res.Stderr)
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("the upstream counted %d cells; want 2", n)
	}

	// A reset to the session's first workflow task: the new run reopens a sandbox and gets the
	// updates again, but the decisions bind the old run id; no cell runs again.
	resetSession(t, addr, a.WorkflowID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := s.show(a.WorkflowID)
		if r.RunID != a.RunID && r.State != contract.SessionChecking && r.State != contract.SessionOpening {
			for _, c := range r.Cells {
				if c.Result != nil {
					t.Errorf("after the reset, cell %d of the new run has a result: %+v", c.Cell, c.Result)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reset run of %s not open after 30s: %+v", a.WorkflowID, r)
		}
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // room for a cell that should not run
	if n := hits.Load(); n != 2 {
		t.Fatalf("after the reset the upstream counted %d cells; want still 2: a cell ran again", n)
	}

	// The sandbox host SIGKILLed mid-session: the session ends with SandboxLost.
	b := s.open()
	if res := s.cell(b.WorkflowID, "y = 1\n"); !res.OK {
		t.Fatalf("session b, cell 1: %+v", res)
	}
	if c := sessionContainers(t, b.WorkflowID); len(c) != 1 {
		t.Fatalf("session b has containers %v; want one", c)
	}
	// Its container names the server's namespace id, by which the reapers of other servers leave it.
	if got, want := sessionLabel(t, b.WorkflowID, docker.LabelNamespaceID), namespaceIDOf(t, addr); got != want || want == "" {
		t.Errorf("session b's container has namespace id %q; want the server's %q", got, want)
	}
	if err := host.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-host.done
	ended := s.waitEnded(b.WorkflowID, 90*time.Second)
	if ended.End != contract.EndLost || !strings.Contains(ended.Error, "sandbox lost") {
		t.Fatalf("session b after its host was killed: state %s, end %q, error %q; want lost with a SandboxLost", ended.State, ended.End, ended.Error)
	}
	_, stderr := s.runErr("session", "cell", b.WorkflowID, "--code", "print(y)")
	if !strings.Contains(stderr+ended.Error, "state is gone") {
		t.Errorf("the lost session's error does not say its state is gone: %q / %q", ended.Error, stderr)
	}
	if c := sessionContainers(t, b.WorkflowID); len(c) != 1 {
		t.Fatalf("session b's container before the reaper: %v; want it still there (its host died)", c)
	}
	s.waitEnded(a.WorkflowID, 90*time.Second) // the reset run's sandbox was on the same host

	// A new host of the same deployment reaps the containers of the ended sessions.
	startWorker(t, workerBin, env, append(hostArgs, "--reap-interval", "1s")...)
	waitNoContainers(t, 60*time.Second, a.WorkflowID, b.WorkflowID)

	// A cell that writes a module Python reads as other code than drawn (a coding declaration
	// hides a line in a comment) is shown with a warning, and the session takes no next cell,
	// refused naming the file. Then the idle timeout ends the session and removes its container.
	c := s.open("--idle-timeout", "5s")
	writer := "open('helper.py', 'w').write('# coding: raw_unicode_escape\\n# \\\\u000aprint(\"HIDDEN\")\\n')\nprint('hi')\n"
	if res := s.cell(c.WorkflowID, writer); string(res.Stdout) != "hi\n" || len(res.Files) != 1 {
		t.Fatalf("session c, cell 1: %+v", res)
	}
	if out, stderr := s.runErr("session", "cell", c.WorkflowID, "--code", "import helper\n"); !strings.Contains(out+stderr, "written file helper.py line 1: coding declaration") {
		t.Errorf("the cell after one that wrote helper.py: %s %s; want refused naming helper.py", out, stderr)
	}
	if v := s.show(c.WorkflowID); len(v.Views) != 1 || len(v.Views[0].WrittenSource) != 1 {
		t.Errorf("session c's views: %+v; want cell 1 alone, warned of helper.py", v.Views)
	}
	ended = s.waitEnded(c.WorkflowID, 60*time.Second)
	if ended.End != contract.EndIdle || ended.State != contract.SessionClosed {
		t.Fatalf("session c: state %s end %q; want closed by the idle timeout", ended.State, ended.End)
	}
	waitNoContainers(t, 30*time.Second, c.WorkflowID)
}

// resetSession resets a session's latest run to its first workflow task, as an operator would.
func resetSession(t *testing.T, addr, workflowID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tc, err := client.Dial(ctx, client.Connection{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var first int64
	for _, ev := range historyEvents(t, addr, workflowID) {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			first = ev.GetEventId()
			break
		}
	}
	if first == 0 {
		t.Fatalf("no completed workflow task in %s's history", workflowID)
	}
	_, err = tc.WorkflowService().ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 "default",
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: workflowID},
		Reason:                    "e2e: a reset must run no cell again",
		WorkflowTaskFinishEventId: first,
		RequestId:                 uuid.NewString(),
	})
	if err != nil {
		t.Fatalf("reset %s: %v", workflowID, err)
	}
}
