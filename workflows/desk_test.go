package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A cell's seat refuses, before anything reads the workflow context, a decision for a cell the
// session does not have, for a decided cell and for a cell that does not wait, with the texts
// the session's clients read.
func TestCellSeatRefusalOutsideTheWait(t *testing.T) {
	taken := contract.Decision{ApprovalID: id1, Reviewer: "alice", Approve: true}
	r := &session{
		cells: []guard.Cell{{Index: 1}, {Index: 2}, {Index: 3}},
		status: contract.SessionStatus{Cells: []contract.CellStatus{
			{Cell: 1, State: contract.StatusSucceeded}, {Cell: 2, State: contract.StatusAwaitingApproval}, {Cell: 3, State: contract.StatusAwaitingApproval},
		}},
		ballots: []ballot{{decision: &taken}, {}, {}},
		current: 3,
	}
	for _, tc := range []struct {
		cell   int
		reason contract.RejectReason
		msg    string
	}{
		{0, contract.RejectNotWaiting, "not waiting: the session has no cell 0"},
		{4, contract.RejectNotWaiting, "not waiting: the session has no cell 4"},
		{1, contract.RejectAlreadyDecided, "already decided: decision " + id1 + " by alice was accepted for cell 1"},
		{2, contract.RejectNotWaiting, "not waiting: cell 2 is awaiting_approval"},
	} {
		_, rej := r.desk.refusal(nil, r.seat(tc.cell), contract.Decision{ApprovalID: id2, Approve: true})
		if rej == nil || rej.Reason != tc.reason || rej.Msg != tc.msg {
			t.Errorf("refusal for cell %d = %+v; want %s %q", tc.cell, rej, tc.reason, tc.msg)
		}
	}
}

// The desk refuses an approval by a reviewer, a key or an approval id that the seat's approvals
// hold, naming the seat, and counts nothing twice; a run's edit starts the approvals afresh.
func TestDeskDuplicate(t *testing.T) {
	k := &desk{quorumVersion: 1, quorum: 2}
	had := []contract.DecisionRecord{{ApprovalID: id1, Reviewer: "alice", Fingerprint: "SHA256:a"}}
	seatOf := func(what string, edits bool) seat {
		shown := &contract.DecisionWait{Approvals: append([]contract.DecisionRecord(nil), had...)}
		s := seat{what: what, ballot: &ballot{}, shown: shown}
		if edits {
			s.editRefusal = func(contract.Decision) *contract.Rejection { return nil }
		}
		return s
	}
	bob := approval.Verified{Principal: "bob", Fingerprint: "SHA256:b"}
	for _, tc := range []struct {
		name string
		s    seat
		d    contract.Decision
		v    approval.Verified
		want string
	}{
		{"same approval id", seatOf("cell", false), contract.Decision{ApprovalID: id1, Approve: true}, bob,
			"already approved by approval id " + id1 + ": this cell needs 2 approvals by distinct reviewers with distinct keys and has 1; another reviewer must approve"},
		{"same reviewer", seatOf("run", true), contract.Decision{ApprovalID: id2, Approve: true}, approval.Verified{Principal: "alice", Fingerprint: "SHA256:c"},
			"already approved by reviewer alice: this run needs 2 approvals by distinct reviewers with distinct keys and has 1; another reviewer must approve"},
		{"same key", seatOf("run", true), contract.Decision{ApprovalID: id2, Approve: true}, approval.Verified{Principal: "carol", Fingerprint: "SHA256:a"},
			"already approved by key SHA256:a (which signed for alice): this run needs 2 approvals by distinct reviewers with distinct keys and has 1; another reviewer must approve"},
		{"another reviewer", seatOf("run", true), contract.Decision{ApprovalID: id2, Approve: true}, bob, ""},
		{"a denial", seatOf("cell", false), contract.Decision{ApprovalID: id1}, bob, ""},
		{"a run's edit", seatOf("run", true), contract.Decision{ApprovalID: id1, Approve: true, Edit: &contract.DecisionEdit{}}, bob, ""},
		{"a cell's edit is read as its approval", seatOf("cell", false), contract.Decision{ApprovalID: id1, Approve: true, Edit: &contract.DecisionEdit{}}, bob,
			"already approved by approval id " + id1 + ": this cell needs 2 approvals by distinct reviewers with distinct keys and has 1; another reviewer must approve"},
	} {
		rej := k.duplicate(tc.s, tc.d, tc.v)
		switch {
		case tc.want == "" && rej != nil:
			t.Errorf("%s: duplicate = %v; want none", tc.name, rej)
		case tc.want != "" && (rej == nil || rej.Reason != contract.RejectDuplicate || rej.Msg != tc.want):
			t.Errorf("%s: duplicate = %+v; want %q", tc.name, rej, tc.want)
		}
	}
	if rej := (&desk{quorum: 2}).duplicate(seatOf("run", true), contract.Decision{ApprovalID: id1, Approve: true}, bob); rej != nil {
		t.Errorf("duplicate before the quorum change = %v; want none (the first valid decision is taken)", rej)
	}
}

// A cell's decision sent with Wait is answered once the cell has ended, with its status: an
// approval with the cell's result, a denial at once with the denied cell. Each answer's wait is
// behind the session's own change id.
func TestSessionDecisionWithWaitAnswersTheEndedCell(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	req := sessionRequest()
	var marked int
	h.env.OnGetVersion(decideWaitChange, workflow.DefaultVersion, 1).Run(func(mock.Arguments) { marked++ }).Return(workflow.Version(1))
	var approved, denied *outcome
	h.at(time.Minute, func() { h.submit("print('waited for')") })
	h.at(2*time.Minute, func() {
		approved = h.update(contract.UpdateDecideCell, contract.CellDecision{Cell: 1, Decision: approve(h.status().Cells[0].Digest), Wait: true}, nil)
	})
	h.at(4*time.Minute, func() { h.submit("print('never')") })
	h.at(5*time.Minute, func() {
		d := cellDecision(testWorkflowID, testRunID, h.status().Cells[1].Digest, testHostQueue, false)
		denied = h.update(contract.UpdateDecideCell, contract.CellDecision{Cell: 2, Decision: d, Wait: true}, nil)
	})
	h.at(7*time.Minute, func() { h.closeSession() })
	h.run(req)

	res, err := decideResult(t, approved)
	if err != nil || res.State != contract.StatusRunning || res.CellStatus == nil ||
		res.CellStatus.State != contract.StatusSucceeded || res.CellStatus.Result == nil || res.CellStatus.Cell != 1 {
		t.Errorf("approval with Wait: %+v, %v; want running, with cell 1's status, succeeded with its result", res, err)
	}
	res, err = decideResult(t, denied)
	if err != nil || res.State != contract.StatusDenied || res.CellStatus == nil || res.CellStatus.State != contract.StatusDenied || res.CellStatus.Cell != 2 {
		t.Errorf("denial with Wait: %+v, %v; want denied, with cell 2's status, denied", res, err)
	}
	if marked != 2 {
		t.Errorf("%s asked %d times; want 2, once a decision sent with Wait", decideWaitChange, marked)
	}
}
