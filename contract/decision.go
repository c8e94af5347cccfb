package contract

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sandboxflow/sandboxflow/approval"
)

// Bounds on a decision's free-text fields, to keep history and logs small.
const (
	MaxReviewerBytes = 256
	MaxReasonBytes   = 4096
)

// Decision is a reviewer's decision, sent as the signal "approval" or the update "decide". Its
// JSON form is fixed so that any Temporal client can send it:
//
//	{"approval_id": "<uuid>", "digest": "sha256:<hex>", "approve": true, "reason": "",
//	 "expires": "2026-01-02T15:04:05Z", "signature": "-----BEGIN SSH SIGNATURE-----\n..."}
//
// Only a decision signed by a key of the workers' reviewers file, over this run's statement
// (approval.Fields: workflow id, run id, digest, approve or deny, approval id, sandbox task queue,
// expiry), is accepted; the sandbox host verifies it again before anything runs.
type Decision struct {
	// ApprovalID identifies the decision: a UUID made by the reviewer's client. Required.
	ApprovalID string `json:"approval_id"`
	// Digest is the digest the reviewer read. Required to approve, and must equal the request's;
	// a denial may leave it empty.
	Digest string `json:"digest"`
	// Approve is true to run the code, false to deny it.
	Approve bool `json:"approve"`
	// Reviewer names who decided. Optional: in a version 2 statement the principal signed is
	// recorded, and a reviewer naming another is refused; with version 1 the principal of the
	// verifying key is recorded, and a name the key may not sign for is refused.
	Reviewer string `json:"reviewer,omitempty"`
	// Reason is free text, shown with a denial. Optional; not signed.
	Reason string `json:"reason"`
	// Expires is the statement's expiry (RFC 3339, UTC, whole seconds). Required unless
	// Statement is given, whose expiry is then used.
	Expires time.Time `json:"expires,omitzero"`
	// Signature is the armored SSHSIG (namespace sandboxflow-approval) over the statement.
	Signature string `json:"signature,omitempty"`
	// WebAuthn is a passkey assertion over the statement (not verified yet: refused).
	WebAuthn *approval.WebAuthnAssertion `json:"webauthn,omitempty"`
	// Statement is the signed statement text. Optional: when given it must be this run's, and a
	// difference is reported with the field that differs.
	Statement string `json:"statement,omitempty"`
	// Edit, when set, makes the decision an approval of an edited version of the code (sent as
	// the update "decide" only): Digest and the signed statement are then the edited request's
	// digest, and the workflow checks the edited request against the policy again before it
	// accepts it. Optional.
	Edit *DecisionEdit `json:"edit,omitempty"`
	// Wait asks the workflow to answer an accepted approval that starts the run (it completes
	// the quorum) only once the run has ended, with the run's end (DecideResult.Ended and
	// Result): the approval and the result in one call, as a reviewer who waits for the result
	// wants them. A decision that leaves the run waiting for more approvals, and a denial, are
	// answered at once. Sent as the update "decide" only (a signal has no answer). It is not
	// part of what the reviewer signs: a sender chooses how long it waits for the answer, not
	// what runs. A worker from before it ignores it and answers at once, without Ended.
	// Optional.
	Wait bool `json:"wait,omitempty"`
	// ResultFromHistory, with Wait, asks for the run's end without its result (Ended, no
	// Result): the caller reads the result from the run's history, where the workflow's result
	// records it, as the Go client does in the read that verifies its receipt. The result is
	// then recorded, and sent, once rather than twice (about 20% of what a 100 KB chart costs on
	// its way to a reviewer). Not signed, as Wait. A worker from before it answers with the
	// result. Optional.
	ResultFromHistory bool `json:"result_from_history,omitempty"`
}

// Proof returns what approval.Verify checks of the decision.
func (d Decision) Proof() approval.Proof {
	return approval.Proof{Reviewer: d.Reviewer, Signature: d.Signature, WebAuthn: d.WebAuthn, Statement: d.Statement}
}

// Fields returns the statement the decision must have signed, for the run named by workflowID
// and runID, the request's digest and the sandbox task queue, all from the verifier's own
// knowledge; approve, approval id, reviewer and expiry come from the decision. The caller sets
// the version its run requires (a version 2 statement signs the reviewer's principal).
func (d Decision) Fields(workflowID, runID, digest, sandboxTaskQueue string) approval.Fields {
	return approval.Fields{
		WorkflowID: workflowID, RunID: runID, Digest: digest, Approve: d.Approve,
		ApprovalID: d.ApprovalID, SandboxTaskQueue: sandboxTaskQueue, Reviewer: d.Reviewer, Expires: d.Expires,
	}
}

// Problem returns a *Rejection saying what makes d malformed for a request whose digest is digest
// (a missing or malformed approval id, an oversized or unprintable reviewer or reason, a missing
// or wrong digest), or nil when its fields are well formed. The workflow refuses a decision with
// a problem before it verifies the signature; a client may ask first.
func (d Decision) Problem(digest string) *Rejection {
	reject := func(r RejectReason, format string, args ...any) *Rejection {
		return &Rejection{Reason: r, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case d.ApprovalID == "":
		return reject(RejectApprovalID, "approval_id is missing")
	case !isUUID(d.ApprovalID):
		return reject(RejectApprovalID, "approval_id %.64q is not a UUID", d.ApprovalID)
	case len(d.Reviewer) > MaxReviewerBytes:
		return reject(RejectReviewer, "reviewer is %d bytes, over the limit of %d", len(d.Reviewer), MaxReviewerBytes)
	case !utf8.ValidString(d.Reviewer) || strings.ContainsFunc(d.Reviewer, unicode.IsControl):
		return reject(RejectReviewer, "reviewer must be valid UTF-8 without control characters")
	case len(d.Reason) > MaxReasonBytes:
		return reject(RejectReasonText, "reason is %d bytes, over the limit of %d", len(d.Reason), MaxReasonBytes)
	case !utf8.ValidString(d.Reason):
		return reject(RejectReasonText, "reason is not valid UTF-8")
	case d.Approve && d.Digest == "":
		return reject(RejectMissingDigest, "digest is missing: an approval must carry the digest of the request it approves (%s)", digest)
	case d.Digest != "" && d.Digest != digest:
		return reject(RejectWrongDigest, "wrong digest: the decision is for %.80q but this request's digest is %s", d.Digest, digest)
	}
	return nil
}

// isUUID reports whether s is a UUID in its 36-character form, and not the nil UUID.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	id, err := uuid.Parse(s)
	return err == nil && id != uuid.Nil
}
