package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// session show names the session's conversation and prints what changed in its settings since
// the conversation's previous run (or says it is the first, or why it could not be read), with
// the notice, after the settings and before the first cell; the diff's lines are escaped.
func TestSessionShowPrintsItsConversationDiff(t *testing.T) {
	started := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	show := func(r client.SessionReview) string {
		t.Helper()
		var b bytes.Buffer
		if err := printSessionReview(&b, r, started.Add(15*time.Minute)); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	r := hostileSession()
	r.Settings.Conversation = "task-7"
	r.Changes = &client.Changes{Conversation: "task-7", Notice: client.ConversationNotice, Added: 1, Removed: 1, ChangedFiles: []string{"settings"},
		Previous: &client.PreviousRun{WorkflowID: "run-1", RunID: "r0", Started: started, State: contract.StatusSucceeded,
			Decision: &contract.DecisionRecord{Approve: true, Reviewer: "bob"}},
		Diff: "--- previous/settings\n+++ this/settings\n@@ -1 +1 @@\n-language: python\n+language: python, sh \\x1b[2J\n"}
	out := show(r)
	for _, want := range []string{
		"task-7 (the orchestrator's label; what changed since its previous run or session is shown after the settings)",
		"conversation task-7: what changed since its previous run, run-1 (run id r0, started 2026-01-01T00:00:00Z), approved by bob:\n" +
			"1 line(s) added, 1 removed, in settings\n" + r.Changes.Diff + "NOTE: " + client.ConversationNotice + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("session show lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "NOTE: ") > strings.Index(out, "=== cell 1") {
		t.Errorf("the conversation's diff comes after the cells:\n%s", out)
	}

	r.Changes = &client.Changes{Conversation: "task-7", Notice: client.ConversationNotice,
		Previous: &client.PreviousRun{WorkflowID: "session-0", RunID: "s0", Started: started, Session: true, State: contract.SessionClosed}}
	if out := show(r); !strings.Contains(out, "since its previous session, session-0 (run id s0, started 2026-01-01T00:00:00Z), session closed:\nnothing: the same files and settings") {
		t.Errorf("session show of a session with nothing changed since the previous session:\n%s", out)
	}
	r.Changes = &client.Changes{Conversation: "task-7", Notice: client.ConversationNotice}
	if out := show(r); !strings.Contains(out, "conversation task-7: this is its first run or session") {
		t.Errorf("session show of the conversation's first:\n%s", out)
	}
	r.Changes, r.ChangesError = nil, "list failed\x1b[2J"
	if out := show(r); !strings.Contains(out, `could not be read: list failed\x1b[2J`) {
		t.Errorf("session show of a diff that could not be read:\n%s", out)
	}
	r.Settings.Conversation, r.ChangesError = "", ""
	if out := show(r); strings.Contains(out, "conversation") {
		t.Errorf("session show of a session in no conversation names one:\n%s", out)
	}
}
