//go:build integration

package docker

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// TestDockerLongRunKeepsPoolAndReaperWorking is a long run in short: while a run holds its
// container (taken from the warm pool), the pool refills and serves another run at once, and the
// reaper, whose age threshold a long max timeout makes hours, removes a lost worker's container
// whose run has ended (asking SessionEnded) while it keeps the container of a run still open and
// the long run's own; the long run then ends with all its output.
func TestDockerLongRunKeepsPoolAndReaperWorking(t *testing.T) {
	needDocker(t)
	var mu sync.Mutex
	var asked []string
	b := warmBackend(t, "runc", 1, func(c *Config) {
		c.SessionEnded = func(_ context.Context, workflowID, runID string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, workflowID)
			return strings.HasPrefix(workflowID, "ended-"), nil
		}
	})
	waitIdle(t, b, 1)

	long := checked(t, guard.Python, "import time\nprint('long start', flush=True)\ntime.sleep(8)\nprint('long end')", nil)
	type outcome struct {
		res guard.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := b.Run(context.Background(), long)
		done <- outcome{res, err}
	}()
	// The pool gives its container to the long run and starts another.
	for deadline := time.Now().Add(30 * time.Second); b.WarmStats().Taken == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the long run took no warm container: %+v", b.WarmStats())
		}
	}
	waitIdle(t, b, 1)
	begin := time.Now()
	short := mustRun(t, b, checked(t, guard.Python, "print('short')", nil))
	if !short.OK || strings.TrimSpace(string(short.Stdout)) != "short" {
		t.Fatalf("a run beside the long one: %+v", short)
	}
	t.Logf("a run beside the long one took %s (warm pool %+v)", time.Since(begin), b.WarmStats())
	if st := b.WarmStats(); st.Taken < 2 {
		t.Errorf("the run beside the long one was not served from the pool: %+v", st)
	}

	// Two containers a lost worker left: one whose run has ended, one whose run is still open.
	ended := fakeRunContainer(t, b, "ended-"+randomHex(4))
	live := fakeRunContainer(t, b, "live-"+randomHex(4))
	n, err := b.Reap(context.Background(), time.Hour)
	if err != nil || n != 1 {
		t.Errorf("Reap = %d, %v; want the one container whose run ended", n, err)
	}
	left := containerIDs(t, b)
	if slices.Contains(left, ended) || !slices.Contains(left, live) {
		t.Errorf("after Reap: %v; want %s gone and %s kept", left, ended[:12], live[:12])
	}
	mu.Lock()
	if !slices.ContainsFunc(asked, func(w string) bool { return strings.HasPrefix(w, "ended-") }) {
		t.Errorf("the reaper asked about %v; want the ended run's workflow among them", asked)
	}
	mu.Unlock()

	select {
	case o := <-done:
		if o.err != nil || !o.res.OK || !strings.Contains(string(o.res.Stdout), "long end") {
			t.Errorf("the long run: %+v, %v; want it to end well with all its output", o.res, o.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the long run did not end")
	}
}

// fakeRunContainer creates (without starting) a container labelled as b's, for a run of
// workflowID, as a worker that was killed leaves one; the test's end removes it.
func fakeRunContainer(t *testing.T, b *Backend, workflowID string) string {
	t.Helper()
	args := []string{"create"}
	labels := b.ownLabels()
	labels[LabelWorkflowID], labels[LabelRunID], labels[LabelActivityID] = workflowID, "run-"+workflowID, "1"
	for k, v := range labels {
		args = append(args, "--label", k+"="+v)
	}
	out, err := exec.Command("docker", append(args, testPythonImage(), "true")...).Output()
	if err != nil {
		t.Fatalf("docker create: %v", err)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
	return id
}

// containerIDs lists b's containers.
func containerIDs(t *testing.T, b *Backend) []string {
	t.Helper()
	list, err := b.eng.List(context.Background(), b.ownLabels())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids
}

// TestDockerGuardedCancelKeepsTheOutput: the guard around the Docker backend, cancelled while the
// code prints a line every 100 ms, returns within seconds a result whose outcome is cancelled
// with the lines printed before, in order, and the container is gone when it returns, under
// every runtime.
func TestDockerGuardedCancelKeepsTheOutput(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		c := checked(t, guard.Python, "import time\nfor i in range(1, 600):\n    print('line', i, flush=True)\n    time.sleep(0.1)\n", nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var mu sync.Mutex
		var live strings.Builder
		ctx = guard.WithOutput(ctx, func(s guard.Stream, p []byte) {
			mu.Lock()
			defer mu.Unlock()
			if s == guard.StreamStdout {
				live.Write(p)
			}
		})
		go func() {
			for {
				mu.Lock()
				n := strings.Count(live.String(), "\n")
				mu.Unlock()
				if n >= 5 {
					cancel()
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		begin := time.Now()
		res, err := guard.New(b, testPolicy).Run(ctx, c)
		if err != nil {
			t.Fatalf("got %v; want a cancelled result", err)
		}
		if res.Outcome != guard.OutcomeCancelled || res.ExitCode != -1 {
			t.Errorf("outcome %v exit %d; want cancelled, -1", res.Outcome, res.ExitCode)
		}
		lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
		if len(lines) < 5 || lines[0] != "line 1" || lines[4] != "line 5" {
			t.Errorf("stdout %q; want the lines printed before the cancel, from line 1", res.Stdout)
		}
		if left := containersOf(t, c.Owner.WorkflowID); len(left) > 0 {
			t.Errorf("container still exists when Run returned: %+v", left)
		}
		t.Logf("%s: %d lines kept; Run took %s (start, five lines, cancel, kill and removal)", rt, len(lines), time.Since(begin))
	})
}
