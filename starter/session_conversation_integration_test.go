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

// sessionShowUntil runs `starter session show ID` until its output holds want (visibility lists
// a run a moment after it started), and returns it.
func sessionShowUntil(t *testing.T, e *agenttest.Env, id, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := binary(t, e, "", "session", "show", id)
		if r.code == 0 && strings.Contains(r.stdout, want) {
			return r.stdout
		}
		if time.Now().After(deadline) {
			t.Fatalf("starter session show %s: no %q within 30 s; exit %d\n%s\n%s", id, want, r.code, r.stdout, r.stderr)
		}
		time.Sleep(300 * time.Millisecond)
	}
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
	out := sessionShowUntil(t, e, id, "previous run, conv-run")
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
	out = sessionShowUntil(t, e, other, "conversation task-other: ")
	if !strings.Contains(out, "conversation task-other: this is its first run or session") {
		t.Errorf("a session in another conversation has something before it:\n%s", out)
	}
}
