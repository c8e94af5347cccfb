package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// desk takes the decisions of either workflow: a run's, whose one seat is the run, and a
// session's, which has a seat for each cell. It owns what a decision goes through: the refusal
// of a seat that is decided or does not wait, the signature, duplicates and the quorum, the
// record, the events, and the answer of a decision that waits for its subject's end.
type desk struct {
	// reviewers are the keys the check recorded; statementVersion is the version of the
	// statement a reviewer signs.
	reviewers        *approval.Reviewers
	statementVersion int
	// quorumVersion is the version of the workflow's quorum change (workflow.DefaultVersion for
	// a history recorded before it); quorum is how many approvals a seat needs (1 before it).
	quorumVersion workflow.Version
	quorum        int
	// groups are the approvals the policy rules need from named groups (the check's record;
	// none in histories recorded before policy rules): a seat is approved once it has its
	// quorum and every group its approvals.
	groups []guard.GroupNeed
	// waiting counts the decisions whose answer waits for their subject's end.
	waiting int
}

// ballot is what a seat keeps of its decisions.
type ballot struct {
	// decision is the seat's decision once it is taken: a denial, or the first approval once the
	// quorum is met.
	decision *contract.Decision
	// approvals are the approvals counted so far, in order.
	approvals []contract.Decision
}

// seat is one subject at the desk, a run or a session's cell, as it is now. It points into the
// workflow's state, so it is made afresh for each decision and never kept across a yield.
type seat struct {
	// what names the subject in refusals ("run", "cell"); of says which it is in the refusal of
	// a seat already decided ("" for a run, " for cell 2").
	what, of string
	// tag are the event fields that name the subject (none for a run).
	tag []any
	// digest is what an approval signs (an edit signs its own), queue the sandbox task queue.
	digest, queue string
	// notWaiting is the refusal's text while the seat does not wait for a decision; "" while it
	// waits.
	notWaiting string
	*ballot
	// shown is the ballot as the workflow's status shows it: its decision and approvals.
	shown *contract.DecisionWait
	// editRefusal says why a decision's edit cannot be taken now, or nil; a seat without it
	// takes no edits and reads no decision's edit.
	editRefusal func(contract.Decision) *contract.Rejection
	// counted, if set, is told of each approval counted.
	counted func(workflow.Context)
	// event writes one of the workflow's events.
	event func(ctx workflow.Context, typ contract.EventType, kv ...any)
	// end is how a decision sent with Wait is answered once the subject has ended.
	end endAnswer
}

// endAnswer is how a seat answers a decision sent with Wait, once its subject has ended.
type endAnswer struct {
	// change is the change id of the wait: a history from before it answered at once.
	change string
	// startsOnly is set when only an approval that starts the subject waits (a run's); else
	// every decision taken does (a cell's).
	startsOnly bool
	// ended reports whether the subject has ended; answer adds what it ended with.
	ended  func() bool
	answer func(*contract.DecideResult)
	// acceptedOnCancel is set when a wait that the workflow's cancellation ends answers the
	// decision as accepted (a run's: its result is the workflow's); else it answers with the
	// cancellation.
	acceptedOnCancel bool
}

func (k *desk) quorumCounted() bool { return k.quorumVersion >= 1 }

// startQuorum fixes the quorum behind change, from the check's (recorded in history, so it
// replays), and reports whether approvals are counted: before change every seat takes its first
// valid decision.
func (k *desk) startQuorum(ctx workflow.Context, change string, quorum int) bool {
	k.quorumVersion = workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1)
	k.quorum = 1
	if !k.quorumCounted() {
		return false
	}
	k.quorum = max(quorum, 1)
	return true
}

// startRules takes the groups the check's policy rules need (none without rules, as in
// histories recorded before them: the record decides, so a replay decides the same).
func (k *desk) startRules(r *guard.RuleDecision) {
	if r != nil && k.quorumCounted() {
		k.groups = r.Groups
	}
}

