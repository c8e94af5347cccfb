package workflows

import (
	"slices"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
)

// A session that names a conversation sets SandboxConversation once, in the upsert that
// announces it as opening (so clients find it among the conversation's runs and sessions); one
// that names none never sets it.
func TestSessionSetsItsConversation(t *testing.T) {
	for _, conv := range []string{"task-5", ""} {
		h := newSessionHarness(t, sessionPolicy)
		req := sessionRequest()
		req.Conversation = conv
		h.at(time.Minute, func() {
			if got := h.status().Settings.Conversation; got != conv {
				t.Errorf("status settings conversation %q; want %q", got, conv)
			}
			h.closeSession()
		})
		h.run(req)
		var want []string
		if conv != "" {
			want = []string{conv + ", with status " + contract.SessionOpening}
		}
		if !slices.Equal(h.conversations, want) {
			t.Errorf("conversation %q: SandboxConversation upserts %q; want %q", conv, h.conversations, want)
		}
	}
}
