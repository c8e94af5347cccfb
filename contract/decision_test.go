package contract

import (
	"strings"
	"testing"
)

func TestDecisionProblem(t *testing.T) {
	const (
		id     = "6f1c2a4e-0b7d-4c39-9a51-2f8e3d6b7c10"
		digest = "sha256:" + "ab12"
	)
	good := Decision{ApprovalID: id, Digest: digest, Approve: true, Reviewer: "alice@example.com", Reason: "looks fine\nline two"}
	if p := good.Problem(digest); p != "" {
		t.Fatalf("a well-formed approval: %q", p)
	}
	if p := (Decision{ApprovalID: id}).Problem(digest); p != "" {
		t.Errorf("a denial without digest: %q; want none (a denial may leave it empty)", p)
	}
	for _, tc := range []struct {
		name string
		edit func(*Decision)
		want string
	}{
		{"no id", func(d *Decision) { d.ApprovalID = "" }, "approval_id is missing"},
		{"id not a UUID", func(d *Decision) { d.ApprovalID = strings.Repeat("x", 36) }, "not a UUID"},
		{"nil UUID", func(d *Decision) { d.ApprovalID = "00000000-0000-0000-0000-000000000000" }, "not a UUID"},
		{"long reviewer", func(d *Decision) { d.Reviewer = strings.Repeat("a", MaxReviewerBytes+1) }, "reviewer is 257 bytes"},
		{"control character in reviewer", func(d *Decision) { d.Reviewer = "alice\x1b[2J" }, "control characters"},
		{"reviewer not UTF-8", func(d *Decision) { d.Reviewer = "al\xffice" }, "control characters"},
		{"long reason", func(d *Decision) { d.Reason = strings.Repeat("r", MaxReasonBytes+1) }, "reason is 4097 bytes"},
		{"reason not UTF-8", func(d *Decision) { d.Reason = "\xff" }, "reason is not valid UTF-8"},
		{"approval without digest", func(d *Decision) { d.Digest = "" }, "digest is missing"},
		{"another request's digest", func(d *Decision) { d.Digest = "sha256:cd34" }, "wrong digest"},
	} {
		d := good
		tc.edit(&d)
		if p := d.Problem(digest); !strings.Contains(p, tc.want) {
			t.Errorf("%s: problem %q; want one containing %q", tc.name, p, tc.want)
		}
	}
}
