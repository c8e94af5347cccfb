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
	return outputUntil(t, e, want, append([]string{"show"}, args...)...)
}

// outputUntil runs `starter ARGS` until its output holds want, for 30 s at most, and returns
// it.
func outputUntil(t *testing.T, e *agenttest.Env, want string, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := binary(t, e, "", args...)
		if r.code == 0 && strings.Contains(r.stdout, want) {
			return r.stdout
		}
		if time.Now().After(deadline) {
			t.Fatalf("starter %v: no %q within 30 s; exit %d\n%s\n%s", args, want, r.code, r.stdout, r.stderr)
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

// A run in conversation task-s, then a session in task-s: session show names the run, its
// approval, and what changed in the settings (the input file line by line, the name of the env
// var whose value changed, never the value; never the run's code, which is not the session's),
// with the notice; --json carries the same. A session in another conversation has none before it.
// The local backend runs both: no Docker.
func TestIntegrationSessionShowsConversationDiff(t *testing.T) {
	e := agenttest.Setup(t)
	data := writeInput(t, "data.csv", "a,b\n1,2\n")
	if r := binary(t, e, "", "run", "--workflow-id", "conv-run", "--conversation", "task-s", "--env", "MODE=slow-value",
		"--input", "data.csv="+data, "--code", "print(open('data.csv').read())\n"); r.code != 0 {
		t.Fatalf("starter run: %d %s", r.code, r.stderr)
	}
	agenttest.Decide(t, e, "conv-run", true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.Client.Result(ctx, "conv-run"); err != nil {
		t.Fatal(err)
	}

	open := func(conversation, data string) string {
		t.Helper()
		r := binary(t, e, "", "session", "open", "--conversation", conversation, "--env", "MODE=fast-value", "--input", "data.csv="+data)
		var opened client.SessionStarted
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &opened) != nil || opened.WorkflowID == "" {
			t.Fatalf("session open: exit %d, %s %s", r.code, r.stdout, r.stderr)
		}
		t.Cleanup(func() { binary(t, e, "", "session", "close", opened.WorkflowID) })
		return opened.WorkflowID
	}
	id := open("task-s", writeInput(t, "data.csv", "a,b\n1,3\n"))
	out := outputUntil(t, e, "previous run, conv-run", "session", "show", id)
	for _, want := range []string{
		"task-s (the orchestrator's label",
		"approved by " + e.Reviewer.Principal,
		"+++ this/files/data.csv\n@@ -1,2 +1,2 @@\n a,b\n-1,2\n+1,3\n",
		"+env values changed (not shown here): MODE\n",
		client.ConversationNotice,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("session show lacks %q:\n%s", want, out)
		}
	}
	// The settings above show the env values to the reviewer; the diff never does.
	diff := out[strings.Index(out, "conversation task-s: "):]
	if strings.Contains(diff, "previous/code") || strings.Contains(diff, "-value") {
		t.Errorf("the diff holds the run's code or an env value:\n%s", diff)
	}
	js := binary(t, e, "", "session", "show", id, "--json")
	var review client.SessionReview
	if err := json.Unmarshal([]byte(js.stdout), &review); err != nil {
		t.Fatalf("session show --json: %v\n%s", err, js.stdout)
	}
	if ch := review.Changes; ch == nil || ch.Previous == nil || ch.Previous.WorkflowID != "conv-run" || ch.Previous.Session ||
		ch.Previous.Decision == nil || !ch.Previous.Decision.Approve || review.Settings.Conversation != "task-s" {
		t.Errorf("session show --json: conversation %q, changes %+v; want conv-run's approval", review.Settings.Conversation, review.Changes)
	}

	// Visibility listed conv-run (above): a session in another conversation that still found
	// something would have found it.
	other := open("task-other", data)
	out = outputUntil(t, e, "conversation task-other: ", "session", "show", other)
	if !strings.Contains(out, "conversation task-other: this is its first run or session") {
		t.Errorf("a session in another conversation has something before it:\n%s", out)
	}
}
