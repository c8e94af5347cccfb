//go:build integration

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
)

// TestIntegrationSessionShowDiffsARetryAgainstTheCellItRetries: a cell submitted with --retries
// N is shown by session show with the diff against cell N (the denied one it retries), after its
// whole code; a cell that retries none is diffed against nothing (never against the cell before
// it, another program); a cell cannot say it retries one that succeeded.
func TestIntegrationSessionShowDiffsARetryAgainstTheCellItRetries(t *testing.T) {
	e := agenttest.Setup(t, agenttest.Options{Backend: &sessiontest.Backend{}, Policy: &guard.Policy{ApprovalTimeout: time.Hour}, TaskQueue: "retry-diff"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := e.Client.OpenSession(ctx, guard.SessionRequest{}, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := s.WorkflowID
	submit := func(args ...string) contract.CellSubmitted {
		t.Helper()
		r := binary(t, e, "", append([]string{"session", "cell", id}, args...)...)
		var sub contract.CellSubmitted
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &sub) != nil {
			t.Fatalf("session cell %v: exit %d, %s %s", args, r.code, r.stdout, r.stderr)
		}
		return sub
	}
	submit("--code", "import shutil\nshutil.rmtree('/work')\nprint('done')\n")
	if r := binary(t, e, "", "deny", id, "--cell", "1", "--reason", "do not delete /work"); r.code != 0 {
		t.Fatalf("deny --cell 1: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	submit("--code", "import os\nprint(os.listdir('/work'))\nprint('done')\n", "--retries", "1")
	r := binary(t, e, "", "session", "show", id)
	for _, want := range []string{
		"cell 2 retries cell 1 (denied",
		"-import shutil\n", "-shutil.rmtree('/work')\n", "+import os\n", "+print(os.listdir('/work'))\n",
		"cell 2 code",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session show lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Index(r.stdout, "cell 2 retries") < strings.Index(r.stdout, "cell 2 code") {
		t.Errorf("the diff comes before the cell's whole code:\n%s", r.stdout)
	}
	if r := binary(t, e, "", "approve", id, "--cell", "2", "--wait"); r.code != 0 {
		t.Fatalf("approve --cell 2: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if r := binary(t, e, "", "session", "cell", id, "--code", "print(3)", "--retries", "2"); r.code == 0 || !strings.Contains(r.stdout, guard.TypeToolUsageError) {
		t.Errorf("a cell that retries one that succeeded: exit %d, %s; want a ToolUsageError", r.code, r.stdout)
	}
	submit("--code", "print(3)\n")
	r = binary(t, e, "", "session", "show", id)
	if strings.Contains(r.stdout, "cell 3 retries") || strings.Count(r.stdout, "retries cell") != 1 {
		t.Errorf("cell 3, which retries none, is diffed against something:\n%s", r.stdout)
	}
}
