package client

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// EditedStatement returns the statement a reviewer signs to approve the run with its code
// replaced by code, and the edit that goes with the decision: the run's request as its status
// shows it (checked against the run's start, as Statement does) with the edited code, whose
// digest the statement binds. digest is the digest the reviewer read; it must be the run's.
// The workflow checks the edited request against its policy again and refuses the edit when
// the policy does, or when the edited request's digest is not the one signed.
func (c *Client) EditedStatement(ctx context.Context, workflowID, digest, code string, opts StatementOptions) (approval.Fields, contract.DecisionEdit, error) {
	var edit contract.DecisionEdit
	if digest == "" {
		return approval.Fields{}, edit, errors.New("client: approve with an edit: the digest you read is required")
	}
	if code == "" {
		return approval.Fields{}, edit, errors.New("client: approve with an edit: the edited code is empty")
	}
	f, err := c.Statement(ctx, Run(workflowID), opts)
	if err != nil {
		return approval.Fields{}, edit, err
	}
	if f.Digest != digest {
		return approval.Fields{}, edit, fmt.Errorf("client: approve %s: you read digest %s but the run's is %s; read it again (starter show)", workflowID, digest, f.Digest)
	}
	st, err := c.Status(ctx, workflowID)
	if err != nil {
		return approval.Fields{}, edit, err
	}
	if st.Request.Digest != digest {
		return approval.Fields{}, edit, fmt.Errorf("client: approve %s: the run's digest changed to %s while the statement was made; read it again", workflowID, st.Request.Digest)
	}
	in, err := c.startInput(ctx, workflowID, st, true)
	if err != nil {
		return approval.Fields{}, edit, err
	}
	edited, err := EditedDigest(st, in, code)
	if err != nil {
		return approval.Fields{}, edit, fmt.Errorf("client: %s: %w", workflowID, err)
	}
	f.Digest = edited
	if err := f.Check(); err != nil {
		return approval.Fields{}, edit, fmt.Errorf("client: statement for %s: %w", workflowID, err)
	}
	return f, contract.DecisionEdit{Code: code, OriginalDigest: digest}, nil
}

// EditedDigest returns the digest of the request st shows (checked against in, the run's start
// input) with its code replaced by code: what a reviewer who edits the code signs.
func EditedDigest(st contract.Status, in contract.Input, code string) (string, error) {
	if st.Edit != nil {
		in.Request.Code = st.Request.Code
	}
	c, err := contract.ShownChecked(st.Request, in.Request)
	if err != nil {
		return "", err
	}
	c.Code = code
	return guard.Digest(&c), nil
}

// EditedDecision signs f (from EditedStatement) with the reviewer's key and returns the decision
// that carries the edit, ready for Decide.
func EditedDecision(signer ssh.Signer, f approval.Fields, edit contract.DecisionEdit, reason string) (contract.Decision, error) {
	d, err := SignDecision(signer, f, reason)
	if err != nil {
		return contract.Decision{}, err
	}
	d.Edit = &edit
	return d, nil
}

// ApproveEdited approves the run with its code replaced by code: it makes the statement over the
// edited request's digest (EditedStatement), signs it with the reviewer's key and sends it with
// the edit as the update "decide". The answer's Digest is the edited request's; a refusal says
// why (the policy refuses the edited code, the run changed, ...) and the run keeps waiting.
func (c *Client) ApproveEdited(ctx context.Context, workflowID, digest, code string, signer ssh.Signer, reason string) (contract.DecideResult, error) {
	f, edit, err := c.EditedStatement(ctx, workflowID, digest, code, StatementOptions{})
	if err != nil {
		return contract.DecideResult{}, err
	}
	d, err := EditedDecision(signer, f, edit, reason)
	if err != nil {
		return contract.DecideResult{}, err
	}
	return c.Decide(ctx, workflowID, d)
}
