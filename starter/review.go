package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
)

// statementCmd prints the exact bytes a reviewer signs to decide on the run
// (ssh-keygen -Y sign -n sandboxflow-approval).
func statementCmd(ctx context.Context, sc *client.Client, cmd *command, stdout io.Writer) error {
	opts := client.StatementOptions{Deny: cmd.deny, ApprovalID: cmd.approvalID, Reviewer: cmd.reviewer}
	if cmd.expiresIn > 0 {
		opts.Expires = time.Now().Add(cmd.expiresIn)
	}
	f, err := sc.Statement(ctx, cmd.id, opts)
	if err != nil {
		return err
	}
	stmt, err := f.Statement()
	if err != nil {
		return err
	}
	_, err = stdout.Write(stmt)
	return err
}

// decideCmd signs an approval or a denial with the reviewer's key and sends it.
func decideCmd(ctx context.Context, sc *client.Client, cmd *command, stdout io.Writer) error {
	signer, closer, err := client.LoadReviewerKey(cmd.key)
	if err != nil {
		return err
	}
	defer closer.Close()
	if cmd.reviewer != "" {
		sc = sc.WithReviewer(cmd.reviewer)
	}
	var res any
	if cmd.name == "approve" {
		res, err = sc.Approve(ctx, cmd.id, cmd.digest, signer, cmd.reason)
	} else {
		res, err = sc.Deny(ctx, cmd.id, signer, cmd.reason)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", cmd.name, cmd.id, err)
	}
	if err := printOr(stdout, res, nil); err != nil || !cmd.wait {
		return err
	}
	// approve --wait: the result in the same process, without a second start and dial.
	out, err := sc.WaitResult(ctx, cmd.id, 0)
	if err != nil {
		return startedError{workflowID: cmd.id, err: err}
	}
	return client.WriteJSON(stdout, client.NewOutput(out))
}
