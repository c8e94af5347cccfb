package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// statementCmd prints the exact bytes a reviewer signs to decide on the run
// (ssh-keygen -Y sign -n sandboxflow-approval), and on stderr, before an approval, the warnings
// `starter show` gives: the invisible characters and confusable names of the code and the input files that may run
// without the code calling them, so that a reviewer who signs from this command alone is warned.
func statementCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) error {
	if !cmd.deny {
		review, err := sc.Review(ctx, cmd.id, client.ReviewOptions{})
		if err != nil {
			return err
		}
		if review.Warning != "" {
			fmt.Fprintln(stderr, "starter:", review.Warning)
		}
		if review.NamesWarning != "" {
			fmt.Fprintln(stderr, "starter:", terminal(review.NamesWarning))
		}
		for _, w := range review.Request.Warnings {
			fmt.Fprintln(stderr, "starter: WARNING:", terminal(w.String()))
		}
	}
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
	// approve --wait: the wait for the result (one long poll on the approved run) starts with
	// the decision, in this process and connection.
	var wait *client.ResultWait
	switch {
	case cmd.name == "approve" && cmd.editFile != "":
		code, rerr := readFile(cmd.editFile)
		if rerr != nil {
			return &cli.UsageError{Msg: fmt.Sprintf("--edit: %v", rerr)}
		}
		if cmd.wait {
			res, wait, err = sc.ApproveEditedAndWait(ctx, cmd.id, cmd.digest, string(code), signer, cmd.reason)
		} else {
			res, err = sc.ApproveEdited(ctx, cmd.id, cmd.digest, string(code), signer, cmd.reason)
		}
	case cmd.name == "approve" && cmd.wait:
		res, wait, err = sc.ApproveAndWait(ctx, cmd.id, cmd.digest, signer, cmd.reason)
	case cmd.name == "approve":
		res, err = sc.Approve(ctx, cmd.id, cmd.digest, signer, cmd.reason)
	default:
		res, err = sc.Deny(ctx, cmd.id, signer, cmd.reason)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", cmd.name, cmd.id, err)
	}
	if wait != nil {
		defer wait.Stop()
	}
	if err := printOr(stdout, res, nil); err != nil || wait == nil {
		return err
	}
	out, err := wait.Get(ctx)
	if err != nil {
		return startedError{workflowID: cmd.id, err: err}
	}
	return printResult(stdout, out)
}
