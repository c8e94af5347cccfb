package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// receiptChangeID versions the receipt check (issue 31): histories recorded before it replay
// without it.
const receiptChangeID = "receipt-v1"

// checkReceipt refuses a result whose receipt does not verify against the sandbox hosts' keys the
// check recorded (hosts), or that is not this run's (workflow id, run id, digest, the approval and
// the reviewer's key fingerprint the workflow accepted), or that differs from what the receipt
// signs. It is pure Go over recorded values, so it replays. Without recorded hosts (a worker
// without a hosts file, or a history from before receipts) the result is taken as it comes.
// A refusal is a *guard.ReceiptRefused, logged as receipt.refused.
func (r *runCode) checkReceipt(ctx workflow.Context, hosts *receipt.Hosts, res guard.Result, d contract.Decision) error {
	if workflow.GetVersion(ctx, receiptChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion || hosts == nil {
		return nil
	}
	if _, err := verifyResult(hosts, res, r.receiptExpect(d)); err != nil {
		r.event(ctx, contract.EventReceiptRefused, "approval_id", d.ApprovalID, "error", err.Error())
		return err
	}
	return nil
}

// receiptExpect is what a receipt of this run must name: its workflow id, run id and digest, and
// the approval d with the reviewer's key fingerprint the workflow accepted.
func (r *runCode) receiptExpect(d contract.Decision) receipt.Expect {
	want := receipt.Expect{WorkflowID: r.status.WorkflowID, RunID: r.status.RunID, Digest: r.checked.Digest,
		Approvals: []receipt.Approval{{ID: d.ApprovalID}}}
	if r.status.Decision != nil {
		want.Approvals[0].Fingerprint = r.status.Decision.Fingerprint
	}
	// Under a quorum the receipt must name every approval the workflow accepted, each with the
	// key that verified it here.
	for _, ap := range r.status.Approvals {
		if ap.ApprovalID != d.ApprovalID {
			want.Approvals = append(want.Approvals, receipt.Approval{ID: ap.ApprovalID, Fingerprint: ap.Fingerprint})
		}
	}
	return want
}

// verifyResult verifies res's receipt against hosts, checks that it is of the run want describes
// and that res is what it signs, and returns its statement. A refusal is a *guard.ReceiptRefused.
func verifyResult(hosts *receipt.Hosts, res guard.Result, want receipt.Expect) (receipt.Statement, error) {
	// Signature verification (ed25519, ecdsa) and encoding/json's reflection are deterministic;
	// workflowcheck cannot tell.
	st, err := receipt.Verify(hosts, res.Receipt) //workflowcheck:ignore
	if err == nil {
		err = receipt.CheckRun(st, want)
	}
	if err == nil {
		err = receipt.CheckResult(st, res)
	}
	return st, err
}

// cellExpect is what the receipt of cell st's result must name: the session's run, the cell's
// digest and index, the receipt of the cell before it, and every approval the workflow accepted.
func (r *session) cellExpect(st *contract.CellStatus) receipt.Expect {
	want := receipt.Expect{WorkflowID: r.status.WorkflowID, RunID: r.status.RunID, Digest: st.Digest,
		Cell: &receipt.Cell{Index: st.Cell, Previous: r.lastReceipt}}
	if st.Decision != nil {
		want.Approvals = []receipt.Approval{{ID: st.Decision.ApprovalID, Fingerprint: st.Decision.Fingerprint}}
		// Under a quorum the receipt must name every approval of the cell, as a run's.
		for _, ap := range st.Approvals {
			if ap.ApprovalID != st.Decision.ApprovalID {
				want.Approvals = append(want.Approvals, receipt.Approval{ID: ap.ApprovalID, Fingerprint: ap.Fingerprint})
			}
		}
	}
	return want
}

// checkCellReceipt is checkReceipt for a session's cell st: the receipt must also be for the
// cell's digest as the workflow computed it and its index, and chain to the receipt of the cell
// that ran before it. A refusal ends the session (the sandbox's state is unknown).
func (r *session) checkCellReceipt(ctx workflow.Context, res guard.Result, st *contract.CellStatus) error {
	if workflow.GetVersion(ctx, receiptChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion || r.hosts == nil {
		return nil
	}
	if _, err := verifyResult(r.hosts, res, r.cellExpect(st)); err != nil {
		r.event(ctx, contract.EventReceiptRefused, "cell", st.Cell, "error", err.Error())
		return err
	}
	r.lastReceipt = receipt.Hash(*res.Receipt)
	return nil
}
