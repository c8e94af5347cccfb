package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
)

// DefaultStatementLifetime is how long a statement made by Statement may be used, unless the
// run's approval deadline comes first.
const DefaultStatementLifetime = time.Hour

// ErrStatementVersion is why StatementFor (and Statement, the inbox, starter statement and
// approve) refuse to make an approval for a run whose status asks for a statement version older
// than approval.StatementVersion: sandbox hosts refuse such approvals, which sign no principal;
// do not approve (deny it, or start the run again).
var ErrStatementVersion = errors.New("sandbox hosts refuse approvals of that statement version, which names no reviewer: do not approve; deny it or start the run again")

// EnvReviewerKey names the environment variable that holds the reviewer's key file when
// --key is not given.
const EnvReviewerKey = "SANDBOXFLOW_REVIEWER_KEY"

// EnvReviewer names the environment variable that holds the principal a reviewer signs as when
// --reviewer is not given.
const EnvReviewer = "SANDBOXFLOW_REVIEWER"

// StatementOptions adjust the statement a reviewer signs.
type StatementOptions struct {
	// Deny makes a statement that denies the run. Optional: defaults to approving it.
	Deny bool
	// ApprovalID is the decision's id. Optional: defaults to a random UUID.
	ApprovalID string
	// Expires is when the signature stops counting. Optional: defaults to an hour from now or
	// the run's approval deadline, whichever is first.
	Expires time.Time
	// Reviewer is the principal the reviewer signs as, named by the statement of a run checked
	// by this version (statement version 2; runs checked before it ignore it). Optional:
	// defaults to Options.Reviewer, else $SANDBOXFLOW_REVIEWER (EnvReviewer), else the
	// development reviewer's name (approval.DefaultPrincipal: $USER, or "reviewer"). A name the
	// key may not sign for is refused by the workflow (principal_mismatch).
	Reviewer string
}

// Statement returns the statement a reviewer signs to decide on t, with the decision, a fresh
// approval id and an expiry; Fields.Statement gives the exact bytes to sign (what
// `starter statement` prints). A run's names its workflow id, run id, digest and sandbox task
// queue as the run's status reports them; it fails when t.ID is not a RunCode run
// (*NotRunCodeError), the run does not wait for a decision, or (for an approval) the status's
// digest is not the digest of what it shows with the request the run was started with
// (contract.ShownChecked). A cell's is made as CellStatementFor makes it, from the session read
// (ReadSession) and, for an approval, checked against its start (CheckSessionShown).
func (c *Client) Statement(ctx context.Context, t Target, opts StatementOptions) (approval.Fields, error) {
	f, _, err := c.statementOf(ctx, t, opts)
	return f, err
}

// statementOf is Statement, with a cell's session status it was made from (for a run, none).
func (c *Client) statementOf(ctx context.Context, t Target, opts StatementOptions) (approval.Fields, contract.SessionStatus, error) {
	opts.Reviewer = cmp.Or(opts.Reviewer, c.reviewer, os.Getenv(EnvReviewer), approval.DefaultPrincipal())
	if t.IsCell() {
		return c.cellStatement(ctx, t.ID, t.Cell, opts)
	}
	f, err := c.runStatement(ctx, t.ID, opts)
	return f, contract.SessionStatus{}, err
}

// runStatement is Statement of the RunCode run workflowID, for opts' reviewer.
func (c *Client) runStatement(ctx context.Context, workflowID string, opts StatementOptions) (approval.Fields, error) {
	// The status and the start are read at once, both of the run the server calls current: the
	// start event, which the server wrote, names the workflow type and the run it was written for
	// (its original_execution_run_id), and when the status names that same run nothing more is
	// asked. Otherwise (a reset run, whose start names the run it was reset from; a status of
	// another run; a failed read) the run is described and the status and start are read of the
	// run described, as a reviewer's door always did.
	var (
		in    contract.Input
		inRun string
		inErr error
	)
	waitIn := alongside(func() error {
		in, inRun, inErr = c.runCodeStart(ctx, workflowID)
		return nil
	})
	st, err := c.RunStatus(ctx, workflowID, "")
	_ = waitIn()
	var wrongType *NotRunCodeError
	if errors.As(inErr, &wrongType) {
		return approval.Fields{}, wrongType
	}
	runID := inRun
	if inErr != nil || err != nil || st.RunID == "" || st.RunID != inRun {
		info, derr := c.describeRunCode(ctx, workflowID)
		if derr != nil {
			return approval.Fields{}, derr
		}
		runID = info.GetExecution().GetRunId()
		if err != nil || st.RunID != runID {
			st, err = c.RunStatus(ctx, workflowID, runID)
		}
		if inErr != nil || inRun != runID {
			in, inErr = c.StartInput(ctx, workflowID, runID)
		}
	}
	if err != nil {
		return approval.Fields{}, err
	}
	if st.WorkflowID == "" {
		st.WorkflowID = workflowID
	}
	if st.RunID == "" {
		st.RunID = runID
	}
	if st.WorkflowID != workflowID || st.RunID != runID {
		return approval.Fields{}, fmt.Errorf("client: the status of %s (run %s) names %s (run %s): do not approve; the run's workflow worker may not be sandboxflow's",
			workflowID, runID, st.WorkflowID, st.RunID)
	}
	if st.State != contract.StatusAwaitingApproval {
		return approval.Fields{}, fmt.Errorf("client: %s does not wait for a decision: it is %s", workflowID, st.State)
	}
	if !opts.Deny {
		if inErr != nil {
			return approval.Fields{}, inErr
		}
		if err := CheckShown(st, in); err != nil {
			return approval.Fields{}, fmt.Errorf("client: %s: %w", workflowID, err)
		}
	}
	return StatementFor(st, opts, time.Now())
}

