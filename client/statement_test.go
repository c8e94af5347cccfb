package client

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// TestStatementFor: the statement is built from the run's status alone (its workflow id, run id,
// digest and sandbox task queue), with an expiry that never outlives the run's deadline unless
// the caller sets one, and only while the run waits.
func TestStatementFor(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 500, time.UTC)
	st := contract.Status{WorkflowID: "sandbox-1", RunID: "run-1", State: contract.StatusAwaitingApproval,
		SandboxTaskQueue: "hosts", DecisionWait: contract.DecisionWait{ApprovalDeadline: now.Add(10 * time.Minute)}, StatementVersion: approval.StatementVersion,
		Request: guard.Summary{Digest: "sha256:" + strings.Repeat("ab", 32)}}
	f, err := StatementFor(st, StatementOptions{Reviewer: "alice"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if f.WorkflowID != "sandbox-1" || f.RunID != "run-1" || f.Digest != st.Request.Digest || f.SandboxTaskQueue != "hosts" ||
		!f.Approve || len(f.ApprovalID) != 36 || !f.Expires.Equal(st.ApprovalDeadline.Truncate(time.Second)) {
		t.Errorf("statement %+v; want the status's run, an approval, a fresh id, expiring at the deadline", f)
	}
	deny, err := StatementFor(st, StatementOptions{Deny: true, ApprovalID: f.ApprovalID, Expires: now.Add(time.Hour), Reviewer: "alice"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if deny.Approve || deny.ApprovalID != f.ApprovalID || !deny.Expires.Equal(now.Add(time.Hour).Truncate(time.Second)) {
		t.Errorf("denial %+v; want a denial with the given id and expiry", deny)
	}
	// A status asking for version 1 (a run from before version 2, or a rogue worker's
	// downgrade): an approval is refused, a denial is made as asked.
	for _, version := range []int{0, approval.StatementVersion1} {
		old := st
		old.StatementVersion = version
		if f, err := StatementFor(old, StatementOptions{Reviewer: "alice"}, now); !errors.Is(err, ErrStatementVersion) {
			t.Errorf("approval for a status of statement version %d: %+v, %v; want %v", version, f, err, ErrStatementVersion)
		}
		if f, err := StatementFor(old, StatementOptions{Deny: true}, now); err != nil || f.Version != approval.StatementVersion1 {
			t.Errorf("denial for a status of statement version %d: %+v, %v; want a version 1 denial", version, f, err)
		}
	}
	// A status whose deadline is far away (a workflow worker's lie) does not make the default
	// expiry longer than DefaultStatementLifetime.
	far := st
	far.ApprovalDeadline = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	if f, err := StatementFor(far, StatementOptions{Reviewer: "alice"}, now); err != nil || !f.Expires.Equal(now.Add(DefaultStatementLifetime).Truncate(time.Second)) {
		t.Errorf("a status with a far deadline: %+v, %v; want the default lifetime", f, err)
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
