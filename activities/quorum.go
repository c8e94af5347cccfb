package activities

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// checkEdit checks an edit against the run's start input, which the server wrote from the
// orchestrator's start: the edited request c differs from the started one in its code only, and
// the edit's original digest is the started request's (under c's effective limits and backend).
// So the result's edit names what the orchestrator sent, whatever the workflow says. A history
// that cannot be read is a retryable IntegrationError (nothing started); a mismatch is an
// ApprovalRefused.
func (a *Activities) checkEdit(ctx context.Context, h HistoryReader, info activity.Info, c guard.Checked, e *guard.Edit) error {
	mismatch := func(format string, args ...any) error {
		return refuse(runWho+": edit", guard.RefusedMismatch, format, args...)
	}
	ctx, cancel := context.WithTimeout(ctx, historyReadTimeout)
	defer cancel()
	iter := h.GetWorkflowHistory(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return &guard.IntegrationError{Op: "sandbox activity: read the run's start", Err: fmt.Errorf("the history of %s is empty", info.WorkflowExecution.ID)}
	}
	ev, err := iter.Next()
	if err != nil {
		return &guard.IntegrationError{Op: "sandbox activity: read the run's start", Err: err}
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	var start contract.Input
	if attrs == nil || a.dc.FromPayloads(attrs.GetInput(), &start) != nil {
		return mismatch("the run's first event is no RunCode start this host can read")
	}
	req := start.Request
	req.Code = c.Code
	if _, err := contract.ShownChecked(c.Summary(), req); err != nil {
		return mismatch("the request differs from the run's start in more than its code: %v", err)
	}
	orig := c
	orig.Code = start.Request.Code
	if d := guard.Digest(&orig); d != e.OriginalDigest {
		return mismatch("the edit names original digest %s but the run was started with %s", e.OriginalDigest, d)
	}
	return nil
}

// verifyApprovals verifies every approval of ad, as verifyFor does one, over b.signed, each
// claiming to be for b.digest, and counts them against this host's own policy, whatever the
// workflow accepted: at least Policy.QuorumFor(b.quorumOf), by distinct principals with distinct
// keys and distinct approval ids. A refusal is an ApprovalRefused.
func (a *Activities) verifyApprovals(ad *admission, b binding) ([]approval.Verified, error) {
	decisions := ad.decisions
	if decisions[0].ApprovalID != ad.decision.ApprovalID {
		return nil, refuse(ad.who, guard.RefusedMismatch, "the input's decision %s is not the first of its approvals (%s)", ad.decision.ApprovalID, decisions[0].ApprovalID)
	}
	if len(decisions) > guard.MaxQuorum {
		return nil, refuse(ad.who, guard.RefusedQuorum, "the input carries %d approvals, over %d", len(decisions), guard.MaxQuorum)
	}
	reviewers, err := a.loadReviewers()
	if err != nil {
		return nil, err
	}
	var vs []approval.Verified
	for i, d := range decisions {
		switch {
		case !d.Approve || d.ApprovalID == "":
			return nil, refuse(ad.who, guard.RefusedNoApproval, "approval %d of the input is no approving decision with an approval id", i+1)
		case d.Digest != b.digest:
			return nil, refuse(ad.who, guard.RefusedMismatch, "approval %d is for %s but the request carries %s", i+1, d.Digest, b.digest)
		}
		v, err := a.verifyFor(reviewers, ad.info, d, b.signed)
		if err != nil {
			return nil, err
		}
		for j, w := range vs {
			if w.Principal == v.Principal || w.Fingerprint == v.Fingerprint || decisions[j].ApprovalID == d.ApprovalID {
				return nil, refuse(ad.who, guard.RefusedQuorum, "approvals %d and %d are by the same reviewer (%s), key or approval id: a quorum counts distinct reviewers with distinct keys", j+1, i+1, v.Principal)
			}
		}
		vs = append(vs, v)
	}
	if need := a.policy.QuorumFor(&b.quorumOf); len(vs) < need {
		return nil, refuse(ad.who, guard.RefusedQuorum, "this host's policy needs %d approvals by distinct reviewers with distinct keys for this request (risky: %t); the input carries %d",
			need, guard.Risky(&b.quorumOf), len(vs))
	}
	if ad.policyHash, err = a.verifyRules(ad.who, b.rulesOf, vs); err != nil {
		return nil, err
	}
	return vs, nil
}

func approvedBy(vs []approval.Verified, principal string) bool {
	for _, v := range vs {
		if v.Principal == principal {
			return true
		}
	}
	return false
}

// approvalsOf is the result's list of the approvals a run or cell used (decisions), as this host
// verified them (vs).
func approvalsOf(decisions []contract.Decision, vs []approval.Verified) []guard.Approval {
	out := make([]guard.Approval, len(vs))
	for i, v := range vs {
		out[i] = guard.Approval{ApprovalID: decisions[i].ApprovalID, Reviewer: v.Principal, Fingerprint: v.Fingerprint}
	}
	return out
}

// addApprovals adds to a sandbox.finished event's data who approved the run (every approver of
// a quorum) and, for edited code, that it was edited, by whom, and the original digest.
func addApprovals(d map[string]any, res guard.Result) {
	approvers := make([]string, len(res.Approvals))
	for i, ap := range res.Approvals {
		approvers[i] = ap.Reviewer
	}
	d["approvals"] = approvers
	d["edit"] = res.Edit != nil
	if res.Edit != nil {
		d["editor"], d["original_digest"] = res.Edit.Editor, res.Edit.OriginalDigest
	}
}

// validity is what a claim checks again of its approvals right before the code starts.
type validity interface {
	StillValid(now time.Time) error
}

// allValid is every approval of a quorum: each must still be valid.
type allValid []approval.Verified

func (vs allValid) StillValid(now time.Time) error {
	for _, v := range vs {
		if err := v.StillValid(now); err != nil {
			return err
		}
	}
	return nil
}

// cellQuorum is how many approvals this worker's policy needs for each cell of s (the session's
// network, egress and secrets decide; every cell has them).
func (a *Activities) cellQuorum(s guard.CheckedSession) int {
	c := s.CellChecked(guard.Cell{Index: 1, Language: guard.Python})
	return a.policy.QuorumFor(&c)
}
