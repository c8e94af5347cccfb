//go:build integration

package workflows_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// TestIntegrationLongRunLostHost: a run with an hour's timeout (under a policy whose max timeout
// is two hours) runs on a sandbox host of its own, a separate process, which is SIGKILLed while
// the code runs. The workflow worker, still up, ends the run within the heartbeat timeout (not
// the hour), once, as outcome unknown; the code ran once and nothing runs it again.
func TestIntegrationLongRunLostHost(t *testing.T) {
	it := newITest(t)
	const sandboxQueue = "sandboxflow-it-host"
	heartbeat := 2 * time.Second // integrationConfig's
	it.worker(it.queue, it.localBackend(), func(cfg *activities.Config) {
		cfg.Policy.MaxTimeout = 2 * time.Hour
		cfg.SandboxTaskQueue = sandboxQueue
	})
	mark := t.TempDir() + "/mark"

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envWorkerAddress+"="+it.ts.GetFrontendHostPort(),
		envWorkerNamespace+"="+it.ts.GetDefaultNamespace(),
		envWorkerQueue+"="+sandboxQueue,
		envWorkerPython+"="+python(t),
		envWorkerReviewers+"="+it.reviewers,
		envWorkerSandboxOnly+"=2h",
	)
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the sandbox host: %v", err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	ready := make(chan bool, 1)
	go func() {
		for s := bufio.NewScanner(stdout); s.Scan(); {
			if s.Text() == "ready" {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("sandbox host not ready; its stderr:\n%s", stderr.String())
	}

	req := guard.Request{Code: markCode, Settings: guard.Settings{Env: map[string]string{"MARK": mark, "SLEEP": "3000"}, Limits: guard.Limits{Timeout: time.Hour}}}
	const id = "it-long-lost"
	run := it.start(id, it.queue, req)
	it.waitState(id, contract.StatusAwaitingApproval)
	it.signal(id, it.signed(id, true))
	pid, err := strconv.Atoi(waitLines(t, mark, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a heartbeat or two
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill the sandbox host: %v", err)
	}
	killedAt := time.Now()
	killed = true
	_ = cmd.Wait()
	waitGone(t, pid)

	_, err = it.result(run)
	took := time.Since(killedAt)
	var ie *guard.IntegrationError
	if !errors.As(contract.FromFailure(err), &ie) || !ie.CodeMayHaveStarted || !strings.Contains(err.Error(), "outcome unknown; the approval was used") {
		t.Fatalf("result error = %v; want IntegrationError, outcome unknown", err)
	}
	t.Logf("the run ended %s after its host was killed (heartbeat timeout %s)", took, heartbeat)
	if took > heartbeat+3*time.Second {
		t.Errorf("the run ended %s after its host was killed; want within the heartbeat timeout (%s) and a moment", took, heartbeat)
	}
	it.waitVisible(id, map[string]string{contract.AttrStatus: contract.StatusError})
	time.Sleep(time.Second)
	if got := lines(t, mark); len(got) != 1 {
		t.Errorf("the code ran %d times (%v); want once", len(got), got)
	}
	scheduled, ends := countRunActivities(it.history(id))
	if scheduled != 1 || ends[enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT] != 1 {
		t.Errorf("sandbox activities: %d scheduled, ends %v; want 1, timed out", scheduled, ends)
	}
}
