//go:build integration

// Package sessionenv sets up what the session integration tests of the client, the starter,
// the MCP server and the TypeScript example share: agenttest's server, worker and starter with
// the real Docker backend (runc unless SANDBOXFLOW_TEST_RUNTIME names another, the test image),
// a policy offering python and sh, and the one helper through which they decide on a cell.
package sessionenv

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// Setup starts agenttest's server and worker over the Docker backend with a policy that offers
// python and sh, and builds the starter.
func Setup(t *testing.T) *agenttest.Env {
	t.Helper()
	need.Need(t, need.Docker)
	img := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE")
	if img == "" {
		img = "sandboxflow-test-python:bookworm-full"
	}
	deployment := "sessionenv-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	b, err := docker.New(docker.Config{Image: img, Runtime: os.Getenv("SANDBOXFLOW_TEST_RUNTIME"), Deployment: deployment,
		Labels: map[string]string{"test.sandboxflow.suite": "sessionenv"}})
	if err != nil {
		t.Fatalf("sessionenv: docker backend: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Close(ctx)
	})
	return agenttest.Setup(t, agenttest.Options{Backend: b,
		Policy: &guard.Policy{Languages: []string{guard.Python, guard.Shell}, ApprovalTimeout: time.Hour}})
}

// WaitCell waits until a cell of the session waits for a decision and returns its index.
func WaitCell(t *testing.T, e *agenttest.Env, sessionID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		st, err := e.Client.SessionStatus(ctx, sessionID)
		if err == nil {
			if n := client.WaitingCell(st); n != 0 {
				return n
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sessionenv: no cell of %s waits for a decision (last error %v)", sessionID, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Decide is the ONE place where these tests approve or deny a session's cell, as a reviewer
// would, through the client's reviewer door: it waits for a cell to wait, signs the statement
// CellStatementFor made for it with the worker's reviewer's key, and returns the cell's index.
func Decide(t *testing.T, e *agenttest.Env, sessionID string, approve bool) int {
	t.Helper()
	cell := WaitCell(t, e, sessionID)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if approve {
		_, err = e.Client.Approve(ctx, client.Cell(sessionID, cell), "", e.Reviewer.Signer, "")
	} else {
		_, err = e.Client.Deny(ctx, client.Cell(sessionID, cell), e.Reviewer.Signer, "not this one")
	}
	if err != nil {
		t.Fatalf("sessionenv: decide on cell %d of %s (approve=%t): %v", cell, sessionID, approve, err)
	}
	return cell
}
