//go:build integration

package activities

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// countingAcquirer is the real Docker backend, counting what the sandbox activity does with the
// containers it takes; acquired is closed once one was taken.
type countingAcquirer struct {
	*docker.Backend
	acquires, runs, discards atomic.Int32
	acquired                 chan struct{}
}

func (b *countingAcquirer) Acquire(ctx context.Context, c guard.Checked) (guard.Acquired, error) {
	a, err := b.Backend.Acquire(ctx, c)
	if err != nil {
		return nil, err
	}
	if b.acquires.Add(1) == 1 {
		close(b.acquired)
	}
	return &countedAcquired{Acquired: a, b: b}, nil
}

type countedAcquired struct {
	guard.Acquired
	b *countingAcquirer
}

func (a *countedAcquired) Run(ctx context.Context) (guard.Result, error) {
	a.b.runs.Add(1)
	return a.Acquired.Run(ctx)
}

func (a *countedAcquired) Discard() {
	a.b.discards.Add(1)
	a.Acquired.Discard()
}

// afterAcquire is a run log whose history reads wait until the backend took its container, so
// that the claim is refused with a container in hand.
type afterAcquire struct {
	*historytest.Log
	acquired <-chan struct{}
}

func (l afterAcquire) GetWorkflowHistory(ctx context.Context, workflowID, runID string, longPoll bool, filter enumspb.HistoryEventFilterType) tclient.HistoryEventIterator {
	select {
	case <-l.acquired:
	case <-time.After(20 * time.Second):
	}
	return l.Log.GetWorkflowHistory(ctx, workflowID, runID, longPoll, filter)
}

// containers lists the ids of the containers labelled label (all states).
func containers(t *testing.T, label string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--no-trunc", "--filter", "label="+label).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// The sandbox activity takes its container while it claims the approval. When the claim is
// refused (an earlier claim in the run's history was never released), the container it took from
// the warm pool runs nothing and is removed, not handed back to the pool; with a clean history the
// same host runs the code in a container it took the same way.
func TestIntegrationRefusedClaimDiscardsTheAcquiredContainer(t *testing.T) {
	need.Need(t, need.Docker)
	image := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE")
	if image == "" {
		image = "sandboxflow-test-python:bookworm-full"
	}
	label := "sandboxflow-test=activities-acquire"
	db, err := docker.New(docker.Config{Image: image, WarmSandboxes: 1, Labels: map[string]string{"sandboxflow-test": "activities-acquire"}})
	if err != nil {
		t.Fatalf("docker backend: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = db.Close(ctx)
	})
	deadline := time.Now().Add(60 * time.Second)
	for db.WarmStats().Idle < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool started no container in 60 s: %+v", db.WarmStats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	warm := containers(t, label)
	if len(warm) != 1 {
		t.Fatalf("containers before the run: %v; want the warm pool's one", warm)
	}

	b := &countingAcquirer{Backend: db, acquired: make(chan struct{})}
	sink := &MemorySink{}
	claimedFirst := historytest.Claimed(8, contract.SandboxClaim{RunID: testRunID, ActivityID: "a", Commitment: "sha256:never-released"})
	log := &historytest.Log{Events: historytest.Events{historytest.Scheduled(5, "a"), historytest.Failed(7, 5, guard.TypeIntegrationError, true),
		claimedFirst, historytest.Scheduled(11, testActivityID)}}
	a, err := New(Config{Backend: b, Sink: sink, ReviewersFile: reviewersFile(t), History: afterAcquire{Log: log, acquired: b.acquired}})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	_, err = runActivity(t, a, approved(t, c, fields(c.Digest)))
	var ar *guard.ApprovalRefused
	if !errors.As(contract.FromFailure(err), &ar) || ar.Reason != guard.RefusedAlreadyUsed {
		t.Fatalf("run: %v; want an ApprovalRefused (already_used)", err)
	}
	if b.acquires.Load() != 1 || b.runs.Load() != 0 || b.discards.Load() != 1 {
		t.Fatalf("acquired %d, ran %d, discarded %d; want one container taken, nothing run, it discarded",
			b.acquires.Load(), b.runs.Load(), b.discards.Load())
	}
	if evs := sink.Events(); len(evs) != 1 || evs[0].Type != contract.EventSandboxRefused {
		t.Errorf("events %v; want only sandbox.refused", evs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := db.WaitRemovals(ctx); err != nil {
		t.Fatal(err)
	}
	if left := containers(t, label); slices.Contains(left, warm[0]) {
		t.Errorf("the container taken for the refused claim (%s) is still there: %v", warm[0], left)
	}
	if mine := containers(t, docker.LabelWorkflowID+"="+testWorkflowID); len(mine) != 0 {
		t.Errorf("containers labelled with the run: %v; want none", mine)
	}
	if s := db.WarmStats(); s.Taken != 1 {
		t.Errorf("warm stats %+v; want the one container taken", s)
	}

	// The same host with a history where nothing used the approval runs the code.
	clean := &historytest.Log{ScheduleCaller: true}
	a2, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), History: clean})
	if err != nil {
		t.Fatal(err)
	}
	res, err := runActivity(t, a2, approved(t, c, fields(c.Digest)))
	if err != nil || string(res.Stdout) != "1\n" {
		t.Fatalf("run with a clean history: %q, %v; want 1", res.Stdout, err)
	}
	if b.acquires.Load() != 2 || b.runs.Load() != 1 || b.discards.Load() != 1 {
		t.Errorf("acquired %d, ran %d, discarded %d; want 2, 1, 1", b.acquires.Load(), b.runs.Load(), b.discards.Load())
	}
}
