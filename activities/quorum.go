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

// verifyQuorum verifies, on the sandbox host, every approval the input carries (Decisions, or
// Decision alone in inputs recorded before quorums) as verifyFor does one, and counts them against
// this host's own policy: at least Policy.QuorumFor of the request it received, by distinct
// principals with distinct keys and distinct approval ids, whatever the workflow accepted. An
// edit (in.Edit) must name one of the approvers as its editor and the digest they signed. A
// refusal is an ApprovalRefused.
func (a *Activities) verifyQuorum(info activity.Info, c guard.Checked, in contract.RunInput) ([]approval.Verified, error) {
	refuse := func(reason guard.RefusedReason, format string, args ...any) error {
		return &guard.ApprovalRefused{Reason: reason, Msg: "sandbox activity: " + fmt.Sprintf(format, args...)}
	}
	digest := guard.Digest(&c)
	vs, err := a.verifyApprovals("sandbox activity", info, in.Decision, in.Decisions, c.Digest, digest, &c)
	if err != nil {
		return nil, err
	}
	if e := in.Edit; e != nil {
		if e.Digest != digest {
			return nil, refuse(guard.RefusedMismatch, "the edit names digest %s but the request carries %s", e.Digest, digest)
		}
		if !approvedBy(vs, e.Editor) {
			return nil, refuse(guard.RefusedQuorum, "the edit names %q as its editor, who is none of the approvers", e.Editor)
		}
	}
	return vs, nil
}

// checkEdit checks an edit against the run's start input, which the server wrote from the
// orchestrator's start: the edited request c differs from the started one in its code only, and
// the edit's original digest is the started request's (under c's effective limits and backend).
// So the result's edit names what the orchestrator sent, whatever the workflow says. A history
// that cannot be read is a retryable IntegrationError (nothing started); a mismatch is an
// ApprovalRefused.
func (a *Activities) checkEdit(ctx context.Context, h HistoryReader, info activity.Info, c guard.Checked, e *guard.Edit) error {
	refuse := func(format string, args ...any) error {
		return &guard.ApprovalRefused{Reason: guard.RefusedMismatch, Msg: "sandbox activity: edit: " + fmt.Sprintf(format, args...)}
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
		return refuse("the run's first event is no RunCode start this host can read")
	}
	req := start.Request
	req.Code = c.Code
	if _, err := contract.ShownChecked(c.Summary(), req); err != nil {
		return refuse("the request differs from the run's start in more than its code: %v", err)
	}
	orig := c
	orig.Code = start.Request.Code
	if d := guard.Digest(&orig); d != e.OriginalDigest {
		return refuse("the edit names original digest %s but the run was started with %s", e.OriginalDigest, d)
	}
	return nil
}

// verifyApprovals verifies every approval of decisions (or first alone, in inputs recorded
// before quorums) over digest, each claiming to be for claimed, and counts them against this
// host's policy for c: at least Policy.QuorumFor(c), by distinct principals with distinct keys and
// distinct approval ids. who names the activity in a refusal, an ApprovalRefused.
func (a *Activities) verifyApprovals(who string, info activity.Info, first contract.Decision, decisions []contract.Decision, claimed, digest string, c *guard.Checked) ([]approval.Verified, error) {
	refuse := func(reason guard.RefusedReason, format string, args ...any) error {
		return &guard.ApprovalRefused{Reason: reason, Msg: who + ": " + fmt.Sprintf(format, args...)}
	}
	if len(decisions) == 0 {
		decisions = []contract.Decision{first}
	}
	if decisions[0].ApprovalID != first.ApprovalID {
		return nil, refuse(guard.RefusedMismatch, "the input's decision %s is not the first of its approvals (%s)", first.ApprovalID, decisions[0].ApprovalID)
	}
	if len(decisions) > guard.MaxQuorum {
		return nil, refuse(guard.RefusedQuorum, "the input carries %d approvals, over %d", len(decisions), guard.MaxQuorum)
	}
	reviewers, err := a.loadReviewers()
	if err != nil {
		return nil, err
	}
	var vs []approval.Verified
	for i, d := range decisions {
		switch {
		case !d.Approve || d.ApprovalID == "":
			return nil, refuse(guard.RefusedNoApproval, "approval %d of the input is no approving decision with an approval id", i+1)
		case d.Digest != claimed:
			return nil, refuse(guard.RefusedMismatch, "approval %d is for %s but the request carries %s", i+1, d.Digest, claimed)
		}
		v, err := a.verifyFor(reviewers, info, d, digest)
		if err != nil {
			return nil, err
		}
		for j, w := range vs {
			if w.Principal == v.Principal || w.Fingerprint == v.Fingerprint || decisions[j].ApprovalID == d.ApprovalID {
				return nil, refuse(guard.RefusedQuorum, "approvals %d and %d are by the same reviewer (%s), key or approval id: a quorum counts distinct reviewers with distinct keys", j+1, i+1, v.Principal)
			}
		}
		vs = append(vs, v)
	}
	if need := a.policy.QuorumFor(c); len(vs) < need {
		return nil, refuse(guard.RefusedQuorum, "this host's policy needs %d approvals by distinct reviewers with distinct keys for this request (risky: %t); the input carries %d",
			need, guard.Risky(c), len(vs))
	}
	return vs, nil
}

// verifyCellApprovals is verifyApprovals for a session's cell (in) that this host computed the
// digest of: every approval must verify over it and be counted against this host's policy for
// the session's cells.
func (a *Activities) verifyCellApprovals(info activity.Info, s guard.CheckedSession, in contract.CellRunInput, digest string) ([]approval.Verified, error) {
	c := s.CellChecked(in.Cell)
	return a.verifyApprovals("cell activity", info, in.Decision, in.Decisions, digest, digest, &c)
}

// cellApprovalIDs are the approval ids a cell's input carries (its decision's alone, in inputs
// recorded before session quorums).
func cellApprovalIDs(in contract.CellRunInput) []string {
	if len(in.Decisions) == 0 {
		return []string{in.Decision.ApprovalID}
	}
	ids := make([]string, len(in.Decisions))
	for i, d := range in.Decisions {
		ids[i] = d.ApprovalID
	}
	return ids
}

func approvedBy(vs []approval.Verified, principal string) bool {
	for _, v := range vs {
		if v.Principal == principal {
			return true
		}
	}
	return false
}

// approvalsOf is the result's list of the approvals a run used, as this host verified them.
func approvalsOf(in contract.RunInput, vs []approval.Verified) []guard.Approval {
	decisions := in.Decisions
	if len(decisions) == 0 {
		decisions = []contract.Decision{in.Decision}
	}
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
