package client

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// TestStatementFor: the statement is built from the run's status alone (its workflow id, run id,
// digest and sandbox task queue), with an expiry that never outlives the run's deadline unless
// the caller sets one, and only while the run waits.
func TestStatementFor(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 500, time.UTC)
	st := contract.Status{WorkflowID: "sandbox-1", RunID: "run-1", State: contract.StatusAwaitingApproval,
		SandboxTaskQueue: "hosts", ApprovalDeadline: now.Add(10 * time.Minute),
		Request: guard.Summary{Digest: "sha256:" + strings.Repeat("ab", 32)}}
	f, err := StatementFor(st, StatementOptions{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if f.WorkflowID != "sandbox-1" || f.RunID != "run-1" || f.Digest != st.Request.Digest || f.SandboxTaskQueue != "hosts" ||
		!f.Approve || len(f.ApprovalID) != 36 || !f.Expires.Equal(st.ApprovalDeadline.Truncate(time.Second)) {
		t.Errorf("statement %+v; want the status's run, an approval, a fresh id, expiring at the deadline", f)
	}
	deny, err := StatementFor(st, StatementOptions{Deny: true, ApprovalID: f.ApprovalID, Expires: now.Add(time.Hour)}, now)
	if err != nil {
		t.Fatal(err)
	}
	if deny.Approve || deny.ApprovalID != f.ApprovalID || !deny.Expires.Equal(now.Add(time.Hour).Truncate(time.Second)) {
		t.Errorf("denial %+v; want a denial with the given id and expiry", deny)
	}
	st.State = contract.StatusRunning
	if _, err := StatementFor(st, StatementOptions{}, now); err == nil {
		t.Errorf("a statement for a run that no longer waits was made")
	}
	d := AssertedDecision(f, nil, "stmt", "alice", "ok")
	if d.ApprovalID != f.ApprovalID || d.Digest != f.Digest || !d.Approve || d.Reviewer != "alice" || d.Statement != "stmt" || d.Reason != "ok" || !d.Expires.Equal(f.Expires) {
		t.Errorf("asserted decision %+v; want the statement's fields", d)
	}
}
