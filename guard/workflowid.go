package guard

import "github.com/sandboxflow/sandboxflow/pysource"

// MaxWorkflowIDBytes bounds the workflow id of a run or session.
const MaxWorkflowIDBytes = 200

// CheckWorkflowID checks the workflow id of a run or session, which the orchestrator may choose:
// at most MaxWorkflowIDBytes of ASCII letters, digits and . _ : @ -, starting with a letter or
// digit (the character set of a conversation id). Reviewers read it in every view and
// notification, so it can be no sentence, URL, markup or line break. A bad one is a
// ToolUsageError.
func CheckWorkflowID(id string) error {
	switch {
	case id == "":
		return toolUsagef("workflow id is empty")
	case len(id) > MaxWorkflowIDBytes:
		return toolUsagef("workflow id is %d bytes; at most %d", len(id), MaxWorkflowIDBytes)
	case !conversationRE.MatchString(id):
		return toolUsagef("workflow id %q: want ASCII letters, digits and . _ : @ -, starting with a letter or digit", pysource.VisibleText(id))
	}
	return nil
}
