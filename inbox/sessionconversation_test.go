package inbox

import (
	"errors"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// The session page of a session in a conversation names it and shows what changed in the
// settings since the conversation's previous run (linked to its page, with how it was decided)
// or previous session, with the notice, the diff drawn as text; a diff that could not be read
// says why; a session in no conversation shows no such section and asks nothing.
func TestSessionPageShowsItsConversationDiff(t *testing.T) {
	f := newSessionFixture(t, "session-conv")
	f.threeCells()
	f.input.Request.Conversation = "task-7"
	// The request left the timeout to the policy; the check chose 45s, which the header shows.
	f.input.Request.Limits = guard.Limits{}
	f.status.Settings.Limits.Timeout = 45 * time.Second
	door := &sessionDoorFake{}
	door.set(f)
	door.changes = &client.Changes{Conversation: "task-7", Notice: client.ConversationNotice, Added: 1, Removed: 1, ChangedFiles: []string{"settings"},
		Previous: &client.PreviousRun{WorkflowID: "run-1", RunID: "r1", Started: f.start.Add(-time.Hour), State: contract.StatusSucceeded, Verified: true,
			Decision: &contract.DecisionRecord{Approve: true, Reviewer: "bob"}},
		Diff: "--- previous/settings\n+++ this/settings\n@@ -1 +1 @@\n-language: python\n+language: python, sh <script>alert(1)</script>\n"}
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	code, page := b.get("/session/session-conv")
	if code != 200 {
		t.Fatalf("session page: %d\n%s", code, page)
	}
	for _, want := range []string{
		`id="conversation-id">task-7</dd>`,
		`Previous run: <a class="mono" href="/run/run-1">run-1</a>`,
		`<strong id="conversation-outcome">approved by bob</strong>. 1 line(s) added, 1 removed.`,
		`<span class="u-del">-language: python</span>`,
		`<span class="u-add">&#43;language: python, sh &lt;script&gt;alert(1)&lt;/script&gt;</span>`,
		`id="conversation-notice">` + html.EscapeString(client.ConversationNotice),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("session page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>alert") {
		t.Error("the diff's markup reaches the page")
	}
	if i, j := strings.Index(page, `id="conversation"`), strings.Index(page, `id="cell-1"`); i < 0 || i > j {
		t.Errorf("the conversation's section (at %d) is not before the first cell (at %d)", i, j)
	}
	if len(door.changesAsked) != 1 || door.changesAsked[0].Conversation != "task-7" {
		t.Errorf("changes asked for %+v; want the start input's request, conversation task-7", door.changesAsked)
	} else if got := door.changesAsked[0].Limits.Timeout; got != 45*time.Second {
		t.Errorf("changes asked with timeout %v; want the checked 45s the header shows, not the request's", got)
	}

	door.changes = &client.Changes{Conversation: "task-7", Notice: client.ConversationNotice,
		Previous: &client.PreviousRun{WorkflowID: "session-0", RunID: "s0", Session: true, State: contract.SessionClosed}}
	if _, page := b.get("/session/session-conv"); !strings.Contains(page, `Previous session: <a class="mono" href="/session/session-0">session-0</a>`) ||
		!strings.Contains(page, "Nothing changed: the same files and settings") {
		t.Errorf("session page with a previous session and nothing changed:\n%s", section(page))
	}
	door.changes, door.changesErr = nil, errors.New("list failed")
	if _, page := b.get("/session/session-conv"); !strings.Contains(page, "What changed could not be read: list failed") {
		t.Errorf("session page whose diff could not be read:\n%s", section(page))
	}

	f.input.Request.Conversation = ""
	door.set(f)
	door.changesAsked = nil
	if _, page := b.get("/session/session-conv"); strings.Contains(page, `id="conversation"`) || len(door.changesAsked) != 0 {
		t.Errorf("a session in no conversation: section shown %t, asked %d time(s)", strings.Contains(page, `id="conversation"`), len(door.changesAsked))
	}
}

// section is the page's conversation section, for a failure's message.
func section(page string) string {
	i := strings.Index(page, `id="conversation"`)
	if i < 0 {
		return "(no conversation section)"
	}
	return page[i:min(len(page), i+1500)]
}