// StatementFor returns the statement a reviewer signs to decide on the run st is the status of
// (as Statement does, without reading anything): st's workflow id, run id, digest and sandbox
// task queue, the decision, opts' approval id (a fresh one by default) and expiry (by default
// DefaultStatementLifetime after now, or st's approval deadline when that comes first) and
// reviewer (required for a run whose statement names it). It fails when st does not wait for a
// decision. For an approval, the caller must have checked st
// against the run's start (CheckShown).
func StatementFor(st contract.Status, opts StatementOptions, now time.Time) (approval.Fields, error) {
	if st.State != contract.StatusAwaitingApproval {
		return approval.Fields{}, fmt.Errorf("client: %s does not wait for a decision: it is %s", st.WorkflowID, st.State)
	}
	f := approval.Fields{
		Version:    max(st.StatementVersion, approval.StatementVersion1),
		WorkflowID: st.WorkflowID, RunID: st.RunID, Digest: st.Request.Digest, Approve: !opts.Deny,
		ApprovalID: opts.ApprovalID, SandboxTaskQueue: st.SandboxTaskQueue, Expires: opts.Expires,
	}
	if !opts.Deny && f.Version < approval.StatementVersion {
		// Sandbox hosts verify every approval as the current version (the principal signed),
		// so a version 1 approval can never run anything: a status asking for one is a run
		// from before version 2 or a workflow worker not sandboxflow's, downgrading what the
		// reviewer signs to a statement that names nobody.
		return approval.Fields{}, fmt.Errorf("client: %s asks for an approval of statement version %d: %w", st.WorkflowID, f.Version, ErrStatementVersion)
	}
	if f.Version >= approval.StatementVersion2 {
		if opts.Reviewer == "" {
			return approval.Fields{}, errors.New("client: the run's statement names the reviewer (statement version 2): give StatementOptions.Reviewer")
		}
		f.Reviewer = opts.Reviewer
	}
	if f.ApprovalID == "" {
		f.ApprovalID = uuid.NewString()
	}
	if f.Expires.IsZero() {
		f.Expires = now.Add(DefaultStatementLifetime)
		if !st.ApprovalDeadline.IsZero() && st.ApprovalDeadline.Before(f.Expires) {
			f.Expires = st.ApprovalDeadline
		}
	}
	f.Expires = f.Expires.UTC().Truncate(time.Second)
	if err := f.Check(); err != nil {
		return approval.Fields{}, fmt.Errorf("client: statement for %s: %w", st.WorkflowID, err)
	}
	return f, nil
}

// AssertedDecision returns the decision that carries a passkey's assertion over the statement f
// (statement is the text the passkey signed), ready for Decide. reviewer is the principal the
// caller verified the assertion for.
func AssertedDecision(f approval.Fields, a *approval.WebAuthnAssertion, statement, reviewer, reason string) contract.Decision {
	return contract.Decision{
		ApprovalID: f.ApprovalID, Digest: f.Digest, Approve: f.Approve, Reviewer: reviewer, Reason: reason,
		Expires: f.Expires, WebAuthn: a, Statement: statement,
	}
}

