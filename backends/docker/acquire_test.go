package docker

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Acquire takes a container and runs nothing in it: Run on it sends the request, Discard removes
// it unstarted. With every sandbox slot in use it does not wait (guard.ErrAcquireLater), so that
// the wait happens when the request runs, heartbeated like the run.
func TestAcquireRunsNothingUntilRun(t *testing.T) {
	f := newFake()
	f.stdout = okResult(t, map[string]any{"stdout": []byte("1\n")})
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full", MaxSandboxes: 1})
	c := testChecked("print(1)")

	a, err := b.Acquire(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.created) != 1 || len(f.started) != 0 || len(f.stdin) != 0 {
		t.Fatalf("after Acquire: created %d, started %v, stdin %d bytes; want one container, not started, nothing sent", len(f.created), f.started, len(f.stdin))
	}
	if _, err := b.Acquire(context.Background(), c); !errors.Is(err, guard.ErrAcquireLater) || len(f.created) != 1 {
		t.Fatalf("Acquire with the one slot taken: %v, %d created; want ErrAcquireLater and no container", err, len(f.created))
	}
	res, err := a.Run(context.Background())
	if err != nil || string(res.Stdout) != "1\n" {
		t.Fatalf("Run: %q, %v; want 1", res.Stdout, err)
	}
	if _, err := a.Run(context.Background()); err == nil {
		t.Errorf("a second Run on one acquired container ran")
	}
	a.Discard() // after Run: nothing to do

	a, err = b.Acquire(context.Background(), c) // the slot is free again
	if err != nil {
		t.Fatal(err)
	}
	id := f.lastID()
	a.Discard()
	if err := b.WaitRemovals(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(context.Background()); err == nil {
		t.Errorf("Run after Discard ran")
	}
	if !slices.Contains(f.removedIDs(), id) || f.startedCount() != 1 {
		t.Errorf("removed %v, started %d; want %s removed and only the first container started", f.removedIDs(), f.startedCount(), id)
	}
	if a, err := b.Acquire(context.Background(), c); err != nil {
		t.Errorf("Acquire after a Discard: %v; want the slot given back", err)
	} else {
		a.Discard()
	}
}

func (f *fakeEngine) lastID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return "c" + string(rune('0'+f.nextID))
}

func (f *fakeEngine) startedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.started)
}
