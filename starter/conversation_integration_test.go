//go:build integration

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
)

// showUntil runs `starter show ARGS` until its output holds want (visibility lists a run a
// moment after it started), and returns it.
func showUntil(t *testing.T, e *agenttest.Env, want string, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := binary(t, e, "", append([]string{"show"}, args...)...)
		if r.code == 0 && strings.Contains(r.stdout, want) {
			return r.stdout
		}
		if time.Now().After(deadline) {
			t.Fatalf("starter show %v: no %q within 20 s; exit %d\n%s\n%s", args, want, r.code, r.stdout, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A conversation's second run is shown as a diff against the first (approved, by whom), its
// third against the second (denied, with the reason); the diff's lines are escaped (an ESC the
// code holds is drawn as \x1b), and the notice says it changes nothing signed.
func TestIntegrationShowConversationDiff(t *testing.T) {
	e := agenttest.Setup(t)
	first := binary(t, e, "", "run", "--workflow-id", "conv-1", "--conversation", "task-7", "--code", "x = 1\nprint(x)\n")
	if first.code != 0 {
		t.Fatalf("starter run: %d %s", first.code, first.stderr)
	}
	out := showUntil(t, e, "this is its first run", "conv-1")
	if !strings.Contains(out, "task-7") {
		t.Errorf("show does not name the conversation:\n%s", out)
	}
	agenttest.Decide(t, e, "conv-1", true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.Client.Result(ctx, "conv-1"); err != nil {
		t.Fatal(err)
	}

	input := writeInput(t, "helper.py", "VALUE = 2\n")
	second := binary(t, e, "", "run", "--workflow-id", "conv-2", "--conversation", "task-7", "--input", "helper.py="+input,
		"--code", "import helper\nx = helper.VALUE\nprint('\x1b[2J', x)\n")
	if second.code != 0 {
		t.Fatalf("starter run: %d %s", second.code, second.stderr)
	}
	out = showUntil(t, e, "previous run, conv-1", "conv-2")
	for _, want := range []string{
		"approved by " + e.Reviewer.Principal,
		"--- previous/code\n+++ this/code\n",
		"-x = 1\n-print(x)\n+import helper\n+x = helper.VALUE\n+print('\\x1b[2J', x)\n",
		"+++ this/files/helper.py\n@@ -0,0 +1 @@\n+VALUE = 2\n",
		client.ConversationNotice,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("starter show conv-2 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("starter show wrote a raw ESC")
	}
	js := binary(t, e, "", "show", "conv-2", "--json")
	var review client.Review
	if err := json.Unmarshal([]byte(js.stdout), &review); err != nil {
		t.Fatalf("show --json: %v\n%s", err, js.stdout)
	}
	if ch := review.Changes; ch == nil || ch.Previous == nil || ch.Previous.WorkflowID != "conv-1" || ch.Previous.Decision == nil || !ch.Previous.Decision.Approve ||
		ch.Added != 4 || ch.Removed != 2 {
		t.Errorf("show --json changes %+v; want conv-1's approval, +4 -2", review.Changes)
	}

	agenttest.Decide(t, e, "conv-2", false)
	third := binary(t, e, "", "run", "--workflow-id", "conv-3", "--conversation", "task-7", "--input", "helper.py="+input,
		"--code", "import helper\nx = helper.VALUE\nprint(x)\n")
	if third.code != 0 {
		t.Fatalf("starter run: %d %s", third.code, third.stderr)
	}
	out = showUntil(t, e, "previous run, conv-2", "conv-3")
	if !strings.Contains(out, "denied by "+e.Reviewer.Principal+": not today") || !strings.Contains(out, "-print('\\x1b[2J', x)\n+print(x)\n") {
		t.Errorf("starter show conv-3 does not show conv-2's denial and the diff:\n%s", out)
	}
	// Another conversation's runs are not its previous run.
	other := binary(t, e, "", "run", "--workflow-id", "conv-other", "--conversation", "task-8", "--code", "print(1)\n")
	if other.code != 0 {
		t.Fatalf("starter run: %d %s", other.code, other.stderr)
	}
	showUntil(t, e, "this is its first run", "conv-other")
}
