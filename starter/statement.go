package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// What `starter show`, `starter session show` and `starter statement` share for a run and a
// session: the warnings a reviewer reads on stderr, and the statement's options and bytes.

// warnRun writes to stderr what a reviewer of the run is warned of: the invisible characters and
// confusable names of its code, and the input files that may run without the code calling them.
func warnRun(stderr io.Writer, review client.Review) {
	if review.Warning != "" {
		fmt.Fprintln(stderr, "starter:", review.Warning)
	}
	if review.NamesWarning != "" {
		fmt.Fprintln(stderr, "starter:", terminal(review.NamesWarning))
	}
	warnStartup(stderr, review.Request.Warnings)
	if r := review.Rules; r != nil {
		for _, w := range r.Warnings {
			fmt.Fprintln(stderr, "starter: WARNING (policy rule):", terminal(w))
		}
		if review.Decision == nil && len(review.Missing) > 0 {
			fmt.Fprintln(stderr, "starter: waiting for", terminal(strings.Join(review.Missing, " and ")))
		}
	}
}

// warnStartup writes to stderr the input files of a run or a session that may run without the
// code calling them.
func warnStartup(stderr io.Writer, warnings []pysource.StartupWarning) {
	for _, w := range warnings {
		fmt.Fprintln(stderr, "starter: WARNING:", terminal(w.String()))
	}
}

// signingClient loads the reviewer's key (--key, else SANDBOXFLOW_REVIEWER_KEY) for approve and
// deny, and returns sc as the reviewer cmd names, if it names one. The closer releases the key.
func (cmd *command) signingClient(sc *client.Client) (*client.Client, ssh.Signer, io.Closer, error) {
	signer, closer, err := client.LoadReviewerKey(cmd.key)
	if err != nil {
		return nil, nil, nil, err
	}
	if cmd.reviewer != "" {
		sc = sc.WithReviewer(cmd.reviewer)
	}
	return sc, signer, closer, nil
}

// statementOptions are the options of the statement cmd signs or prints: a denial or an
// approval, its approval id, reviewer and expiry.
func (cmd *command) statementOptions() client.StatementOptions {
	opts := client.StatementOptions{Deny: cmd.deny, ApprovalID: cmd.approvalID, Reviewer: cmd.reviewer}
	if cmd.expiresIn > 0 {
		opts.Expires = time.Now().Add(cmd.expiresIn)
	}
	return opts
}

// writeStatement writes the exact bytes of the statement f (read with err) to stdout.
func writeStatement(stdout io.Writer, f approval.Fields, err error) error {
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

// warnSession writes to stderr what a reviewer of the session is warned of: the invisible
// characters and confusable names of the code of the cells of review that include says, and the
// input files that may run without the code calling them.
func warnSession(stderr io.Writer, review client.SessionReview, include func(client.CellView) bool) {
	for _, v := range review.Views {
		if !include(v) {
			continue
		}
		for _, w := range []string{v.Warning, v.NamesWarning, v.ThreadsWarning} {
			if w != "" {
				fmt.Fprintf(stderr, "starter: cell %d: %s\n", v.Cell, terminal(w))
			}
		}
		// What earlier cells left in /work runs in this one's sandbox: the cell's reviewer
		// decides with it in view.
		var b strings.Builder
		for _, u := range review.Views {
			if u.Cell < v.Cell {
				_ = printWrittenWarnings(&b, u.Cell, u)
			}
		}
		for _, line := range strings.Split(b.String(), "\n") {
			if line != "" {
				fmt.Fprintf(stderr, "starter: cell %d: %s\n", v.Cell, line)
			}
		}
	}
	warnStartup(stderr, review.Settings.Warnings)
}
