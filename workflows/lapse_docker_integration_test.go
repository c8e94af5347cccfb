//go:build integration

package workflows_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// countingBackend counts the runs that reach the real backend it wraps.
type countingBackend struct {
	guard.Backend
	runs atomic.Int32
}

func (b *countingBackend) Run(ctx context.Context, c guard.Checked) (guard.Result, error) {
	b.runs.Add(1)
	return b.Backend.Run(ctx, c)
}

// The expired-in-the-queue attack against a sandbox host with the hardened Docker backend (the
// real dockerd): the statement expires while the approved activity waits in the task queue, and
// the host that starts afterwards starts no container. A second run whose statement is still
// valid runs in a container, so the count is of real runs.
func TestIntegrationStatementExpiredInTheTaskQueueStartsNoContainer(t *testing.T) {
	image := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE")
	if image == "" {
		image = "sandboxflow-test-python:bookworm-full"
	}
	db, err := docker.New(docker.Config{Image: image, Labels: map[string]string{"sandboxflow-test": "workflows-lapse"}})
	if err != nil {
		need.Missing(t, need.Docker, fmt.Errorf("docker backend: %w", err))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = db.Close(ctx)
	})
	b := &countingBackend{Backend: db}
	it := newITest(t)
	req := guard.Request{Code: "print('ran in docker')"}
	checked, err := integrationConfig(nil, nil, "").Policy.Check(req, db.Name())
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(3 * time.Second).Truncate(time.Second)
	late := it.startRogue("sandboxflow-it-expiry-docker", "it-expired-docker", holdingRogue(checked, it.queue, 0), req, checked.Digest, expires)
	sleepUntil(expires.Add(200 * time.Millisecond))
	it.worker(it.queue, b, nil) // the sandbox host starts late
	var outcome string
	if err := late.Get(it.ctx(60*time.Second), &outcome); err != nil {
		t.Fatal(err)
	}
	wantHostRefused(t, outcome, approval.ReasonExpired)
	if n := b.runs.Load(); n != 0 {
		t.Fatalf("the Docker backend ran %d times after the expired statement; want 0", n)
	}
	inTime := it.startRogue("sandboxflow-it-expiry-docker-2", "it-in-time-docker", holdingRogue(checked, it.queue, 0), req, checked.Digest, time.Now().Add(time.Hour).Truncate(time.Second))
	if err := inTime.Get(it.ctx(90*time.Second), &outcome); err != nil || outcome != "" {
		t.Fatalf("a valid statement: %q, %v; want it run", outcome, err)
	}
	if n := b.runs.Load(); n != 1 {
		t.Errorf("the Docker backend ran %d times; want 1 (the valid statement's run)", n)
	}
	if !strings.HasPrefix(db.Name(), "docker") {
		t.Errorf("backend %q; want the Docker backend", db.Name())
	}
}
