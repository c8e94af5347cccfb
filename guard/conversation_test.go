package guard

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckConversation(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"", true},
		{"task-42", true},
		{"team.a:thread_7@bot", true},
		{strings.Repeat("a", MaxConversationBytes), true},
		{strings.Repeat("a", MaxConversationBytes+1), false},
		{"-leading", false},
		{"a b", false},
		{"a'b", false},  // would quote a visibility query
		{"a<b>", false}, // markup in a page or Slack
		{"a\r\nBcc: x", false},
		{"caf\u00e9", false},
		{"a\u202eb", false},
	} {
		err := CheckConversation(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("CheckConversation(%q) = %v; want ok=%t", tc.id, err, tc.ok)
		}
		if err != nil && TypeOf(err) != TypeToolUsageError {
			t.Errorf("CheckConversation(%q): %T; want a ToolUsageError", tc.id, err)
		}
	}
	// Check refuses a bad one, keeps a good one, and the digest does not depend on it.
	p := Policy{}
	if _, err := p.Check(Request{Code: "print(1)", Conversation: "x y"}, "local"); TypeOf(err) != TypeToolUsageError {
		t.Errorf("Check with a bad conversation: %v; want a ToolUsageError", err)
	}
	a, err := p.Check(Request{Code: "print(1)", Conversation: "task-1"}, "local")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Check(Request{Code: "print(1)", Conversation: "task-2"}, "local")
	if err != nil {
		t.Fatal(err)
	}
	if a.Conversation != "task-1" || a.Summary().Conversation != "task-1" || a.Digest != b.Digest {
		t.Errorf("checked conversation %q (summary %q), digests %s and %s; want task-1 and one digest", a.Conversation, a.Summary().Conversation, a.Digest, b.Digest)
	}
}

// A session's conversation is checked as a run's, carried into the checked session and its
// summary, and left out of the settings digest; with none, the checked session's JSON has no
// conversation field (as before sessions had one).
func TestCheckSessionConversation(t *testing.T) {
	p := Policy{}
	if _, err := p.CheckSession(SessionRequest{Conversation: "x y"}, "local"); TypeOf(err) != TypeToolUsageError {
		t.Errorf("CheckSession with a bad conversation: %v; want a ToolUsageError", err)
	}
	a, err := p.CheckSession(SessionRequest{Conversation: "task-1"}, "local")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.CheckSession(SessionRequest{Conversation: "task-2"}, "local")
	if err != nil {
		t.Fatal(err)
	}
	none, err := p.CheckSession(SessionRequest{}, "local")
	if err != nil {
		t.Fatal(err)
	}
	if a.Conversation != "task-1" || a.Summary().Conversation != "task-1" || a.Digest != b.Digest || a.Digest != none.Digest {
		t.Errorf("checked conversation %q (summary %q), digests %s, %s and %s; want task-1 and one digest",
			a.Conversation, a.Summary().Conversation, a.Digest, b.Digest, none.Digest)
	}
	if err := p.RecheckSession(a); err != nil {
		t.Errorf("RecheckSession of a session with a conversation: %v", err)
	}
	for name, v := range map[string]any{"request": SessionRequest{}, "checked": none, "summary": none.Summary()} {
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(js), "conversation") {
			t.Errorf("%s without a conversation encodes one: %s", name, js)
		}
	}
}
