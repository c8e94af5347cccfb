package workflows

import (
	"testing"

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
		recs := append([]contract.DecisionRecord(nil), had...)
		s := seat{what: what, ballot: &ballot{}, approvalRecords: &recs}
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
