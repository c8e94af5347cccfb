package docker

// The warm pool in a burst, against the fake engine with each start held until the test lets
// it go: a run that finds the pool empty while it starts containers takes the next one it
// starts instead of creating its own; its context ends the wait; a pool that cannot start one
// sends it to create its own; and the pool starts a few at once, not all it lacks.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// gatedPool is a backend whose pool of size warm starts containers only as gate lets them.
func gatedPool(t *testing.T, warm int) (*Backend, *fakeEngine, chan struct{}) {
	t.Helper()
	f := newFake()
	f.hang = true // a waiting container's output stays open
	gate := make(chan struct{})
	f.startGate = gate
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full", MaxSandboxes: 4, WarmSandboxes: warm})
	t.Cleanup(func() { close(gate) }) // before Close (cleanups run last first): let every start end
	return b, f, gate
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (f *fakeEngine) startsHeld() (now, most int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.startsNow, f.startsMost
}

// runsOwn is how many containers were created for a run (labelled with its workflow), not for
// the pool.
func (f *fakeEngine) runsOwn() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.created {
		if s.Labels[LabelWorkflowID] != "" {
			n++
		}
	}
	return n
}

type acquireOutcome struct {
	a   guard.Acquired
	err error
}

func acquireAsync(b *Backend, ctx context.Context) chan acquireOutcome {
	out := make(chan acquireOutcome, 1)
	go func() {
		a, err := b.Acquire(ctx, testChecked("print(1)"))
		out <- acquireOutcome{a, err}
	}()
	return out
}

func TestPoolRunWaitsForTheContainerBeingStarted(t *testing.T) {
	b, f, gate := gatedPool(t, 1)
	eventually(t, "the pool starts its container", func() bool { now, _ := f.startsHeld(); return now == 1 })

	got := acquireAsync(b, context.Background())
	// The run waits, and the pool starts one more for it; the run creates nothing of its own.
	eventually(t, "the pool starts a second container for the waiting run", func() bool { now, _ := f.startsHeld(); return now == 2 })
	time.Sleep(50 * time.Millisecond)
	if n := f.runsOwn(); n != 0 {
		t.Fatalf("the run created %d container(s) of its own beside the pool's starts", n)
	}
	select {
	case o := <-got:
		t.Fatalf("Acquire returned before any container was started: %v", o.err)
	default:
	}

	gate <- struct{}{} // one start ends: that container is the run's
	o := <-got
	if o.err != nil {
		t.Fatal(o.err)
	}
	defer o.a.Discard()
	if st := b.WarmStats(); st.Taken != 1 || st.Waited != 1 || st.Cold != 0 || f.runsOwn() != 0 {
		t.Fatalf("stats %+v, %d created for the run; want the one taken after a wait, none cold", st, f.runsOwn())
	}
	gate <- struct{}{} // the other refills the pool
	eventually(t, "the pool holds one container again", func() bool { return b.WarmStats().Idle == 1 })
}

func TestPoolWaitEndsWithTheRunsContext(t *testing.T) {
	b, f, gate := gatedPool(t, 1)
	eventually(t, "the pool starts its container", func() bool { now, _ := f.startsHeld(); return now == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	got := acquireAsync(b, ctx)
	eventually(t, "the pool starts one for the waiting run", func() bool { now, _ := f.startsHeld(); return now == 2 })
	cancel()
	select {
	case o := <-got:
		if o.err == nil {
			o.a.Discard()
			t.Fatal("Acquire with its context ended returned a container")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire still waits 10 s after its context ended")
	}
	// What the pool started is not lost: both end up waiting in it.
	gate <- struct{}{}
	gate <- struct{}{}
	eventually(t, "the pool holds both containers", func() bool { return b.WarmStats().Idle == 2 })
	if st := b.WarmStats(); st.Taken != 0 || st.Waited != 0 {
		t.Fatalf("stats %+v: nothing was taken", st)
	}
}

func TestPoolThatCannotStartSendsTheWaitingRunCold(t *testing.T) {
	b, f, gate := gatedPool(t, 1)
	eventually(t, "the pool starts its container", func() bool { now, _ := f.startsHeld(); return now == 1 })
	got := acquireAsync(b, context.Background())
	eventually(t, "the pool starts one for the waiting run", func() bool { now, _ := f.startsHeld(); return now == 2 })
	f.mu.Lock()
	f.startErr = errors.New("daemon says no")
	f.mu.Unlock()
	gate <- struct{}{}
	gate <- struct{}{}
	select {
	case o := <-got:
		if o.err != nil {
			t.Fatal(o.err)
		}
		defer o.a.Discard()
	case <-time.After(10 * time.Second):
		t.Fatal("the pool's starts failed and the waiting run still waits after 10 s")
	}
	// It created its own, as a run does when the pool is backing off.
	if st := b.WarmStats(); f.runsOwn() != 1 || st.Cold != 1 || st.Taken != 0 {
		t.Fatalf("stats %+v, %d created for the run; want one cold run with its own container", st, f.runsOwn())
	}
}

func TestPoolStartsAFewAtOnce(t *testing.T) {
	size := min(MaxWarmSandboxes, 2*warmParallel()+1)
	want := min(size, warmParallel())
	b, f, gate := gatedPool(t, size)
	eventually(t, "the pool starts containers", func() bool { now, _ := f.startsHeld(); return now == want })
	time.Sleep(50 * time.Millisecond)
	if now, most := f.startsHeld(); now != want || most != want {
		t.Fatalf("%d starts at once (at most %d); want %d, not all %d the pool lacks", now, most, want, size)
	}
	for range size {
		gate <- struct{}{}
	}
	eventually(t, "the pool fills", func() bool { return b.WarmStats().Idle == size })
	if _, most := f.startsHeld(); most != want {
		t.Fatalf("at most %d starts at once; want %d", most, want)
	}
}
