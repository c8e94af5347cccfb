package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// quorumChange is the change id of quorums and edits (issue 30): runs recorded before it take
// the first valid decision and no edit, as they did; runs after it count approvals up to the
// quorum their check recorded and take a reviewer's edit of the code.
const quorumChange = "quorum-v1"

// editState is what a run keeps of its edit (its desk keeps its quorum, its ballot its
// approvals).
type editState struct {
	// request is the request the run was started with, which an edit changes the code of.
	request guard.Request
	// edit is the accepted edit, if any; editing is true while an edit's check runs.
	edit    *guard.Edit
	editing bool
}

// startQuorum fixes the run's quorum from its check (recorded in history, so it replays) behind
// quorumChange.
func (r *runCode) startQuorum(ctx workflow.Context, in contract.Input, check contract.CheckResult) {
	if !r.desk.startQuorum(ctx, quorumChange, check.Quorum) {
		return
	}
	r.desk.startRules(check.Rules)
	r.status.Rules = check.Rules
	r.status.Missing = guard.Missing(r.desk.groups, nil)
	r.request = in.Request
	r.status.Quorum = r.desk.quorum
	r.memoCount(ctx)
}

// memoCount keeps the run's approvals had and needed in its memo (contract.MemoApprovals), which
// visibility lists with the run.
func (r *runCode) memoCount(ctx workflow.Context) {
	count := contract.ApprovalCount{Approvals: len(r.approvals), Quorum: r.desk.quorum}
	if err := workflow.UpsertMemo(ctx, map[string]any{contract.MemoApprovals: count}); err != nil {
		workflow.GetLogger(ctx).Warn("memo of approvals not set", "error", err.Error())
	}
}

// withApprovals adds the run's approvals and its edit to the sandbox activity's input.
func (r *runCode) withApprovals(in contract.RunInput) contract.RunInput {
	if r.desk.quorumCounted() {
		in.Decisions = r.approvals
		in.Edit = r.edit
	}
	return in
}

// editRefusal says why an edit cannot be taken now, or nil; the signature is verified apart.
func (r *runCode) editRefusal(d contract.Decision) *contract.Rejection {
	reject := func(format string, args ...any) *contract.Rejection {
		return &contract.Rejection{Reason: contract.RejectEdit, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case !r.desk.quorumCounted():
		return reject("this run was checked by a worker without edits: approve or deny it as it is")
	case r.edit != nil:
		return reject("the code was already edited by %s: approve or deny the edited code (digest %s)", r.edit.Editor, r.edit.Digest)
	case r.editing:
		return reject("another edit is being checked: read the run again")
	}
	return d.EditProblem(r.checked.Digest)
}

// cellEditRefusal refuses a session cell's decision that carries an edit (a run's, not a
// cell's): it would approve the cell as submitted, not the edit. Only the validator refuses it,
// so an accepted update of a recorded history replays as it ran.
func cellEditRefusal(cd contract.CellDecision) *contract.Rejection {
	if cd.Decision.Edit == nil {
		return nil
	}
	return &contract.Rejection{Reason: contract.RejectEdit, Msg: "a session's cells take no edits: submit the edited code as a cell of its own"}
}

// decideEdit is the update's handler for an approval of edited code: the edited request (the
// run's request with the edit's code) is checked against the policy in the check local activity,
// recorded in history; when the policy accepts it and its digest is the one the reviewer signed,
// it becomes the run's request, the approvals of the code before the edit stop counting, and
// the editor's approval is the first of the edited code. Otherwise the edit is refused, and the
// run still waits for the code as it was.
func (r *runCode) decideEdit(ctx workflow.Context, d contract.Decision) (contract.DecideResult, error) {
	refuse := func(rej *contract.Rejection) (contract.DecideResult, error) {
		r.desk.rejected(ctx, r.seat(), d, contract.ViaUpdate, rej, "edit", true)
		return contract.DecideResult{}, rej.Failure()
	}
	if _, rej := r.refusal(ctx, d); rej != nil {
		return refuse(rej)
	}
	r.editing = true
	req := r.request
	req.Code = d.Edit.Code
	check, err := r.check(ctx, contract.Input{Request: req})
	r.editing = false
	switch {
	case err != nil:
		return refuse(&contract.Rejection{Reason: contract.RejectEdit, Msg: "the policy refuses the edited request; the run still waits for the code as it was", Err: err})
	case check.Checked.Digest != d.Digest:
		return refuse(&contract.Rejection{Reason: contract.RejectEdit, Msg: fmt.Sprintf(
			"the edited request checks to digest %s but the decision signs %.80q; the run still waits for the code as it was", check.Checked.Digest, d.Digest)})
	}
	// The run may have moved on while the check ran: verify again against it as it is now.
	v, rej := r.refusal(ctx, d)
	if rej != nil {
		return refuse(rej)
	}
	r.edit = &guard.Edit{Editor: v.Principal, OriginalDigest: r.checked.Digest, Digest: check.Checked.Digest}
	r.checked = check.Checked
	r.desk.quorum = max(r.desk.quorum, check.Quorum)
	if check.Rules != nil {
		r.desk.groups = mergeGroups(r.desk.groups, check.Rules.Groups)
		r.status.Rules = check.Rules
	}
	r.approvals, r.status.Approvals = nil, nil
	r.status.Missing = guard.Missing(r.desk.groups, nil)
	r.memoCount(ctx)
	r.status.Request, r.status.Edit, r.status.Quorum = r.checked.Summary(), r.edit, r.desk.quorum
	if err := workflow.UpsertTypedSearchAttributes(ctx, contract.DigestKey.ValueSet(r.checked.Digest)); err != nil {
		return contract.DecideResult{}, fmt.Errorf("workflows: set search attribute %s: %w", contract.AttrDigest, err)
	}
	r.event(ctx, contract.EventApprovalEdited, "approval_id", d.ApprovalID, "editor", v.Principal,
		"original_digest", r.edit.OriginalDigest, "code_bytes", len(r.checked.Code))
	s := r.seat()
	r.desk.accept(ctx, s, d, v, contract.ViaUpdate)
	out, err := r.desk.answerWhenEnded(ctx, s, d.Wait, r.desk.result(s, d, v))
	return answerFor(d, out), err
}

// mergeGroups is every group of a and b, each needing the larger of its approvals: an edit's
// check never lowers what the run's first check asked.
func mergeGroups(a, b []guard.GroupNeed) []guard.GroupNeed {
	out := slices.Clone(a)
	for _, g := range b {
		i := slices.IndexFunc(out, func(h guard.GroupNeed) bool { return h.Group == g.Group })
		if i < 0 {
			out = append(out, g)
			continue
		}
		out[i].Approvals = max(out[i].Approvals, g.Approvals)
	}
	return out
}
