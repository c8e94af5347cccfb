package contract

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
)

func TestDecisionProblem(t *testing.T) {
	const (
		id     = "6f1c2a4e-0b7d-4c39-9a51-2f8e3d6b7c10"
		digest = "sha256:" + "ab12"
	)
	good := Decision{ApprovalID: id, Digest: digest, Approve: true, Reviewer: "alice@example.com", Reason: "looks fine\nline two"}
	if p := good.Problem(digest); p != nil {
		t.Fatalf("a well-formed approval: %v", p)
	}
	if p := (Decision{ApprovalID: id}).Problem(digest); p != nil {
		t.Errorf("a denial without digest: %v; want none (a denial may leave it empty)", p)
	}
	for _, tc := range []struct {
		name   string
		edit   func(*Decision)
		reason RejectReason
		want   string
	}{
		{"no id", func(d *Decision) { d.ApprovalID = "" }, RejectApprovalID, "approval_id is missing"},
		{"id not a UUID", func(d *Decision) { d.ApprovalID = strings.Repeat("x", 36) }, RejectApprovalID, "not a UUID"},
		{"nil UUID", func(d *Decision) { d.ApprovalID = "00000000-0000-0000-0000-000000000000" }, RejectApprovalID, "not a UUID"},
		{"long reviewer", func(d *Decision) { d.Reviewer = strings.Repeat("a", MaxReviewerBytes+1) }, RejectReviewer, "reviewer is 257 bytes"},
		{"control character in reviewer", func(d *Decision) { d.Reviewer = "alice\x1b[2J" }, RejectReviewer, "control characters"},
		{"reviewer not UTF-8", func(d *Decision) { d.Reviewer = "al\xffice" }, RejectReviewer, "control characters"},
		{"long reason", func(d *Decision) { d.Reason = strings.Repeat("r", MaxReasonBytes+1) }, RejectReasonText, "reason is 4097 bytes"},
		{"reason not UTF-8", func(d *Decision) { d.Reason = "\xff" }, RejectReasonText, "reason is not valid UTF-8"},
		{"approval without digest", func(d *Decision) { d.Digest = "" }, RejectMissingDigest, "digest is missing"},
		{"another request's digest", func(d *Decision) { d.Digest = "sha256:cd34" }, RejectWrongDigest, "wrong digest"},
	} {
		d := good
		tc.edit(&d)
		p := d.Problem(digest)
		if p == nil || p.Reason != tc.reason || !strings.Contains(p.Error(), tc.want) {
			t.Errorf("%s: problem %v; want a %s rejection containing %q", tc.name, p, tc.reason, tc.want)
		}
	}
}

// TestRejectionCrossesTemporal: the update's answer keeps the rejection's text as its message
// and its reason in the details, read back by RejectionOf; a DecisionRejected without details
// (an older worker) reads as RejectOther with its message.
func TestRejectionCrossesTemporal(t *testing.T) {
	rej := &Rejection{Reason: RejectWrongDigest, Msg: "wrong digest: x"}
	fc := temporal.GetDefaultFailureConverter()
	back := fc.FailureToError(fc.ErrorToFailure(rej.Failure()))
	var appErr *temporal.ApplicationError
	if !errors.As(back, &appErr) || appErr.Type() != DecisionRejectedType || appErr.Message() != rej.Error() || !appErr.NonRetryable() {
		t.Fatalf("failure %v; want a non-retryable %s with the rejection's text", back, DecisionRejectedType)
	}
	if got, ok := RejectionOf(back); !ok || got.Reason != RejectWrongDigest || got.Error() != rej.Error() {
		t.Errorf("RejectionOf = %+v, %t; want the wrong-digest rejection", got, ok)
	}
	if got, ok := RejectionOf(rej.Failure()); !ok || got.Reason != RejectWrongDigest {
		t.Errorf("RejectionOf of the local failure = %+v, %t; want the wrong-digest rejection", got, ok)
	}
	old := temporal.NewNonRetryableApplicationError("wrong digest: y", DecisionRejectedType, nil)
	if got, ok := RejectionOf(old); !ok || got.Reason != RejectOther || got.Error() != "wrong digest: y" {
		t.Errorf("RejectionOf(without details) = %+v, %t; want other, with the message", got, ok)
	}
	if _, ok := RejectionOf(errors.New("plain")); ok {
		t.Errorf("a plain error read as a rejection")
	}
	cause := errors.New("approval: refused (bad_signature): x")
	if got := (&Rejection{Reason: RejectOther, Err: cause}).Error(); got != cause.Error() {
		t.Errorf("a signature rejection reads %q; want its cause's text %q", got, cause)
	}
}

// TestRunInputReadsTheOlderShape: an input recorded when the approval id, reviewer and digest
// travelled beside the decision still reads, and what the sandbox host uses is the decision's.
func TestRunInputReadsTheOlderShape(t *testing.T) {
	old := `{"checked":{"language":"python","code":"print(1)","digest":"sha256:ab"},"approval_id":"beside","reviewer":"mallory","digest":"sha256:cd",` +
		`"decision":{"approval_id":"6f1c2a4e-0b7d-4c39-9a51-2f8e3d6b7c10","digest":"sha256:ab","approve":true,"reviewer":"alice","reason":""}}`
	var in RunInput
	if err := json.Unmarshal([]byte(old), &in); err != nil {
		t.Fatal(err)
	}
	if in.Checked.Code != "print(1)" || in.Decision.ApprovalID != "6f1c2a4e-0b7d-4c39-9a51-2f8e3d6b7c10" || in.Decision.Reviewer != "alice" || in.Decision.Digest != "sha256:ab" {
		t.Errorf("read %+v; want the checked request and the decision's own fields", in)
	}
}