// refusal returns who made d, or why d cannot be accepted for s now. It reads the workflow's
// state and never changes it, so an update's validator can use it; a seat that is decided or
// does not wait is refused before anything reads ctx. The signature is verified against the
// reviewer keys the check recorded, for this run (its workflow id and its run id, read afresh
// so that a reset run has its own), the seat's digest and sandbox task queue, at the
// workflow's time.
func (k *desk) refusal(ctx workflow.Context, s seat, d contract.Decision) (approval.Verified, *contract.Rejection) {
	if had := s.decision; had != nil {
		return approval.Verified{}, &contract.Rejection{Reason: contract.RejectAlreadyDecided,
			Msg: fmt.Sprintf("already decided: decision %s by %s was accepted%s", had.ApprovalID, had.Reviewer, s.of)}
	}
	if s.notWaiting != "" {
		return approval.Verified{}, &contract.Rejection{Reason: contract.RejectNotWaiting, Msg: s.notWaiting}
	}
	digest := s.digest
	if s.edits(d) {
		if rej := s.editRefusal(d); rej != nil {
			return approval.Verified{}, rej
		}
		digest = d.Digest // the edited request's, which its check must confirm (decideEdit)
	} else if rej := d.Problem(digest); rej != nil {
		return approval.Verified{}, rej
	}
	info := workflow.GetInfo(ctx)
	want := d.Fields(info.WorkflowExecution.ID, info.WorkflowExecution.RunID, digest, s.queue)
	want.Version = k.statementVersion
	// Verify is a pure function of its arguments (no clock, randomness or I/O); workflowcheck
	// flags it only for the reflection inside crypto/ecdsa's ASN.1 parsing.
	v, err := approval.Verify(k.reviewers, want, d.Proof(), workflow.Now(ctx)) //workflowcheck:ignore
	if err != nil {
		return approval.Verified{}, &contract.Rejection{Reason: contract.RejectOther, Err: err}
	}
	if rej := k.duplicate(s, d, v); rej != nil {
		return approval.Verified{}, rej
	}
	return v, nil
}

// edits reports whether d is an edit s takes.
func (s seat) edits(d contract.Decision) bool { return d.Edit != nil && s.editRefusal != nil }

// duplicate refuses an approval (verified as v) by a principal, a key or an approval id that the
// seat's approvals already hold: a quorum counts distinct reviewers with distinct keys. An edit
// starts the approvals afresh.
func (k *desk) duplicate(s seat, d contract.Decision, v approval.Verified) *contract.Rejection {
	if !d.Approve || s.edits(d) || !k.quorumCounted() {
		return nil
	}
	had := s.shown.Approvals
	for _, a := range had {
		var same string
		switch {
		case a.ApprovalID == d.ApprovalID:
			same = "approval id " + d.ApprovalID
		case a.Reviewer == v.Principal:
			same = "reviewer " + v.Principal
		case a.Fingerprint == v.Fingerprint:
			same = "key " + v.Fingerprint + " (which signed for " + a.Reviewer + ")"
		default:
			continue
		}
		return &contract.Rejection{Reason: contract.RejectDuplicate, Msg: fmt.Sprintf(
			"already approved by %s: this %s needs %d approvals by distinct reviewers with distinct keys and has %d; another reviewer must approve",
			same, s.what, k.quorum, len(had))}
	}
	return nil
}

// validate is a decide update's validator: it refuses a decision that cannot be accepted now
// and says why, logging the refusal (a validator's log line is its only trace, since a refused
// update is not recorded in history).
func (k *desk) validate(ctx workflow.Context, s seat, d contract.Decision) error {
	if _, rej := k.refusal(ctx, s, d); rej != nil {
		k.rejected(ctx, s, d, contract.ViaUpdate, rej)
		return rej.Failure()
	}
	return nil
}

// decide is a decide update's handler for a decision its validator let through. It verifies
// again (another decision may have been accepted since, and a reset run replays an accepted
// update without its validator, against its own, new run id), then accepts d and returns the
// update's answer.
func (k *desk) decide(ctx workflow.Context, s seat, d contract.Decision) (contract.DecideResult, *contract.Rejection) {
	v, rej := k.refusal(ctx, s, d)
	if rej != nil {
		k.rejected(ctx, s, d, contract.ViaUpdate, rej)
		return contract.DecideResult{}, rej
	}
	k.accept(ctx, s, d, v, contract.ViaUpdate)
	return k.result(s, d, v), nil
}

// accept records d, verified as v and sent via via, for s: a denial, or an approval before the
// quorum change, is the seat's decision; an approval after it is counted, and the first becomes
// the decision once the seat has its quorum.
func (k *desk) accept(ctx workflow.Context, s seat, d contract.Decision, v approval.Verified, via string) {
	d.Reviewer = v.Principal
	rec := contract.DecisionRecord{
		ApprovalID: d.ApprovalID, Approve: d.Approve, Reviewer: v.Principal, Reason: d.Reason,
		Digest: d.Digest, Via: via, Time: workflow.Now(ctx),
		Fingerprint: v.Fingerprint, KeyType: v.KeyType, Method: v.Method,
		Touched: v.Touched, UserVerified: v.UserVerified, Expires: v.Expires,
	}
	if !d.Approve || !k.quorumCounted() {
		s.decision, s.shown.Decision = &d, &rec
		return
	}
	s.approvals = append(s.approvals, d)
	s.shown.Approvals = append(s.shown.Approvals, rec)
	if s.counted != nil {
		s.counted(ctx)
	}
	missing := k.missing(s)
	s.shown.Missing = missing
	if len(s.approvals) < k.quorum || missing != nil {
		kv := []any{"approval_id", d.ApprovalID, "reviewer", d.Reviewer, "approvals", len(s.approvals), "quorum", k.quorum}
		if missing != nil {
			kv = append(kv, "missing", missing)
		}
		k.event(ctx, s, contract.EventApprovalCounted, kv...)
		return
	}
	first, firstRec := s.approvals[0], s.shown.Approvals[0]
	s.decision, s.shown.Decision = &first, &firstRec
}

