package client

import (
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// auditEdits is what an audit reads of a run's edit (issue 30): the decide updates that carry an
// edit, the checks of edited requests (the local activity markers after the run's own check),
// and the edit whose update completed with success, which the workflow took as the run's
// request. The audit then records the request that ran, so that its digest is the receipt's.
type auditEdits struct {
	pending map[string]contract.Decision // update id → an edit's decision
	checks  []guard.Checked
	taken   *contract.Decision
}

func (e *auditEdits) accepted(updateID string, d contract.Decision) {
	if d.Edit == nil {
		return
	}
	if e.pending == nil {
		e.pending = map[string]contract.Decision{}
	}
	e.pending[updateID] = d
}

func (e *auditEdits) completed(updateID string) {
	if d, ok := e.pending[updateID]; ok && e.taken == nil {
		e.taken = &d
	}
}

func (e *auditEdits) check(dc converter.DataConverter, result *commonpb.Payloads) {
	var cr contract.CheckResult
	if dc.FromPayloads(result, &cr) == nil && cr.Checked.Digest != "" {
		e.checks = append(e.checks, cr.Checked)
	}
}

// ran is the checked request that ran: the edited one when an edit was taken and its check is in
// the history, else checked (the run's own check).
func (e *auditEdits) ran(checked guard.Checked) guard.Checked {
	if e.taken == nil || e.taken.Edit.OriginalDigest != checked.Digest {
		return checked
	}
	for _, c := range e.checks {
		if c.Digest == e.taken.Digest && c.Code == e.taken.Edit.Code {
			return c
		}
	}
	return checked
}

// editedRequest checks a record whose accepted decision is edit: the checked request is the
// started request with the edit's code and nothing else changed, and the edit is of the started
// request's digest (recomputed: the checked request with the started code).
func editedRequest(rec contract.AuditRecord, edit contract.DecisionEdit) error {
	if edit.Code != rec.Checked.Code {
		return errors.New("the accepted decision's edited code is not the checked code")
	}
	req := rec.Request
	req.Code = edit.Code
	if err := sameRequest(req, rec.Checked); err != nil {
		return fmt.Errorf("the edited request: %w", err)
	}
	original := rec.Checked
	original.Code = rec.Request.Code
	if got := guard.Digest(&original); got != edit.OriginalDigest {
		return fmt.Errorf("the edit is of digest %s but the started request's is %s", edit.OriginalDigest, got)
	}
	return nil
}

// receiptApprovalsSigned checks every approval the receipt names (a quorum's are several): the
// record holds a decision with its approval id whose signature verifies against reviewers, over
// this run's statement, by the key the receipt names.
func receiptApprovalsSigned(rec contract.AuditRecord, reviewers *approval.Reviewers, st receipt.Statement) error {
	for _, a := range st.Approvals {
		found := false
		for _, d := range rec.Decisions {
			if d.Decision.ApprovalID != a.ID || !d.Decision.Approve {
				continue
			}
			v, err := approval.Verify(reviewers, statementFields(rec, d.Decision), d.Decision.Proof(), d.Time)
			if err == nil && v.Fingerprint == a.Fingerprint {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("the receipt names approval %s by key %s, which no decision in the record signs for this run", a.ID, a.Fingerprint)
		}
	}
	return nil
}
