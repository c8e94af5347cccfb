package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
)

// sessionQuorumChange is the change id of quorums for sessions' cells (issue 32): sessions
// recorded before it take each cell's first valid decision, as they did (their workers refused a
// session under a quorum over one); sessions after it count each cell's approvals up to the
// quorum their check recorded.
const sessionQuorumChange = "session-quorum-v1"

// cellQuorum is what a session keeps of its cells' approvals.
type cellQuorum struct {
	// quorumVersion is sessionQuorumChange's version for this session.
	quorumVersion workflow.Version
	// quorum is how many approvals each cell needs (1 before sessionQuorumChange).
	quorum int
	// approvals are the approvals accepted for each cell, by index-1, in order.
	approvals [][]contract.Decision
}

// startCellQuorum fixes the session's quorum from its check (recorded in history, so it
// replays) behind sessionQuorumChange.
func (r *session) startCellQuorum(ctx workflow.Context, check contract.SessionCheckResult) {
	r.quorumVersion = workflow.GetVersion(ctx, sessionQuorumChange, workflow.DefaultVersion, 1)
	r.quorum = 1
	if !r.quorumCounted() {
		return
	}
	r.quorum = max(check.Quorum, 1)
	r.status.Quorum = r.quorum
}

func (r *session) quorumCounted() bool { return r.quorumVersion >= 1 }

// duplicateCell refuses an approval of cell by a principal, a key or an approval id the cell's
// approvals already hold.
func (r *session) duplicateCell(cell int, d contract.Decision, v approval.Verified) *contract.Rejection {
	if !d.Approve || !r.quorumCounted() {
		return nil
	}
	return duplicateOf(r.status.Cells[cell-1].Approvals, d, v, "cell", r.quorum)
}

// countCell records an accepted approval of cell (rec, as the status shows it) and reports
// whether the cell has its quorum now; its decision is then the first approval.
func (r *session) countCell(ctx workflow.Context, cell int, d contract.Decision, rec contract.DecisionRecord) bool {
	st := &r.status.Cells[cell-1]
	r.approvals[cell-1] = append(r.approvals[cell-1], d)
	st.Approvals = append(st.Approvals, rec)
	if len(st.Approvals) < r.quorum {
		r.event(ctx, contract.EventApprovalCounted, "cell", cell, "approval_id", d.ApprovalID, "reviewer", d.Reviewer,
			"approvals", len(st.Approvals), "quorum", r.quorum)
		return false
	}
	first, firstRec := r.approvals[cell-1][0], st.Approvals[0]
	r.decisions[cell-1], st.Decision = &first, &firstRec
	return true
}

// cellRunInput is the cell activity's input for the current cell: its decision and, under
// sessionQuorumChange, every approval the cell has.
func (r *session) cellRunInput() contract.CellRunInput {
	in := contract.CellRunInput{Cell: r.cells[r.current-1], Chain: r.cell().Chain, Decision: *r.decisions[r.current-1]}
	if r.quorumCounted() {
		in.Decisions = r.approvals[r.current-1]
	}
	return in
}

// withCount adds the cell's approvals had and needed to a decide-cell answer.
func (r *session) withCount(res contract.DecideResult, cell int) contract.DecideResult {
	if r.quorumCounted() {
		res.Approvals, res.Quorum = len(r.status.Cells[cell-1].Approvals), r.quorum
	}
	return res
}

// cellApprovalBytes bounds the status of one more approval of a cell (its record, with a
// reason of contract.MaxReasonBytes that JSON escapes at six bytes a byte), for the status
// budget of a cell that needs more than one.
const cellApprovalBytes = 1024 + 6*contract.MaxReasonBytes

// quorumBytes is what a cell's approvals past its first may add to the status.
func (r *session) quorumBytes() int {
	return max(r.quorum-1, 0) * cellApprovalBytes
}
