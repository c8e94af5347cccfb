//go:build integration

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// countLines prints a numbered line every 100 ms for a minute.
const countLines = "import time\nfor i in range(1, 601):\n    print(f'line {i}', flush=True)\n    time.sleep(0.1)\n"

// cancelEnv is a server and a worker with the real Docker backend (runc, the test image), whose
// containers carry a deployment label of this test's own.
func cancelEnv(t *testing.T) (*agenttest.Env, string) {
	t.Helper()
	img := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE")
	if img == "" {
		img = "sandboxflow-test-python:bookworm-full"
	}
	deployment := "starter-cancel-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")
	b, err := docker.New(docker.Config{Image: img, Runtime: "runc", Deployment: deployment})
	if err != nil {
		need.Missing(t, need.Docker, fmt.Errorf("docker backend: %w", err))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Close(ctx)
	})
	return agenttest.Setup(t, agenttest.Options{Backend: b, Policy: &guard.Policy{ApprovalTimeout: time.Hour}}), deployment
}

// containers lists the ids of every container, running or not, with the label.
func containers(t *testing.T, label string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "-q", "--filter", "label="+label).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// TestIntegrationStarterCancelMidRun: `starter cancel` on a run whose code prints a line every
// 100 ms ends it within 3 s, with the lines printed so far, outcome and SandboxStatus cancelled,
// who asked and why; its container is gone (docker ps -a, by the run's and the test's labels).
func TestIntegrationStarterCancelMidRun(t *testing.T) {
	e, deployment := cancelEnv(t)
	r := binary(t, e, "", "run", "--code", countLines, "--timeout", "90s")
	if r.code != 0 {
		t.Fatalf("run: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	var started client.Started
	if err := json.Unmarshal([]byte(r.stdout), &started); err != nil {
		t.Fatal(err)
	}
	id := started.WorkflowID
	agenttest.Decide(t, e, id, true)
	byRun := docker.LabelWorkflowID + "=" + id
	for deadline := time.Now().Add(30 * time.Second); len(containers(t, byRun)) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no container for the run within 30 s of the approval")
		}
	}
	time.Sleep(1500 * time.Millisecond) // a dozen lines

	begin := time.Now()
	r = binary(t, e, "", "cancel", id, "--reason", "wrong data set", "--by", "ops-carol", "--wait")
	took := time.Since(begin)
	if r.code != 0 {
		t.Fatalf("cancel: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	// cancel --wait prints one document: the result, whose "cancelled" names who cancelled it.
	var res guard.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("cancel --wait output %q: %v", r.stdout, err)
	}
	t.Logf("starter cancel --wait took %s; %d bytes of output", took, len(res.Stdout))
	if took > 3*time.Second {
		t.Errorf("starter cancel --wait took %s; want the run ended within 3 s", took)
	}
	if res.Outcome != guard.OutcomeCancelled || res.OK || res.ExitCode != -1 || res.Cancelled == nil ||
		res.Cancelled.By != "ops-carol" || res.Cancelled.Reason != "wrong data set" {
		t.Errorf("result outcome %v ok=%t exit %d cancelled %+v; want cancelled by ops-carol for the reason", res.Outcome, res.OK, res.ExitCode, res.Cancelled)
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) < 5 || lines[0] != "line 1" || strings.Contains(string(res.Stdout), "line 600") {
		t.Errorf("stdout %q; want the lines printed before the cancel, from line 1", res.Stdout)
	}
	for i, l := range lines {
		if want := "line " + strconv.Itoa(i+1); l != want && i < len(lines)-1 {
			t.Errorf("stdout line %d is %q; want %q", i+1, l, want)
			break
		}
	}
	if left := containers(t, byRun); len(left) != 0 {
		t.Errorf("containers of the run left after its result: %v", left)
	}
	if left := containers(t, docker.LabelDeployment+"="+deployment); len(left) != 0 {
		t.Errorf("containers of this test's deployment left: %v", left)
	}
	// `starter result` reads the same result later; the status and the search attribute say
	// cancelled.
	r = binary(t, e, "", "result", id)
	var again guard.Result
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &again) != nil || again.Outcome != guard.OutcomeCancelled || again.Cancelled == nil {
		t.Errorf("result: exit %d, %s; want the cancelled result", r.code, r.stdout)
	}
	st, err := e.Client.Status(context.Background(), id)
	if err != nil || st.State != contract.StatusCancelled || st.Cancel == nil || st.Cancel.By != "ops-carol" {
		t.Errorf("status %+v, %v; want cancelled by ops-carol", st, err)
	}
	r = binary(t, e, "", "cancel", id)
	if r.code != 1 || errorType(t, r.stdout) != client.TypeCancelRefused {
		t.Errorf("second cancel: exit %d, %s; want 1 and a CancelRefused", r.code, r.stdout)
	}
}

