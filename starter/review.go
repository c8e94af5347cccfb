package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// showCmd prints everything a reviewer needs to decide on a run, for a person or, with --json,
// for programs; the warnings about the code go to stderr first.
func showCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) error {
	// Env values are always read: the code's behaviour can depend on them.
	review, err := sc.Review(ctx, client.Run(cmd.id), client.ReviewOptions{EnvValues: true, InputFiles: cmd.inputFiles})
	if err != nil {
		return err
	}
	warnRun(stderr, *review.Run)
	if cmd.json {
		return client.WriteJSON(stdout, review.Run)
	}
	return printReview(stdout, *review.Run, time.Now())
}

// parseDecision parses statement, approve and deny. Approve and deny sign with the reviewer's
// key (--key, else SANDBOXFLOW_REVIEWER_KEY).
func (c *command) parseDecision(fs *flag.FlagSet, args []string) error {
	c.addConnFlags(fs)
	var mayBeEmpty []string
	fs.IntVar(&c.cell, "cell", 0, "the cell of a session to decide on (default for a session: the one that waits, printed first)")
	fs.StringVar(&c.reviewer, "reviewer", os.Getenv(client.EnvReviewer), "the principal you sign as, one your key's line in the reviewers file allows; the statement names it ["+client.EnvReviewer+"]")
	mayBeEmpty = append(mayBeEmpty, "reviewer")
	if c.name == "statement" {
		fs.BoolVar(&c.deny, "deny", false, "the statement of a denial instead of an approval")
		fs.StringVar(&c.approvalID, "approval-id", "", "the decision's UUID (default: a new one)")
		fs.DurationVar(&c.expiresIn, "expires-in", 0, "how long the signature counts (default 1h, at most until the approval deadline)")
	} else {
		fs.StringVar(&c.key, "key", os.Getenv(client.EnvReviewerKey), "your reviewer key: an OpenSSH private key, or a .pub whose key is in ssh-agent ["+client.EnvReviewerKey+"]")
		fs.StringVar(&c.digest, "digest", "", "the digest you read (approve: required)")
		fs.StringVar(&c.reason, "reason", "", "why (deny: required)")
		mayBeEmpty = append(mayBeEmpty, "reason")
		if c.name == "approve" {
			fs.BoolVar(&c.wait, "wait", false, "then wait for the run's (or the cell's) result and print it instead (one document: JSON, or a summary on a terminal)")
			fs.BoolVar(&c.json, "json", false, "with --wait: print the result as JSON even on a terminal")
			fs.StringVar(&c.editFile, "edit", "", "approve your edit of the code instead, read from FILE: you sign the edited request's digest, the workflow checks it against its policy again, and the other approvals of a quorum must be of the edited code")
		}
	}
	pos, err := cli.Parse(fs, args, 1, 1, mayBeEmpty...)
	if err != nil {
		return err
	}
	c.id = pos[0]
	switch {
	case c.cell < 0:
		return &cli.UsageError{Msg: fmt.Sprintf("--cell %d: cells are numbered from 1", c.cell)}
	case c.name == "statement":
		if c.expiresIn < 0 {
			return &cli.UsageError{Msg: fmt.Sprintf("--expires-in %s is negative", c.expiresIn)}
		}
	case c.key == "":
		return &cli.UsageError{Msg: "--key FILE (or " + client.EnvReviewerKey + ") is required: decisions are signed with a reviewer's key"}
	case c.name == "approve" && c.digest == "" && c.cell == 0:
		return &cli.UsageError{Msg: "--digest is required (or, for a session, --cell N): approve the digest you read with `starter show` (`starter session show`)"}
	case c.editFile != "" && c.cell > 0:
		return &cli.UsageError{Msg: "--edit approves an edited run's code; a session's cells take no edits"}
	case c.name == "deny" && c.reason == "":
		return &cli.UsageError{Msg: "--reason is required"}
	}
	return nil
}

// target is what a decision command names: cell --cell of session ID, else the run ID (or, once
// ID is found to be a session, its cell that waits: client.Cell(ID, 0)).
func (c *command) target() client.Target {
	if c.cell > 0 {
		return client.Cell(c.id, c.cell)
	}
	return client.Run(c.id)
}

// decisionCmd runs statement, approve and deny, on a run or on a session's cell.
func decisionCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) error {
	t := cmd.target()
	if !t.IsCell() && cmd.editFile == "" && (cmd.name == "deny" || cmd.name == "approve" && cmd.digest != "") {
		// A decision is tried as a run's first: its statement describes the workflow anyway,
		// and refuses a session by its type, so a run's decision costs no describe of its own.
		err := decideCmd(ctx, sc, cmd, t, stdout, stderr)
		var nr *client.NotRunCodeError
		if !errors.As(err, &nr) || nr.Type != contract.SessionWorkflowName {
			return err
		}
		t = client.Cell(cmd.id, cmd.cell)
	}
	if !t.IsCell() {
		session, err := sc.IsSession(ctx, cmd.id)
		if err != nil {
			return err
		}
		if session {
			t = client.Cell(cmd.id, cmd.cell)
		}
	}
	if cmd.name == "statement" {
		return statementCmd(ctx, sc, cmd, t, stdout, stderr)
	}
	return decideCmd(ctx, sc, cmd, t, stdout, stderr)
}

