package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// parseReviewLoop parses review [--key FILE] [--reviewer P] [--input-files]: the key options of
// approve and deny, and show's --input-files.
func (c *command) parseReviewLoop(fs *flag.FlagSet, args []string) error {
	c.addConnFlags(fs)
	fs.StringVar(&c.reviewer, "reviewer", os.Getenv(client.EnvReviewer), "the principal you sign as, one your key's line in the reviewers file allows ["+client.EnvReviewer+"]")
	fs.StringVar(&c.key, "key", os.Getenv(client.EnvReviewerKey), "your reviewer key: an OpenSSH private key, or a .pub whose key is in ssh-agent ["+client.EnvReviewerKey+"]")
	fs.BoolVar(&c.inputFiles, "input-files", false, "also show the input files' contents, as show --input-files does")
	if _, err := cli.Parse(fs, args, 0, 0, "reviewer"); err != nil {
		return err
	}
	if c.key == "" {
		return &cli.UsageError{Msg: "--key FILE (or " + client.EnvReviewerKey + ") is required: decisions are signed with a reviewer's key"}
	}
	return nil
}

// prepareReviewLoop keeps stdin, where review reads the reviewer's answers, one a line.
func prepareReviewLoop(c *command, stdin io.Reader) error {
	c.answers = bufio.NewReader(stdin)
	return nil
}

// reviewTally counts what review did.
type reviewTally struct {
	waiting, approved, denied, skipped, gone, failed int
}

func (t reviewTally) String() string {
	return fmt.Sprintf("review: %d waiting: %d approved, %d denied, %d skipped, %d no longer waiting, %d failed",
		t.waiting, t.approved, t.denied, t.skipped, t.gone, t.failed)
}

// errQuit is the reviewer's answer q (or the end of the answers): review stops.
var errQuit = errors.New("quit")

// reviewLoopCmd walks what pending lists: each run (or session's waiting cell) is shown on stdout
// as show (session show) shows it, its warnings on stderr; the reviewer answers on stdin, asked
// on stderr; an approval signs the digest that was shown, as approve does, a denial the reason
// asked for, as deny does. It ends with a one-line tally on stdout.
func reviewLoopCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) error {
	sc, signer, closer, err := cmd.signingClient(sc)
	if err != nil {
		return err
	}
	defer closer.Close()
	pending, err := sc.Pending(ctx)
	if err != nil {
		return err
	}
	tally := reviewTally{waiting: len(pending)}
	for i, p := range pending {
		fmt.Fprintf(stderr, "starter: %d of %d: %s %s\n", i+1, len(pending), p.Kind, terminal(p.WorkflowID))
		t, digest, err := showWaiting(ctx, sc, cmd, p, stdout, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "starter: %s: %v\n", terminal(p.WorkflowID), err)
			tally.failed++
			continue
		}
		if digest == "" {
			fmt.Fprintf(stderr, "starter: %s no longer waits for a decision\n", terminal(p.WorkflowID))
			tally.gone++
			continue
		}
		answer, reason, err := ask(cmd.answers, stderr)
		if errors.Is(err, errQuit) {
			break
		}
		if err != nil {
			return err
		}
		decideShown(ctx, sc, t, answer, digest, reason, &tally, stderr, signer)
	}
	_, err = fmt.Fprintln(stdout, tally)
	return err
}

// showWaiting shows what p waits on, as show (session show) shows it, and returns the target a
// decision names and the digest shown; digest "" when it no longer waits.
func showWaiting(ctx context.Context, sc *client.Client, cmd *command, p client.Pending, stdout, stderr io.Writer) (client.Target, string, error) {
	opts := client.ReviewOptions{EnvValues: true, InputFiles: cmd.inputFiles}
	if p.Kind == client.PendingSession {
		review, err := sc.Review(ctx, client.Session(p.WorkflowID), opts)
		if err != nil {
			return client.Target{}, "", err
		}
		r := *review.Session
		if r.Waiting == 0 {
			return client.Target{}, "", nil
		}
		warnSession(stderr, r, func(client.CellView) bool { return true })
		if err := printSessionReview(stdout, r, time.Now()); err != nil {
			return client.Target{}, "", err
		}
		for _, c := range r.Cells {
			if c.Cell == r.Waiting {
				return client.Cell(p.WorkflowID, c.Cell), c.Digest, nil
			}
		}
		return client.Target{}, "", fmt.Errorf("the waiting cell %d is not among the session's cells", r.Waiting)
	}
	review, err := sc.Review(ctx, client.Run(p.WorkflowID), opts)
	if err != nil {
		return client.Target{}, "", err
	}
	r := *review.Run
	if r.State != contract.StatusAwaitingApproval {
		return client.Target{}, "", nil
	}
	warnRun(stderr, r)
	return client.Run(p.WorkflowID), r.Request.Digest, printReview(stdout, r, time.Now())
}

// ask asks on stderr for a decision and reads it from answers: a (approve), d (deny, then a
// reason), s (skip) or q (quit); the end of answers is q.
func ask(answers *bufio.Reader, stderr io.Writer) (answer, reason string, err error) {
	for {
		fmt.Fprint(stderr, "starter: approve, deny, skip or quit? [a/d/s/q] ")
		line, err := readAnswer(answers)
		if err != nil {
			return "", "", err
		}
		switch strings.ToLower(line) {
		case "a", "approve":
			return "approve", "", nil
		case "s", "skip", "":
			return "skip", "", nil
		case "q", "quit":
			return "", "", errQuit
		case "d", "deny":
			for reason == "" {
				fmt.Fprint(stderr, "starter: why deny it (a reason is required)? ")
				if reason, err = readAnswer(answers); err != nil {
					return "", "", err
				}
			}
			return "deny", reason, nil
		}
	}
}

// readAnswer reads one line of answers, trimmed; io.EOF with nothing read is errQuit.
func readAnswer(answers *bufio.Reader) (string, error) {
	line, err := answers.ReadString('\n')
	if errors.Is(err, io.EOF) && line == "" {
		return "", errQuit
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("starter: review: read the answer: %w", err)
	}
	return strings.TrimSpace(line), nil
}

// decideShown sends the reviewer's answer on t, as approve (with the digest shown) and deny do,
// and counts it; a refusal is reported on stderr and counted as failed.
func decideShown(ctx context.Context, sc *client.Client, t client.Target, answer, digest, reason string, tally *reviewTally, stderr io.Writer, signer ssh.Signer) {
	var (
		res client.Decided
		err error
	)
	switch answer {
	case "skip":
		tally.skipped++
		return
	case "approve":
		res, err = sc.Approve(ctx, t, digest, signer, "")
	default:
		res, err = sc.Deny(ctx, t, signer, reason)
	}
	if err != nil {
		fmt.Fprintf(stderr, "starter: %s %s: %v\n", answer, t, err)
		tally.failed++
		return
	}
	if answer == "approve" {
		tally.approved++
	} else {
		tally.denied++
	}
	fmt.Fprintf(stderr, "starter: %s %s: sent (approval %s); state %s\n", answer, t, res.ApprovalID, res.State)
}
