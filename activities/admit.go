package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/tracing"
	"github.com/sandboxflow/sandboxflow/rules"
)

// Admission: before anything runs, the sandbox host admits what an activity asks it to run, a
// run's request or a session's cell, through the same steps (a run is the one-cell case):
//
//   - precheck: a first attempt of the activity, with an approving decision, for what this host
//     checked or keeps of its subject (subject.bind: the digest binding); no key or history read;
//   - verify: every approval verifies on this host, for the activity's own workflow id, run id and
//     task queue and the digest bind returned, by a quorum of distinct reviewers under this host's
//     own policy (verifyApprovals), and says what the subject asks besides (subject.approved);
//   - claim: the subject is taken for this activity (subject.use) and its approval claimed in the
//     run's history (claimApproval), so that it runs once: per run, or per cell index.
//
// Every refusal is a guard.ApprovalRefused (nothing ran) but a later attempt's (an
// IntegrationError whose code may have started) and those of a lost record (SandboxLost) or an
// unreadable history or unsent claim (a retryable IntegrationError).

// The activities as admission's refusals name them.
const (
	runWho  = "sandbox activity"
	cellWho = "cell activity"
)

// admission is one activity's request to run its subject.
type admission struct {
	who  string // the activity, as its refusals name it
	info activity.Info
	// decision is the input's decision, which must be the first of decisions: every approval
	// the input carries (Decisions, or Decision alone in inputs recorded before quorums).
	decision  contract.Decision
	decisions []contract.Decision
	cell      int // the index the claim names; 0 for a run
	subject   subject
	// beforeClaim, when not nil, gets the claim before it is sent (claimApproval).
	beforeClaim func(*claim)
	// policyHash is the hash of the policy rules verifyApprovals applied ("" without any).
	policyHash string
}

// subject is what differs between admitting a run and a session's cell.
type subject interface {
	// bind checks the input's decision d, before any key or history is read, against what this
	// host checked or keeps of the subject, and returns what its approvals must bind.
	bind(d contract.Decision) (binding, error)
	// approved checks what the verified approvals vs must say besides their quorum.
	approved(vs []approval.Verified) error
	// use is what the subject needs right before its claim is sent, its approvals verified: a
	// run's edit checked against the run's start (which reads the history), a cell's index and
	// approvals recorded as used.
	use(ctx context.Context) error
}

// binding is what every approval of an admission must bind, as this host holds it.
type binding struct {
	digest string // each approval must be for it
	signed string // each signature must be over it, which this host computed
	// quorumOf is the request this host's policy counts the approvals of (Policy.QuorumFor).
	quorumOf guard.Checked
	// rulesOf is what this host's policy rules read of the subject.
	rulesOf rules.Input
}

// decisionsOf is every approval an input carries: all, or first alone in inputs recorded before
// quorums.
func decisionsOf(first contract.Decision, all []contract.Decision) []contract.Decision {
	if len(all) == 0 {
		return []contract.Decision{first}
	}
	return all
}

// refuse is an admission's refusal, an ApprovalRefused whose message names who.
func refuse(who string, reason guard.RefusedReason, format string, args ...any) error {
	return &guard.ApprovalRefused{Reason: reason, Msg: who + ": " + fmt.Sprintf(format, args...)}
}

// verifyAdmission is the part of admission that reads no history: precheck, then every approval
// verified and counted against this host's own policy (verifyApprovals), then what the subject
// asks of them. It returns the verified approvals, the decision's first.
func (a *Activities) verifyAdmission(ad *admission) ([]approval.Verified, error) {
	b, err := precheck(ad)
	if err != nil {
		return nil, err
	}
	vs, err := a.verifyApprovals(ad, b)
	if err != nil {
		return nil, err
	}
	if err := ad.subject.approved(vs); err != nil {
		return nil, err
	}
	return vs, nil
}

// precheck is admission's first step, which needs neither the reviewers' keys nor the history:
// only a first attempt, of an approving decision, for what the subject binds.
func precheck(ad *admission) (binding, error) {
	switch {
	case ad.info.Attempt > 1:
		return binding{}, &guard.IntegrationError{
			Op:                 fmt.Sprintf("%s attempt %d", ad.who, ad.info.Attempt),
			Err:                fmt.Errorf("refused: an earlier attempt may have started the code; the approval was used"),
			CodeMayHaveStarted: true,
		}
	case !ad.decision.Approve || ad.decision.ApprovalID == "":
		return binding{}, refuse(ad.who, guard.RefusedNoApproval, "the input carries no approving decision with an approval id")
	}
	return ad.subject.bind(ad.decision)
}