// TestIntegrationCancelWaitingRunRunsNothing: an orchestrator (a Go client that names no
// reviewer) cancels its own waiting run: the run ends Cancelled with nothing run, and the
// reviewer's approval that comes after it is refused.
func TestIntegrationCancelWaitingRunRunsNothing(t *testing.T) {
	e, deployment := cancelEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	orchestrator, err := client.New(client.Options{Temporal: e.Temporal, TaskQueue: e.TaskQueue, Canceller: "agent-7"})
	if err != nil {
		t.Fatal(err)
	}
	started, err := orchestrator.Start(ctx, guard.Request{Code: "print('MUST NOT RUN')"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := orchestrator.Cancel(ctx, client.Run(started.WorkflowID), "the user changed their mind")
	if err != nil || answer.State != contract.StatusAwaitingApproval || answer.By != "agent-7" {
		t.Fatalf("cancel = %+v, %v; want accepted while awaiting approval, by agent-7", answer, err)
	}
	_, err = orchestrator.Result(ctx, started.WorkflowID)
	var c *guard.Cancelled
	if !errors.As(err, &c) || c.By != "agent-7" || c.Reason != "the user changed their mind" {
		t.Fatalf("result error = %v; want Cancelled by agent-7", err)
	}
	if _, err := e.Client.Approve(ctx, client.Run(started.WorkflowID), started.Digest, e.Reviewer.Signer, ""); err == nil {
		t.Error("an approval after the cancel was accepted")
	}
	r := binary(t, e, "", "result", started.WorkflowID)
	if r.code != 1 || errorType(t, r.stdout) != guard.TypeCancelled || !strings.Contains(r.stdout, `"by":"agent-7"`) {
		t.Errorf("starter result: exit %d, %s; want 1 and a Cancelled error by agent-7", r.code, r.stdout)
	}
	if left := containers(t, docker.LabelDeployment+"="+deployment); len(left) != 0 {
		t.Errorf("containers made for a run that never ran: %v", left)
	}
}

// TestIntegrationCancelRacingApprovalRunsAtMostOnce sends a reviewer's approval and a cancel at
// the same moment, ten times, on a real server (local backend): each run either ends Cancelled
// with its code never started (no mark), or ends with a result: cancelled (its interpreter
// started, the code ran at most once) or finished (once). A cancel never makes code run twice, nor
// at all when it wins before the sandbox took the run.
func TestIntegrationCancelRacingApprovalRunsAtMostOnce(t *testing.T) {
	e := agenttest.Setup(t, agenttest.Options{NoStarter: true})
	// A bound for ten runs on a loaded machine, not a target: each run's time is the server's
	// and the local backend's, which vary from machine to machine.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var cancelledFirst, ran int
	for i := range 10 {
		mark := dir + "/mark-" + strconv.Itoa(i)
		code := "import time\nopen(" + strconv.Quote(mark) + ", 'a').write('ran\\n')\nprint('started', flush=True)\ntime.sleep(0.3)\nprint('done')\n"
		started, err := e.Client.Start(ctx, guard.Request{Code: code}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := e.Client.Status(ctx, started.WorkflowID)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := e.Client.Approve(ctx, client.Run(started.WorkflowID), st.Request.Digest, e.Reviewer.Signer, "")
			done <- err
		}()
		if _, err := e.Client.WithCanceller("racer").Cancel(ctx, client.Run(started.WorkflowID), "race"); err != nil {
			t.Errorf("run %d: cancel: %v", i, err)
		}
		<-done // the approval may be refused (the cancel came first) or accepted
		res, err := e.Client.Result(ctx, started.WorkflowID)
		marks := 0
		if b, rerr := os.ReadFile(mark); rerr == nil {
			marks = strings.Count(string(b), "\n")
		}
		var c *guard.Cancelled
		switch {
		case errors.As(err, &c):
			cancelledFirst++
			if marks != 0 {
				t.Errorf("run %d ended Cancelled (nothing ran) but its code ran %d times", i, marks)
			}
		case err == nil:
			ran++
			// A cancelled run's interpreter may have been killed before the code's first line
			// (no mark): the code may have started, never more than once.
			if marks > 1 || (res.Outcome == guard.OutcomeSucceeded && marks != 1) ||
				(res.Outcome != guard.OutcomeCancelled && res.Outcome != guard.OutcomeSucceeded) {
				t.Errorf("run %d: outcome %v with the code run %d times; want cancelled (run at most once) or succeeded (once)", i, res.Outcome, marks)
			}
			if res.Outcome == guard.OutcomeCancelled && (res.Cancelled == nil || res.Cancelled.By != "racer") {
				t.Errorf("run %d: cancelled result names %+v; want racer", i, res.Cancelled)
			}
		default:
			t.Errorf("run %d: %v", i, err)
		}
	}
	t.Logf("cancel won before the sandbox took the run %d times; %d runs ended with a result", cancelledFirst, ran)
}
