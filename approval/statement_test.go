package approval

import (
	"strings"
	"testing"
	"time"
)

func TestStatementRoundTrip(t *testing.T) {
	f := testFields()
	b := mustStatement(t, f)
	want := "sandboxflow-approval-statement v1\n" +
		"workflow_id: runcode-7f3a\n" +
		"run_id: 0b9c2f6e-1d2a-4c5e-9f00-1234567890ab\n" +
		"digest: sha256:" + strings.Repeat("ab", 32) + "\n" +
		"decision: approve\n" +
		"approval_id: 5f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0\n" +
		"sandbox_task_queue: sandbox\n" +
		"expires: 2026-11-30T11:00:00Z\n"
	if string(b) != want {
		t.Fatalf("Statement:\ngot  %q\nwant %q", b, want)
	}
	got, err := ParseStatement(b)
	if err != nil {
		t.Fatalf("ParseStatement: %v", err)
	}
	if got != f {
		t.Fatalf("ParseStatement: got %+v; want %+v", got, f)
	}
	f.Approve = false
	if b := mustStatement(t, f); !strings.Contains(string(b), "\ndecision: deny\n") {
		t.Fatalf("deny statement: got %q; want a decision: deny line", b)
	}
}

func TestStatementExpiresIsUTCSeconds(t *testing.T) {
	f := testFields()
	f.Expires = time.Date(2026, 11, 30, 12, 0, 0, 999, time.FixedZone("X", 3600))
	b := mustStatement(t, f)
	if !strings.HasSuffix(string(b), "expires: 2026-11-30T11:00:00Z\n") {
		t.Fatalf("got %q; want expires in UTC with whole seconds", b)
	}
}

func TestStatementRefusesInjection(t *testing.T) {
	bad := []string{"", "a\nexpires: 2099-01-01T00:00:00Z", "a\rb", "a\x00b", "tab\there", " lead", "trail ",
		"a\u2028b", "a\u0085b", "a\u202eb", "\xff", strings.Repeat("x", maxFieldBytes+1)}
	set := map[string]func(*Fields, string){
		FieldWorkflowID:       func(f *Fields, v string) { f.WorkflowID = v },
		FieldRunID:            func(f *Fields, v string) { f.RunID = v },
		FieldDigest:           func(f *Fields, v string) { f.Digest = v },
		FieldApprovalID:       func(f *Fields, v string) { f.ApprovalID = v },
		FieldSandboxTaskQueue: func(f *Fields, v string) { f.SandboxTaskQueue = v },
	}
	for name, setter := range set {
		for _, v := range bad {
			f := testFields()
			setter(&f, v)
			if b, err := f.Statement(); err == nil {
				t.Errorf("%s=%q: got statement %q; want an error", name, v, b)
			} else if !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: got %v; want an error naming %s", name, v, err, name)
			}
		}
	}
	f := testFields()
	f.Expires = time.Time{}
	if _, err := f.Statement(); err == nil || !strings.Contains(err.Error(), "expires") {
		t.Errorf("zero expiry: got %v; want an error naming expires", err)
	}
	for _, d := range []string{"sha256:" + strings.Repeat("AB", 32), "sha512:" + strings.Repeat("ab", 32), "sha256:abc"} {
		f := testFields()
		f.Digest = d
		if _, err := f.Statement(); err == nil {
			t.Errorf("digest %q: got no error; want one", d)
		}
	}
	f = testFields()
	f.ApprovalID = "not-a-uuid"
	if _, err := f.Statement(); err == nil {
		t.Errorf("approval_id not-a-uuid: got no error; want one")
	}
}

func TestParseStatementStrict(t *testing.T) {
	good := string(mustStatement(t, testFields()))
	tests := []struct {
		name string
		in   string
	}{
		{"no final newline", strings.TrimSuffix(good, "\n")},
		{"crlf", strings.ReplaceAll(good, "\n", "\r\n")},
		{"other version", strings.Replace(good, " v1\n", " v2\n", 1)},
		{"extra line", good + "reviewer: mallory\n"},
		{"missing line", strings.Replace(good, "sandbox_task_queue: sandbox\n", "", 1)},
		{"fields swapped", strings.Replace(strings.Replace(good, "workflow_id: ", "X: ", 1), "run_id: ", "workflow_id: ", 1)},
		{"decision word", strings.Replace(good, "decision: approve", "decision: yes", 1)},
		{"expires not utc", strings.Replace(good, "11:00:00Z", "12:00:00+01:00", 1)},
		{"expires fraction", strings.Replace(good, "11:00:00Z", "11:00:00.5Z", 1)},
		{"double space", strings.Replace(good, "run_id: ", "run_id:  ", 1)},
		{"empty", ""},
	}
	for _, tt := range tests {
		if f, err := ParseStatement([]byte(tt.in)); err == nil {
			t.Errorf("%s: got %+v; want an error", tt.name, f)
		}
	}
}

// Version 2 binds the reviewer's principal, in a line of its own before the expiry; it parses
// back to the same fields, and a pattern or a list is no principal to sign as.
func TestStatementV2NamesTheReviewer(t *testing.T) {
	f := testFields()
	f.Version, f.Reviewer = StatementVersion2, "alice@example.com"
	b := mustStatement(t, f)
	want := "sandboxflow-approval-statement v2\n" +
		"workflow_id: runcode-7f3a\n" +
		"run_id: 0b9c2f6e-1d2a-4c5e-9f00-1234567890ab\n" +
		"digest: sha256:" + strings.Repeat("ab", 32) + "\n" +
		"decision: approve\n" +
		"approval_id: 5f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0\n" +
		"sandbox_task_queue: sandbox\n" +
		"reviewer: alice@example.com\n" +
		"expires: 2026-11-30T11:00:00Z\n"
	if string(b) != want {
		t.Fatalf("Statement:\ngot  %q\nwant %q", b, want)
	}
	got, err := ParseStatement(b)
	if err != nil || got != f {
		t.Fatalf("ParseStatement = %+v, %v; want %+v", got, err, f)
	}
	for _, bad := range []string{"", "*@example.com", "alice,bob", "!alice", " alice", "al\u202eice"} {
		g := f
		g.Reviewer = bad
		if _, err := g.Statement(); err == nil {
			t.Errorf("reviewer %q: got a statement; want an error", bad)
		}
	}
	// A version 1 statement with a reviewer line, or a version 2 one without, does not parse.
	if _, err := ParseStatement([]byte(strings.Replace(want, " v2\n", " v1\n", 1))); err == nil {
		t.Error("v1 header over v2 lines: parsed; want an error")
	}
	if _, err := ParseStatement([]byte(strings.Replace(want, "reviewer: alice@example.com\n", "", 1))); err == nil {
		t.Error("v2 without its reviewer line: parsed; want an error")
	}
}
