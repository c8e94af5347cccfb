package workflows

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sandboxflow/sandboxflow/contract"
)

// Bounds on a decision's free-text fields, to keep history and logs small.
const (
	MaxReviewerBytes = 256
	MaxReasonBytes   = 4096
)

// refusal says why d cannot be accepted now, or returns "" when it can. It reads the workflow's
// state and never changes it, so the update validator can use it.
func (r *runCode) refusal(d contract.Decision) string {
	if r.decision != nil {
		return fmt.Sprintf("already decided: decision %s by %s was accepted", r.decision.ApprovalID, r.decision.Reviewer)
	}
	switch r.status.State {
	case contract.StatusAwaitingApproval:
	case contract.StatusChecking:
		return "not waiting for a decision: the request is still being checked"
	default:
		return "not waiting for a decision: the run is " + r.status.State
	}
	return checkDecision(d, r.checked.Digest)
}

// checkDecision checks a decision's fields against the request's digest and returns why it is
// refused, or "".
func checkDecision(d contract.Decision, digest string) string {
	switch {
	case d.ApprovalID == "":
		return "approval_id is missing"
	case !isUUID(d.ApprovalID):
		return fmt.Sprintf("approval_id %.64q is not a UUID", d.ApprovalID)
	case strings.TrimSpace(d.Reviewer) == "":
		return "reviewer is missing"
	case len(d.Reviewer) > MaxReviewerBytes:
		return fmt.Sprintf("reviewer is %d bytes, over the limit of %d", len(d.Reviewer), MaxReviewerBytes)
	case !utf8.ValidString(d.Reviewer) || strings.ContainsFunc(d.Reviewer, unicode.IsControl):
		return "reviewer must be valid UTF-8 without control characters"
	case len(d.Reason) > MaxReasonBytes:
		return fmt.Sprintf("reason is %d bytes, over the limit of %d", len(d.Reason), MaxReasonBytes)
	case !utf8.ValidString(d.Reason):
		return "reason is not valid UTF-8"
	case d.Approve && d.Digest == "":
		return "digest is missing: an approval must carry the digest of the request it approves (" + digest + ")"
	case d.Digest != "" && d.Digest != digest:
		return fmt.Sprintf("wrong digest: the decision is for %.80q but this request's digest is %s", d.Digest, digest)
	}
	return ""
}

// isUUID reports whether s is a UUID in its 36-character form, and not the nil UUID.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	id, err := uuid.Parse(s)
	return err == nil && id != uuid.Nil
}