// SignDecision signs the statement f with a reviewer's key and returns the decision that carries
// the signature, the statement and its expiry, ready for Decide or any Temporal client.
func SignDecision(signer ssh.Signer, f approval.Fields, reason string) (contract.Decision, error) {
	stmt, err := f.Statement()
	if err != nil {
		return contract.Decision{}, fmt.Errorf("client: %w", err)
	}
	sig, err := approval.Sign(signer, stmt)
	if err != nil {
		return contract.Decision{}, fmt.Errorf("client: %w", err)
	}
	d := contract.Decision{
		ApprovalID: f.ApprovalID, Digest: f.Digest, Approve: f.Approve, Reason: reason,
		Expires: f.Expires, Signature: sig, Statement: string(stmt),
	}
	if f.Version >= approval.StatementVersion2 {
		d.Reviewer = f.Reviewer
	}
	return d, nil
}

// Approve signs an approval of t with the reviewer's key and sends it: a run's as the update
// "decide", a cell's as "decide-cell", pinned to the session's run it read. digest is the digest
// the reviewer read: required for a run, and for a cell, when not empty, it must be the one
// signed. The workflow refuses a decision whose signature does not verify, and says why.
func (c *Client) Approve(ctx context.Context, t Target, digest string, signer ssh.Signer, reason string) (Decided, error) {
	out, _, err := c.decide(ctx, t, digest, signer, reason, false, false)
	return out, err
}

// Deny signs a denial of t with the reviewer's key and sends it as Approve sends an approval. A
// denied cell does not end its session.
func (c *Client) Deny(ctx context.Context, t Target, signer ssh.Signer, reason string) (Decided, error) {
	out, _, err := c.decide(ctx, t, "", signer, reason, true, false)
	return out, err
}

// decide makes t's statement (Statement), checks it is of digest, signs it and sends it: with
// wait, as a decision answered once the run or cell has ended (ApproveAndWait).
// It returns the answer and the run id the statement names.
func (c *Client) decide(ctx context.Context, t Target, digest string, signer ssh.Signer, reason string, deny, wait bool) (Decided, string, error) {
	if !deny && digest == "" && !t.IsCell() {
		return Decided{}, "", errors.New("client: approve: the digest you read is required")
	}
	f, st, err := c.statementOf(ctx, t, StatementOptions{Deny: deny})
	if err != nil {
		return Decided{}, "", err
	}
	if t.Cell < 0 {
		t.Cell = WaitingCell(st)
	}
	if digest != "" && f.Digest != digest {
		what, show := "run", "show"
		if t.IsCell() {
			what, show = "cell", "session show"
		}
		return Decided{}, "", fmt.Errorf("client: approve %s: you read digest %s but the %s's is %s; read it again (starter %s)", t, digest, what, f.Digest, show)
	}
	d, err := SignDecision(signer, f, reason)
	if err != nil {
		return Decided{}, "", err
	}
	if t.IsCell() {
		res, err := c.DecideCell(ctx, t.ID, f.RunID, contract.CellDecision{Cell: t.Cell, Decision: d, Wait: wait})
		return Decided{Cell: t.Cell, DecideResult: res}, f.RunID, err
	}
	// A run's decision is pinned to the run the statement names only when its result is waited
	// for (DecideAndWait); otherwise it goes to the current run, whose workflow refuses a
	// statement made for another.
	runID := ""
	if wait {
		runID, d.Wait, d.ResultFromHistory = f.RunID, true, true
	}
	res, err := c.DecideRun(ctx, t.ID, runID, d)
	return Decided{DecideResult: res}, f.RunID, err
}

// LoadReviewerKey returns a signer for the reviewer's key at path (EnvReviewerKey when path is
// empty): an unencrypted OpenSSH private key file, or a public key file (.pub) whose private
// key is in the ssh-agent at SSH_AUTH_SOCK (use that for encrypted and security keys). Close
// the closer when done.
func LoadReviewerKey(path string) (ssh.Signer, io.Closer, error) {
	if path == "" {
		path = os.Getenv(EnvReviewerKey)
	}
	if path == "" {
		return nil, nil, fmt.Errorf("client: no reviewer key: give --key FILE or set %s", EnvReviewerKey)
	}
	if strings.HasSuffix(path, ".pub") {
		pub, err := approval.ReadPublicKeyFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("client: %w", err)
		}
		signer, closer, err := approval.AgentSigner(os.Getenv("SSH_AUTH_SOCK"), pub)
		if err != nil {
			return nil, nil, fmt.Errorf("client: %w", err)
		}
		return signer, closer, nil
	}
	signer, err := approval.LoadSigner(path, nil)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, nil, fmt.Errorf("client: reviewer key %s is encrypted: ssh-add it and give %s.pub instead (the key is then used through ssh-agent)", path, path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	return signer, io.NopCloser(nil), nil
}
