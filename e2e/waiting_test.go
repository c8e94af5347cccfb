//go:build integration

package e2e

// Issue 33, "many waiting runs": 16 clients start runs at once on one dev server (worker --dev
// --backend local, as the users did) until N runs wait for approval. Every start must
// return within a bound (the test fails on the first that does not, naming it), and, when the
// count is set (make bench-waiting), a new run's start afterwards must take within 1.5× of what
// it took on the empty server.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
)

const (
	// waitingRunsEnv sets how many runs TestManyWaitingRuns starts (make bench-waiting: 10000).
	waitingRunsEnv = "SANDBOXFLOW_WAITING_RUNS"
	// defaultWaitingRuns is make test's count: enough that the dev server holds more waiting runs
	// than the 1,912 made queries slow, in a few minutes on a 2-core machine.
	defaultWaitingRuns = 2000
	// waitingClients is how many clients start runs at once, as in the issue.
	waitingClients = 16
	// waitingStartBound is the most one start may take before the test calls it hung: past
	// CheckWait (1 minute) Start must have returned, answered or not.
	waitingStartBound = 90 * time.Second
	// latencySamples is how many new runs are started, one at a time, for each latency median.
	latencySamples = 7
)

// WaitingFigures are what TestManyWaitingRuns measured.
type WaitingFigures struct {
	Runs, Clients       int
	Took                time.Duration // starting all the runs
	EmptyP50, LoadP50   time.Duration // a new run's start, on the empty server and with Runs waiting
	RSSBefore, RSSAfter int64         // the dev process's resident memory, bytes
}

func (f WaitingFigures) String() string {
	return fmt.Sprintf("%d runs waiting, started by %d clients at once in %s (%.0f starts/s); a new run's start: %s on the empty server, %s with them waiting (%.2f×); dev process RSS %d MiB before, %d MiB after",
		f.Runs, f.Clients, f.Took.Round(time.Millisecond), float64(f.Runs)/f.Took.Seconds(), f.EmptyP50.Round(100*time.Microsecond), f.LoadP50.Round(100*time.Microsecond),
		float64(f.LoadP50)/float64(f.EmptyP50), f.RSSBefore>>20, f.RSSAfter>>20)
}

func waitingRuns(t *testing.T) int {
	t.Helper()
	v := os.Getenv(waitingRunsEnv)
	if v == "" {
		return defaultWaitingRuns
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive count", waitingRunsEnv, v)
	}
	return n
}

// rss is the resident memory of process pid, from /proc.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// startLatency is the median of latencySamples starts of a new run, one after another.
func startLatency(t *testing.T, ctx context.Context, c *client.Client, prefix string) time.Duration {
	t.Helper()
	var took []time.Duration
	for i := range latencySamples {
		begin := time.Now()
		sctx, cancel := context.WithTimeout(ctx, waitingStartBound)
		_, err := c.Start(sctx, guard.Request{Code: "print(1)"}, client.StartOptions{WorkflowID: fmt.Sprintf("%s-%d", prefix, i)})
		cancel()
		if err != nil {
			t.Fatalf("start %s-%d: %v", prefix, i, err)
		}
		took = append(took, time.Since(begin))
	}
	slices.Sort(took)
	return took[len(took)/2]
}

func TestManyWaitingRuns(t *testing.T) {
	f := manyWaitingRuns(t, waitingRuns(t))
	t.Log(f)
	fmt.Println("waiting:", f)
	// The start latency is a figure, judged where it is measured alone (make bench-waiting,
	// bench-e2e: SANDBOXFLOW_WAITING_RUNS set): under make test the other packages' suites share
	// the cores and move a 20 ms median by more than half. Every start returning is judged
	// everywhere (manyWaitingRuns).
	if f.LoadP50 > f.EmptyP50*3/2 {
		msg := fmt.Sprintf("a new run's start took %s with %d runs waiting, over 1.5× the %s on the empty server", f.LoadP50, f.Runs, f.EmptyP50)
		if os.Getenv(waitingRunsEnv) != "" {
			t.Fatal(msg)
		}
		t.Log(msg + " (a figure here, judged by make bench-waiting)")
	}
}

// manyWaitingRuns starts a dev worker, measures a new run's start, has waitingClients clients
// start n runs at once (each start bounded; the first that does not return fails t, named), and
// measures again.
func manyWaitingRuns(t *testing.T, n int) WaitingFigures {
	workerBin, _ := binaries(t)
	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	w := startDevWorker(t, workerBin, []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_TASK_QUEUE=waiting"},
		"--data-dir", data, "--ui-port", "-1", "--backend", "local", "--allow-unsafe-local")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	clients := make([]*client.Client, waitingClients)
	for i := range clients {
		c, err := client.Connect(ctx, client.Connection{Address: addr}, "", "waiting")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}

	f := WaitingFigures{Runs: n, Clients: waitingClients}
	f.EmptyP50 = startLatency(t, ctx, clients[0], "empty")
	f.RSSBefore = rss(t, w.cmd.Process.Pid)

	// Each client takes the next run's number until n are started.
	var next, failed atomic.Int64
	hung := make(chan string, waitingClients)
	errs := make(chan error, waitingClients)
	var wg sync.WaitGroup
	begin := time.Now()
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n) && failed.Load() == 0; i = next.Add(1) {
				id := fmt.Sprintf("waiting-%d", i)
				done := make(chan error, 1)
				go func() {
					sctx, cancel := context.WithTimeout(ctx, waitingStartBound)
					defer cancel()
					_, err := c.Start(sctx, guard.Request{Code: "print(1)"}, client.StartOptions{WorkflowID: id})
					done <- err
				}()
				select {
				case err := <-done:
					if err != nil {
						failed.Add(1)
						errs <- fmt.Errorf("start %s: %w", id, err)
						return
					}
				case <-time.After(waitingStartBound + 10*time.Second):
					failed.Add(1)
					hung <- id
					return
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case id := <-hung:
		t.Fatalf("start of %s did not return within %s (%d runs started before)", id, waitingStartBound+10*time.Second, next.Load())
	}
	select {
	case id := <-hung:
		t.Fatalf("start of %s did not return within %s", id, waitingStartBound+10*time.Second)
	case err := <-errs:
		t.Fatalf("%v (after %s)", err, time.Since(begin))
	default:
	}
	f.Took = time.Since(begin)
	f.LoadP50 = startLatency(t, ctx, clients[0], "loaded")
	f.RSSAfter = rss(t, w.cmd.Process.Pid)
	return f
}
