package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
)

// sessionQuorumChange is the change id of quorums for sessions' cells (issue 32): sessions
// recorded before it take each cell's first valid decision, as they did (their workers refused a
// session under a quorum over one); sessions after it count each cell's approvals up to the
// quorum their check recorded.
const sessionQuorumChange = "session-quorum-v1"

// startCellQuorum fixes the session's quorum from its check (recorded in history, so it
// replays) behind sessionQuorumChange.
func (r *session) startCellQuorum(ctx workflow.Context, check contract.SessionCheckResult) {
	if r.desk.startQuorum(ctx, sessionQuorumChange, check.Quorum) {
		r.status.Quorum = r.desk.quorum
		r.desk.startRules(check.Rules)
		r.status.Rules = check.Rules
	}
}

// cellRunInput is the cell activity's input for the current cell: its decision and, under
// sessionQuorumChange, every approval the cell has.
func (r *session) cellRunInput() contract.CellRunInput {
	b := r.ballots[r.current-1]
	in := contract.CellRunInput{Cell: r.cells[r.current-1], Chain: r.cell().Chain, Decision: *b.decision}
	if r.desk.quorumCounted() {
		in.Decisions = b.approvals
	}
	return in
}

// cellApprovalBytes bounds the status of one more approval of a cell (its record, with a
// reason of contract.MaxReasonBytes that JSON escapes at six bytes a byte), for the status
// budget of a cell that needs more than one.
const cellApprovalBytes = 1024 + 6*contract.MaxReasonBytes

// quorumBytes is what a cell's approvals past its first may add to the status.
func (r *session) quorumBytes() int {
	return max(r.desk.quorum-1, 0) * cellApprovalBytes
}
