//go:build integration

package docker

// The warm pool against the real daemon, under runc and runsc: every run gets a container no
// other code ran in, the pool refills, replaces old and dead containers, empties on Close, and a
// worker that is gone leaves nothing the reaper does not take.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// poolContainers lists this suite's containers of the warm pool: waiting ones (named
// WarmNamePrefix...) and ones a run took.
func poolContainers(t *testing.T) (waiting, taken []string) {
	t.Helper()
	eng, err := newDockerEngine("")
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	list, err := eng.List(context.Background(), map[string]string{suiteLabel: suiteID})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.Labels[LabelWarm] == "" {
			continue
		}
		if strings.HasPrefix(c.Name, WarmNamePrefix) {
			waiting = append(waiting, c.ID)
		} else {
			taken = append(taken, c.ID)
		}
	}
	return waiting, taken
}

// waitIdle waits until the pool holds n waiting containers.
func waitIdle(t *testing.T, b *Backend, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for b.WarmStats().Idle != n {
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d waiting containers after 60 s; want %d (%+v)", b.WarmStats().Idle, n, b.WarmStats())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func warmBackend(t *testing.T, rt string, n int, mod func(*Config)) *Backend {
	t.Helper()
	return newTestBackend(t, rt, func(c *Config) {
		c.WarmSandboxes = n
		if mod != nil {
			mod(c)
		}
	})
}

// requireWarm fails the test unless some of b's runs were served from the warm pool.
func requireWarm(t *testing.T, b *Backend) {
	t.Helper()
	if st := b.WarmStats(); st.Taken == 0 {
		t.Errorf("no run was served from the warm pool: %+v", st)
	} else {
		t.Logf("warm pool: %+v", st)
	}
}

// A run leaves marks everywhere it can write and tries to stay; the next run, from the pool
// too, finds none of them: no container serves two runs.
func TestDockerWarmPoolEachContainerServesOneRun(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := warmBackend(t, rt, 2, nil)
		waitIdle(t, b, 2)
		waiting, _ := poolContainers(t)
		if len(waiting) != 2 {
			t.Fatalf("%d waiting containers on the daemon; want 2", len(waiting))
		}
		const leave = `import os, subprocess
for p in ("/tmp/mark", "/work/mark", "/dev/shm/mark"):
    open(p, "w").write("run 1")
subprocess.Popen(["sh", "-c", "sleep 300"], start_new_session=True)
print("left marks", flush=True)
`
		const look = `import os
seen = [p for p in ("/tmp/mark", "/work/mark", "/dev/shm/mark") if os.path.exists(p)]
procs = [open("/proc/%s/cmdline" % p, "rb").read() for p in os.listdir("/proc") if p.isdigit()]
print("marks", seen, "sleepers", sum(c.startswith(b"sleep\x00300") for c in procs))
`
		if res := mustRun(t, b, checked(t, guard.Python, leave, nil)); res.ExitCode != 0 || string(res.Stdout) != "left marks\n" {
			t.Fatalf("run 1: %+v", res)
		}
		waitIdle(t, b, 2)
		res := mustRun(t, b, checked(t, guard.Python, look, nil))
		if res.ExitCode != 0 || string(res.Stdout) != "marks [] sleepers 0\n" {
			t.Errorf("run 2 saw what run 1 left: %q %q", res.Stdout, res.Stderr)
		}
		if st := b.WarmStats(); st.Taken != 2 || st.Cold != 0 {
			t.Errorf("stats %+v; want both runs served from the pool", st)
		}
		// The containers that served runs are removed; the pool is full again with new ones.
		if err := b.WaitRemovals(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, b, 2)
		now, taken := poolContainers(t)
		if len(taken) != 0 || len(now) != 2 {
			t.Errorf("after two runs: %d taken containers left (want 0), %d waiting (want 2)", len(taken), len(now))
		}
		for _, id := range waiting {
			for _, n := range now {
				if id == n {
					t.Errorf("container %s still waits after two runs took the first two", id[:12])
				}
			}
		}
		// Close empties the pool.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if w, tk := poolContainers(t); len(w)+len(tk) != 0 {
			t.Errorf("after Close: %d waiting and %d taken containers left; want none", len(w), len(tk))
		}
	})
}

// Runs that ask for the open network never get a pooled container (it has none).
func TestDockerWarmPoolOpenNetworkRunsCold(t *testing.T) {
	b := warmBackend(t, "runc", 1, nil)
	waitIdle(t, b, 1)
	c := checked(t, guard.Python, "print(1)", func(r *guard.Request) { r.Network = true })
	if res := mustRun(t, b, c); res.ExitCode != 0 {
		t.Fatalf("run: %+v", res)
	}
	if st := b.WarmStats(); st.Taken != 0 || st.Cold != 1 || st.Idle != 1 {
		t.Errorf("stats %+v; want the run cold and the pool untouched", st)
	}
}