// admit is admission's last step, for approvals vs that verifyAdmission verified: the subject
// taken for the activity, then its approval claimed in the run's history. It returns the claim.
func (a *Activities) admit(ctx context.Context, ad *admission, vs []approval.Verified) (*claim, error) {
	if err := ad.subject.use(ctx); err != nil {
		return nil, err
	}
	_, span := tracing.Start(ctx, tracing.SpanClaim)
	cl, err := claimApproval(ctx, a.historyOf(ctx), ad.info, ad.cell, ad.decision.ApprovalID, allValid(vs), ad.beforeClaim)
	endSpan(span, err)
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// runSubject is a run's request c (in's, owned by the activity) as subject: its approvals bind the
// digest the check recorded, and are signed over the request received (edited or not); an edit
// names one of the approvers and is checked against the run's start; the claim is read back from
// the history.
type runSubject struct {
	a    *Activities
	info activity.Info
	c    guard.Checked
	in   contract.RunInput
}

// runAdmission is the admission of the sandbox activity info names to run c, in's request.
func (a *Activities) runAdmission(info activity.Info, c guard.Checked, in contract.RunInput) *admission {
	return &admission{who: runWho, info: info, decision: in.Decision, decisions: decisionsOf(in.Decision, in.Decisions),
		subject: runSubject{a: a, info: info, c: c, in: in}}
}

func (s runSubject) bind(d contract.Decision) (binding, error) {
	if d.Digest != s.c.Digest {
		return binding{}, refuse(runWho, guard.RefusedMismatch, "the approval is for %s but the request carries %s", d.Digest, s.c.Digest)
	}
	return binding{digest: s.c.Digest, signed: guard.Digest(&s.c), quorumOf: s.c, rulesOf: rules.ForRun(&s.c)}, nil
}

// approved checks that an edit names the digest the approvers signed and one of them as its
// editor.
func (s runSubject) approved(vs []approval.Verified) error {
	e := s.in.Edit
	switch {
	case e == nil:
	case e.Digest != guard.Digest(&s.c):
		return refuse(runWho, guard.RefusedMismatch, "the edit names digest %s but the request carries %s", e.Digest, guard.Digest(&s.c))
	case !approvedBy(vs, e.Editor):
		return refuse(runWho, guard.RefusedQuorum, "the edit names %q as its editor, who is none of the approvers", e.Editor)
	}
	return nil
}

// use checks an edit against the run's start (checkEdit).
func (s runSubject) use(ctx context.Context) error {
	if s.in.Edit == nil {
		return nil
	}
	return s.a.checkEdit(ctx, s.a.historyOf(ctx), s.info, s.c, s.in.Edit)
}

// cellSubject is a session's cell (in's) in the sandbox hs this host keeps, as subject: its
// approvals bind the cell's digest as this host computes it (its own settings digest, the index,
// the code digest and the chain over the results it returned), and the host's own record of the
// sandbox makes the cell run once: an index above every index it admitted and approval ids it
// never used, both recorded as used from the claim's sending on. hs.mu is held.
type cellSubject struct {
	a   *Activities
	hs  *hostSandbox
	in  contract.CellRunInput
	ids []string // every approval's id
}

// cellAdmission is the admission of the cell activity info names to run in's cell in hs.
func (a *Activities) cellAdmission(info activity.Info, hs *hostSandbox, in contract.CellRunInput) *admission {
	ds := decisionsOf(in.Decision, in.Decisions)
	return &admission{who: cellWho, info: info, decision: in.Decision, decisions: ds,
		cell: in.Cell.Index, subject: cellSubject{a: a, hs: hs, in: in, ids: approvalIDs(ds)}}
}

func (s cellSubject) bind(d contract.Decision) (binding, error) {
	hs, in := s.hs, s.in
	if hs.unknown {
		return binding{}, &guard.SandboxLost{Msg: "an earlier cell's outcome is unknown; the sandbox takes no more cells"}
	}
	session := hs.box.Session()
	cell, err := s.a.policy.CheckCell(session, in.Cell.Index, in.Cell.Language, in.Cell.Code, in.Cell.Packages...)
	if err != nil {
		return binding{}, &guard.ApprovalRefused{Reason: guard.RefusedMismatch, Msg: cellWho + ": the cell does not pass this host's check", Err: err}
	}
	switch {
	case !cell.Equal(in.Cell):
		return binding{}, refuse(cellWho, guard.RefusedMismatch, "the cell carries code digest %s but its code is %s", in.Cell.CodeDigest, cell.CodeDigest)
	case cell.Index <= hs.last:
		return binding{}, refuse(cellWho, guard.RefusedAlreadyUsed, "cell %d is not above cell %d, the last this sandbox admitted", cell.Index, hs.last)
	case usedIn(hs.used, s.ids) != "":
		return binding{}, refuse(cellWho, guard.RefusedAlreadyUsed, "approval %s was already used in this sandbox; an approval runs one cell once", usedIn(hs.used, s.ids))
	case in.Chain != hs.chain:
		return binding{}, refuse(cellWho, guard.RefusedMismatch, "the cell's chain %s is not this sandbox's %s (the cells before it are not the ones that ran here)", in.Chain, hs.chain)
	}
	digest := guard.CellDigest(session.Digest, cell.Index, cell.CodeDigest, hs.chain)
	if d.Digest != digest {
		return binding{}, refuse(cellWho, guard.RefusedMismatch, "the approval is for %s but the cell's digest here is %s", d.Digest, digest)
	}
	return binding{digest: digest, signed: digest, quorumOf: session.CellChecked(cell),
		rulesOf: rules.ForCell(&session, cell.Index, cell.Language, cell.Code)}, nil
}

func (cellSubject) approved([]approval.Verified) error { return nil }

// use records the cell's index and approvals as used: from the claim's sending on, whatever its
// outcome, since the workflow never sends a cell again, and a claim that may stand unreleased in
// the history is then never followed by another start for the same cell or approval.
func (s cellSubject) use(context.Context) error {
	s.hs.last = s.in.Cell.Index
	for _, id := range s.ids {
		s.hs.used[id] = true
	}
	return nil
}

// approvalIDs are the approval ids of decisions.
func approvalIDs(decisions []contract.Decision) []string {
	ids := make([]string, len(decisions))
	for i, d := range decisions {
		ids[i] = d.ApprovalID
	}
	return ids
}

// usedIn is the first of ids that used holds, or "".
func usedIn(used map[string]bool, ids []string) string {
	for _, id := range ids {
		if used[id] {
			return id
		}
	}
	return ""
}
