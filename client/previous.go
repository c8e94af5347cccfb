package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// WithReviewersFile returns a Client like c that verifies the decision of a conversation's
// previous run (Changes) against the reviewers file at path (OpenSSH allowed_signers, read at
// each check; "": none, and every previous run is unverified), a passkey's only when it was made
// on the page of passkeyOrigin (the inbox's; "": passkey decisions do not verify). It shares c's
// connection.
func (c *Client) WithReviewersFile(path, passkeyOrigin string) *Client {
	d := *c
	d.owned = false
	d.reviewersFile, d.passkeyOrigin = path, passkeyOrigin
	return &d
}

// verifyPrevious checks what p, a conversation's previous run, says of its decision against its
// history and the reviewers file: the request its check recorded is the one it was started with
// (or its accepted edit), and its accepted decision, if any, carries a signature of a listed
// reviewer over its statement. Only then is p Verified, with the decision as its history
// records it; otherwise Unverified says why, and Outcome says nothing of its decision. A
// session's previous state is its workflow's word: its cells are verified on its own page.
func (c *Client) verifyPrevious(ctx context.Context, p *PreviousRun) {
	if p.Session {
		p.Unverified = "a session's state is its workflow's word; its cells are verified on its own page"
		return
	}
	if c.reviewersFile == "" {
		p.Unverified = "no reviewers file to check its decision against was given"
		return
	}
	reviewers, err := approval.LoadReviewers(c.reviewersFile)
	if err == nil {
		reviewers, err = reviewers.WithPasskeyOrigin(c.passkeyOrigin)
	}
	if err != nil {
		p.Unverified = err.Error()
		return
	}
	rec, err := c.Audit(ctx, p.WorkflowID, p.RunID)
	if err != nil {
		p.Unverified = err.Error()
		return
	}
	accepted, err := recordedDecision(rec, reviewers)
	if err != nil {
		p.Unverified = err.Error()
		return
	}
	switch {
	case accepted == nil && p.Decision != nil:
		p.Unverified = "its status names a decision its history does not record"
	case accepted != nil && (p.Decision == nil || p.Decision.Approve != accepted.Decision.Approve || p.Decision.ApprovalID != accepted.Decision.ApprovalID):
		p.Unverified = "its status's decision is not the one its history records"
	default:
		p.Verified = true
	}
}

// recordedDecision checks a RunCode run's record: its checked request is the one it was started
// with (or its accepted edit), its digest recomputes, and its accepted decision, if any, carries
// a signature that verifies against reviewers over the statement its fields make for this run.
// It returns that decision, with its reviewer as the signature verified it.
func recordedDecision(rec contract.AuditRecord, reviewers *approval.Reviewers) (*contract.AuditDecision, error) {
	accepted := acceptedDecision(rec)
	var err error
	if accepted != nil && accepted.Decision.Edit != nil {
		err = editedRequest(rec, *accepted.Decision.Edit)
	} else {
		err = sameRequest(rec.Request, rec.Checked)
	}
	if err == nil && guard.Digest(&rec.Checked) != rec.Checked.Digest {
		err = errors.New("its checked request's digest does not recompute")
	}
	if err != nil || accepted == nil {
		return nil, err
	}
	want := statementFields(rec, accepted.Decision)
	if stmt, err := want.Statement(); err != nil || string(stmt) != accepted.Statement {
		return nil, fmt.Errorf("the statement recorded for its decision %s is not the one its fields make for it", accepted.Decision.ApprovalID)
	}
	v, err := approval.Verify(reviewers, want, accepted.Decision.Proof(), accepted.Time)
	if err != nil {
		return nil, fmt.Errorf("its decision %s: %w", accepted.Decision.ApprovalID, err)
	}
	d := *accepted
	d.Decision.Reviewer = v.Principal
	return &d, nil
}