// A waiting container older than WarmMaxAge is replaced; one that dies while it waits is dropped,
// and the next run still gets a result, never "outcome unknown".
func TestDockerWarmPoolReplacesOldAndDead(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := warmBackend(t, rt, 2, func(c *Config) { c.WarmMaxAge = 3 * time.Second })
		waitIdle(t, b, 2)
		first, _ := poolContainers(t)
		deadline := time.Now().Add(60 * time.Second)
		for {
			now, _ := poolContainers(t)
			if len(now) == 2 && now[0] != first[0] && now[0] != first[1] && now[1] != first[0] && now[1] != first[1] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting containers %v not replaced within 60 s of %v (max age 3 s)", now, first)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if st := b.WarmStats(); st.Discarded < 2 {
			t.Errorf("stats %+v; want the two old containers discarded", st)
		}

		waitIdle(t, b, 2)
		waiting, _ := poolContainers(t)
		for _, id := range waiting {
			if err := b.eng.Kill(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		}
		// The pool notices (their output ends) and removes them. A run that took one in the
		// instant between the kill and its end could not be told apart from a container that
		// died during its run, so the test waits for that.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			now, _ := poolContainers(t)
			if !slices.ContainsFunc(now, func(id string) bool { return slices.Contains(waiting, id) }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("killed waiting containers %v still there after 30 s", waiting)
			}
		}
		for range 3 {
			res := mustRun(t, b, checked(t, guard.Python, "print('after the kill')", nil))
			if res.ExitCode != 0 || string(res.Stdout) != "after the kill\n" {
				t.Fatalf("run after the waiting containers were killed: %+v", res)
			}
		}
	})
}

// A worker that is gone leaves its waiting containers; another backend of the deployment reaps
// them once they are past WarmMaxAge + 30 s, however high its own threshold.
func TestDockerWarmPoolOrphansReaped(t *testing.T) {
	gone := warmBackend(t, "runc", 2, func(c *Config) { c.WarmMaxAge = time.Hour })
	waitIdle(t, gone, 2)
	reaper := newTestBackend(t, "runc", func(c *Config) { c.WarmMaxAge = time.Second })
	if n, err := reaper.Reap(context.Background(), time.Hour); err != nil || n != 0 {
		t.Fatalf("reap of young waiting containers: %d, %v; want 0", n, err)
	}
	time.Sleep(time.Second + warmReapSlack + 1100*time.Millisecond) // Docker records creation in whole seconds
	if n, err := reaper.Reap(context.Background(), time.Hour); err != nil || n != 2 {
		t.Errorf("reap of waiting containers past max age: %d, %v; want 2", n, err)
	}
	// The pool that lost them notices and starts new ones; a run still gets a result.
	for deadline := time.Now().Add(30 * time.Second); gone.WarmStats().Discarded < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not notice its reaped containers: %+v", gone.WarmStats())
		}
	}
	if res := mustRun(t, gone, checked(t, guard.Python, "print(2)", nil)); res.ExitCode != 0 {
		t.Errorf("run after the reap: %+v", res)
	}
}

// A run that takes a warm container does not start its replacement while it runs (a container's
// start would compete with the run for the host's CPU, on the path its reviewer waits on): the
// pool stays one short until the run ends, then refills (refillAfterRun).
func TestDockerWarmPoolRefillsAfterTheRun(t *testing.T) {
	b := warmBackend(t, "runc", 2, nil)
	waitIdle(t, b, 2)
	ctx := context.Background()
	c := checked(t, guard.Python, "import time; time.sleep(0.8); print('done')", nil)
	took := time.Now()
	a, err := b.Acquire(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if st := b.WarmStats(); st.Taken != 1 {
		t.Fatalf("the acquire took no warm container: %+v", st)
	}
	// Well before refillAfterTake, and while the run below sleeps: no container is started
	// for the pool.
	done := make(chan guard.Result, 1)
	go func() {
		res, err := a.Run(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// The taken container is renamed off the critical path: until then it still has a waiting
	// one's name, so it is left out by its id.
	takenID := a.(*acquired).SandboxID()
	for time.Since(took) < refillAfterTake-300*time.Millisecond {
		waiting, _ := poolContainers(t)
		waiting = slices.DeleteFunc(waiting, func(id string) bool { return id == takenID })
		if since := time.Since(took); len(waiting) > 1 && since < refillAfterTake-200*time.Millisecond {
			t.Fatalf("%s after the take, while its run runs, the pool started a replacement (%d waiting containers on the daemon; want 1)", since.Round(time.Millisecond), len(waiting))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res := <-done; string(res.Stdout) != "done\n" {
		t.Fatalf("run: %+v", res)
	}
	waitIdle(t, b, 2)
}

// Two runs at once on a pool of one: the second finds it empty while it starts a replacement,
// waits for that one instead of creating its own, and both run in containers of their own.
func TestDockerWarmPoolBurstWaitsForThePoolsNextContainer(t *testing.T) {
	b := warmBackend(t, "runc", 1, nil)
	waitIdle(t, b, 1)
	ctx := context.Background()
	first, err := b.Acquire(ctx, checked(t, guard.Python, "import os; print(os.getpid())", nil))
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Acquire(ctx, checked(t, guard.Python, "print('second')", nil))
	if err != nil {
		first.Discard()
		t.Fatal(err)
	}
	if st := b.WarmStats(); st.Taken != 2 || st.Waited != 1 || st.Cold != 0 {
		first.Discard()
		second.Discard()
		t.Fatalf("warm pool %+v: want both runs served by the pool, the second after a wait", st)
	}
	r1, err1 := first.Run(ctx)
	r2, err2 := second.Run(ctx)
	if err1 != nil || err2 != nil || string(r2.Stdout) != "second\n" || len(r1.Stdout) == 0 {
		t.Fatalf("runs: %q %v; %q %v", r1.Stdout, err1, r2.Stdout, err2)
	}
	waitIdle(t, b, 1)
}
