package guard

import (
	"regexp"

	"github.com/sandboxflow/sandboxflow/pysource"
)

// MaxConversationBytes bounds a conversation id.
const MaxConversationBytes = 128

var conversationRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]*$`)

// CheckConversation checks a request's conversation id: empty (none), or at most
// MaxConversationBytes of ASCII letters, digits and . _ : @ -, starting with a letter or digit.
// It is a search attribute's value and is shown to reviewers and in notifications, so it holds
// nothing that a page, a Slack message, an email header or a visibility query would read as
// markup, quoting or a line break. A bad one is a ToolUsageError.
func CheckConversation(id string) error {
	switch {
	case id == "":
		return nil
	case len(id) > MaxConversationBytes:
		return toolUsagef("conversation is %d bytes; at most %d", len(id), MaxConversationBytes)
	case !conversationRE.MatchString(id):
		return toolUsagef("conversation %q: want ASCII letters, digits and . _ : @ -, starting with a letter or digit", pysource.VisibleText(id))
	}
	return nil
}