// missing is what s's approvals lack of the groups' (guard.Missing), nil when nothing.
func (k *desk) missing(s seat) []string {
	if len(k.groups) == 0 {
		return nil
	}
	principals := make([]string, len(s.shown.Approvals))
	for i, a := range s.shown.Approvals {
		principals[i] = a.Reviewer
	}
	return guard.Missing(k.groups, principals)
}

// result is a decide update's answer for d, just accepted for s (verified as v).
func (k *desk) result(s seat, d contract.Decision, v approval.Verified) contract.DecideResult {
	res := contract.DecideResult{ApprovalID: d.ApprovalID, Approve: d.Approve, Reviewer: v.Principal, Digest: s.digest, State: contract.StatusRunning}
	switch {
	case !d.Approve:
		res.State = contract.StatusDenied
	case s.decision == nil:
		res.State = contract.StatusAwaitingApproval
	}
	if k.quorumCounted() {
		res.Approvals, res.Quorum = len(s.approvals), k.quorum
	}
	return res
}

// taken records s's decision d, just taken: the SandboxReviewer search attribute, and the event
// approval.denied or approval.granted.
func (k *desk) taken(ctx workflow.Context, s seat, d contract.Decision) error {
	if err := workflow.UpsertTypedSearchAttributes(ctx, contract.ReviewerKey.ValueSet(d.Reviewer)); err != nil {
		return fmt.Errorf("workflows: set search attribute %s: %w", contract.AttrReviewer, err)
	}
	if !d.Approve {
		k.event(ctx, s, contract.EventApprovalDenied, "approval_id", d.ApprovalID, "reviewer", d.Reviewer, "reason_bytes", len(d.Reason))
		return nil
	}
	k.event(ctx, s, contract.EventApprovalGranted, "approval_id", d.ApprovalID, "reviewer", d.Reviewer)
	return nil
}

// answerWhenEnded answers a decision accepted for s: at once, or, when it was sent with wait
// (and, for a run, started it), once the subject has ended, with what it ended with. The wait
// holds no command of its own (but its version marker); the workflow waits for every such
// answer before it completes, so the answer and the end are in the same workflow task.
func (k *desk) answerWhenEnded(ctx workflow.Context, s seat, wait bool, res contract.DecideResult) (contract.DecideResult, error) {
	w := s.end
	if !wait || w.startsOnly && res.State != contract.StatusRunning {
		return res, nil
	}
	if workflow.GetVersion(ctx, w.change, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return res, nil
	}
	k.waiting++
	defer func() { k.waiting-- }()
	if err := workflow.Await(ctx, w.ended); err != nil {
		if w.acceptedOnCancel {
			return res, nil
		}
		return res, err
	}
	w.answer(&res)
	return res, nil
}

// rejected logs the refusal rej of d for s, sent via via, with kv after the decision's fields.
func (k *desk) rejected(ctx workflow.Context, s seat, d contract.Decision, via string, rej *contract.Rejection, kv ...any) {
	fields := append([]any{"approval_id", d.ApprovalID, "reviewer", d.Reviewer, "approve", d.Approve, "via", via}, kv...)
	k.event(ctx, s, contract.EventApprovalRejected, append(fields, refusalKV(rej)...)...)
}

// event writes an event of s: the workflow's, with the fields that name s first.
func (k *desk) event(ctx workflow.Context, s seat, typ contract.EventType, kv ...any) {
	s.event(ctx, typ, append(append([]any{}, s.tag...), kv...)...)
}

// refusalKV is the log fields of a refusal: why, its typed reason ("rejection", a
// contract.RejectReason, which metrics reads), and for a signature the approval package's reason
// and field.
func refusalKV(rej *contract.Rejection) []any {
	kv := []any{"why", rej.Error(), "rejection", rej.Reason}
	var ref *approval.RefusalError
	if errors.As(rej, &ref) {
		kv = append(kv, "reason", string(ref.Reason))
		if ref.Field != "" {
			kv = append(kv, "field", ref.Field)
		}
	}
	return kv
}