// statementCmd prints the exact bytes a reviewer signs to decide on t
// (ssh-keygen -Y sign -n sandboxflow-approval), and on stderr, before an approval, the warnings
// `starter show` (`starter session show`) gives: the invisible characters and confusable names of
// the code and the input files that may run without the code calling them, so that a reviewer
// who signs from this command alone is warned.
func statementCmd(ctx context.Context, sc *client.Client, cmd *command, t client.Target, stdout, stderr io.Writer) error {
	if !cmd.deny {
		review, err := sc.Review(ctx, t, client.ReviewOptions{})
		if err != nil {
			return err
		}
		if r := review.Session; r != nil {
			warnSession(stderr, *r, func(v client.CellView) bool {
				return v.Cell == t.Cell || t.Cell == client.CellWaiting && v.Cell == r.Waiting
			})
		} else {
			warnRun(stderr, *review.Run)
		}
	}
	f, err := sc.Statement(ctx, t, cmd.statementOptions())
	return writeStatement(stdout, f, err)
}

// decideCmd signs an approval or a denial of t with the reviewer's key and sends it; approve
// --wait then prints the result, once its receipt verified. For a session's waiting cell, the
// cell is printed on stderr first.
func decideCmd(ctx context.Context, sc *client.Client, cmd *command, t client.Target, stdout, stderr io.Writer) error {
	sc, signer, closer, err := cmd.signingClient(sc)
	if err != nil {
		return err
	}
	defer closer.Close()
	if t.Cell == client.CellWaiting {
		if err := showWaitingCell(ctx, sc, cmd, stderr); err != nil {
			return err
		}
	}
	var res client.Decided
	// approve --wait: the wait for the result (one long poll on the approved run, or the cell's
	// answer) starts with the decision, in this process and connection.
	var wait *client.ResultWait
	switch {
	case cmd.name == "approve" && cmd.editFile != "":
		code, rerr := readFile(cmd.editFile)
		if rerr != nil {
			return &cli.UsageError{Msg: fmt.Sprintf("--edit: %v", rerr)}
		}
		if cmd.wait {
			res.DecideResult, wait, err = sc.ApproveEditedAndWait(ctx, cmd.id, cmd.digest, string(code), signer, cmd.reason)
		} else {
			res.DecideResult, err = sc.ApproveEdited(ctx, cmd.id, cmd.digest, string(code), signer, cmd.reason)
		}
	case cmd.name == "approve" && cmd.wait:
		res, wait, err = sc.ApproveAndWait(ctx, t, cmd.digest, signer, cmd.reason)
	case cmd.name == "approve":
		res, err = sc.Approve(ctx, t, cmd.digest, signer, cmd.reason)
	default:
		res, err = sc.Deny(ctx, t, signer, cmd.reason)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", cmd.name, cmd.id, err)
	}
	if wait != nil {
		defer wait.Stop()
		// The answer's result is the workflow's word: it is printed below, as a result, only
		// once its receipt verified (wait.Get), never before.
		res.Result, res.CellStatus = nil, nil
	}
	if res.Cell > 0 && res.Quorum > 0 && res.State == contract.StatusAwaitingApproval {
		fmt.Fprintf(stderr, "starter: cell %d of %s has %d of %d approvals: it waits for another reviewer's\n", res.Cell, cmd.id, res.Approvals, res.Quorum)
	}
	if wait == nil {
		return client.WriteJSON(stdout, res)
	}
	// One document: the result, which names the approval it ran with (approval_id, reviewer,
	// approvals); the decision's own answer only says it was accepted.
	fmt.Fprintf(stderr, "starter: %s %s accepted (approval %s); waiting for the result\n", cmd.name, t, res.ApprovalID)
	out, err := wait.Get(ctx)
	if err != nil {
		return startedError{workflowID: cmd.id, err: err}
	}
	label := "run " + cmd.id
	if res.Cell > 0 {
		label = fmt.Sprintf("cell %d of session %s", res.Cell, cmd.id)
	}
	return printOutcome(ctx, sc, stdout, cmd, label, out, nil)
}

// showWaitingCell prints on stderr the cell of the session that waits for a decision, for a
// reviewer who named no cell: the one the decision is for, before it is signed.
func showWaitingCell(ctx context.Context, sc *client.Client, cmd *command, stderr io.Writer) error {
	review, err := sc.Review(ctx, client.Session(cmd.id), client.ReviewOptions{})
	if err != nil {
		return err
	}
	if review.Session.Waiting == 0 {
		return fmt.Errorf("%s %s: no cell of the session waits for a decision", cmd.name, cmd.id)
	}
	return printWaitingCell(stderr, *review.Session)
}
