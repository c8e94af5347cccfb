package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// Subcommands of `starter session`.
const (
	sessionOpen  = "open"
	sessionCell  = "cell"
	sessionShow  = "show"
	sessionClose = "close"
)

// parseSession parses `session open|cell|show|close`, with a flag set of the subcommand's own
// name that prints where the command's does.
func (c *command) parseSession(cmdFlags *flag.FlagSet, args []string) error {
	if len(args) == 0 {
		return &cli.UsageError{Msg: "session needs a subcommand: open, cell, show or close"}
	}
	c.sub = args[0]
	fs := cli.NewFlagSet("starter session "+c.sub, cmdFlags.Output())
	c.addConnFlags(fs)
	args = args[1:]
	switch c.sub {
	case sessionOpen:
		return c.parseSessionOpen(fs, args)
	case sessionCell:
		fs.StringVar(&c.code, "code", "", "the cell's code (or give FILE, or - for stdin)")
		fs.StringVar(&c.language, "language", "", "the cell's language, one the session offers (default: python when offered, else its one)")
		fs.StringVar(&c.req.Metadata.ToolCallID, "tool-call-id", "", "metadata: the tool call")
		fs.StringVar(&c.requestID, "request-id", "", "an idempotency key: a retry with the same one gets the cell it submitted, never a second cell")
		fs.StringVar(&c.packages, "packages", "", "a Python lock FILE of packages the cell adds to the session's (never another version of one it has), approved with the cell")
		fs.IntVar(&c.retries, "retries", 0, "the earlier cell this one retries (denied, failed, ...): reviewers see the diff against it")
		fs.BoolVar(&c.wait, "wait", false, "wait for the cell's decision and run, and print its result instead (one document: JSON, or a summary on a terminal)")
		fs.BoolVar(&c.json, "json", false, "with --wait: print the result as JSON even on a terminal")
		pos, err := cli.Parse(fs, args, 1, 2)
		if err != nil {
			return err
		}
		c.id = pos[0]
		if len(pos) == 2 {
			c.file = pos[1]
		}
		switch {
		case c.code != "" && c.file != "":
			return &cli.UsageError{Msg: "give --code or FILE, not both"}
		case c.code == "" && c.file == "":
			return &cli.UsageError{Msg: "give the cell's code with --code CODE or FILE (- reads stdin)"}
		}
		return nil
	case sessionShow:
		fs.BoolVar(&c.inputFiles, "input-files", false, "also show the input files' contents and those of the files earlier cells wrote (a later cell can import or run them)")
		fs.BoolVar(&c.json, "json", false, "print JSON for programs instead of text for a person")
	case sessionClose:
		fs.StringVar(&c.reason, "reason", "", "why (recorded)")
	default:
		return &cli.UsageError{Msg: fmt.Sprintf("unknown session subcommand %q: want open, cell, show or close", c.sub)}
	}
	pos, err := cli.Parse(fs, args, 1, 1, "reason")
	if err != nil {
		return err
	}
	c.id = pos[0]
	return nil
}

// parseSessionOpen takes a run's settings as `run` does (without the code), plus the session's
// lifetime, idle timeout and cell cap.
func (c *command) parseSessionOpen(fs *flag.FlagSet, args []string) error {
	r := &c.session
	env := &cli.Pairs{Flag: "--env"}
	c.inputs = cli.Pairs{Flag: "--input", NonEmptyValues: true}
	var langs cli.Strings
	m := &r.Metadata
	fs.Var(&langs, "language", "a language the cells may use, python or sh (repeatable, or a comma list; default: every one the policy offers)")
	fs.DurationVar(&r.Limits.Timeout, "timeout", 0, "each cell's time limit (default: the policy's, 30s)")
	fs.BoolVar(&r.Network, "network", false, "ask for a network (the policy must allow it)")
	fs.BoolVar(&r.CaptureContent, "capture-content", false, "let events carry code and output")
	fs.DurationVar(&r.Lifetime, "lifetime", 0, "end the session this long after it opened (default: the policy's cap, 1h)")
	fs.DurationVar(&r.IdleTimeout, "idle-timeout", 0, "end the session when no cell came for this long (default: the policy's cap, 10m)")
	fs.IntVar(&r.MaxCells, "max-cells", 0, "end the session after this many cells, denied ones included (default: the policy's cap, 100)")
	fs.StringVar(&c.workflowID, "workflow-id", "", "the session's workflow id, unused so far (default: session-<uuid>)")
	fs.StringVar(&r.Conversation, "conversation", "", "the conversation this session belongs to (letters, digits, . _ : @ -): reviewers see what changed in the settings since its previous run or session")
	fs.StringVar(&m.Agent, "agent", "", "metadata: the agent")
	fs.StringVar(&m.Session, "session", "", "metadata: the agent's session")
	fs.StringVar(&m.RequestedBy, "requested-by", os.Getenv("USER"), "metadata: who asked")
	fs.Var(&c.inputs, "input", "input file NAME=PATH written into /work before the first cell (repeatable, each name once)")
	fs.StringVar(&c.packages, "packages", "", "a Python lock FILE in pip's hash-checking format: installed from the worker's --package-index before the first cell, approved with the settings")
	fs.Var(env, "env", "env var NAME=VALUE of every cell (repeatable, each name once)")
	fs.Var((*cli.Strings)(&r.Egress), "allow-host", "egress: a host the cells may reach through the worker's proxy (repeatable; within the worker's --egress-allow)")
	fs.Var((*cli.Strings)(&r.Secrets), "secret", "a worker secret, by name, the proxy adds to requests for its host (repeatable)")
	if _, err := cli.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	r.Env = env.Map
	for _, l := range langs {
		list, err := cli.List("language", l)
		if err != nil {
			return err
		}
		for _, one := range list {
			if one != guard.Python && one != guard.Shell {
				return &cli.UsageError{Msg: fmt.Sprintf("--language: %q is not a language the backends offer (python, sh)", one)}
			}
			for _, have := range r.Languages {
				if have == one {
					return &cli.UsageError{Msg: fmt.Sprintf("--language: %s is given twice", one)}
				}
			}
			r.Languages = append(r.Languages, one)
		}
	}
	switch {
	case r.Limits.Timeout < 0:
		return &cli.UsageError{Msg: fmt.Sprintf("--timeout %s is negative", r.Limits.Timeout)}
	case r.Lifetime < 0:
		return &cli.UsageError{Msg: fmt.Sprintf("--lifetime %s is negative", r.Lifetime)}
	case r.IdleTimeout < 0:
		return &cli.UsageError{Msg: fmt.Sprintf("--idle-timeout %s is negative", r.IdleTimeout)}
	case r.MaxCells < 0:
		return &cli.UsageError{Msg: fmt.Sprintf("--max-cells %d is negative", r.MaxCells)}
	}
	return nil
}

// readSession reads what a session command sends before dialling: the input files of open, the
// code of cell.
func (cmd *command) readSession(stdin io.Reader) error {
	switch cmd.sub {
	case sessionOpen:
		files, err := cmd.readInputs()
		if err != nil {
			return err
		}
		cmd.session.Files = files
		if cmd.session.Packages, err = cmd.readPackages(); err != nil {
			return err
		}
		return client.CheckSessionRequest(cmd.session)
	case sessionCell:
		if err := cmd.readCode(stdin); err != nil {
			return err
		}
		var err error
		if cmd.req.Packages, err = cmd.readPackages(); err != nil {
			return err
		}
		return client.CheckRequest(guard.Request{Code: cmd.req.Code, Language: cmd.language})
	}
	return nil
}

// sessionCmd runs a parsed `session` command.
func sessionCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) error {
	switch cmd.sub {
	case sessionOpen:
		started, err := sc.OpenSession(ctx, cmd.session, client.SessionOptions{
			WorkflowID: cmd.workflowID,
			OnStarted: func(s client.SessionStarted) {
				fmt.Fprintf(stderr, "starter: started session %s (run %s); waiting for the worker's check\n", s.WorkflowID, s.RunID)
			},
		})
		if err != nil {
			if started.WorkflowID != "" {
				return startedError{workflowID: started.WorkflowID, err: err}
			}
			return err
		}
		return client.WriteJSON(stdout, started)
	case sessionCell:
		sub, err := sc.SubmitCell(ctx, cmd.id, contract.CellRequest{Code: cmd.req.Code, Language: cmd.language, Metadata: cmd.req.Metadata, RequestID: cmd.requestID, Retries: cmd.retries, Packages: cmd.req.Packages})
		if err != nil {
			return err
		}
		if !cmd.wait {
			return client.WriteJSON(stdout, sub)
		}
		// One document: the result, which carries the digest that ran.
		fmt.Fprintf(stderr, "starter: cell %d of %s waits for a reviewer (starter session show %s; starter approve %s --cell %d)\n", sub.Cell, cmd.id, cmd.id, cmd.id, sub.Cell)
		return printCellOutcome(ctx, sc, cmd, sub.Cell, stdout)
	case sessionShow:
		review, err := sc.Review(ctx, client.Session(cmd.id), client.ReviewOptions{EnvValues: true, InputFiles: cmd.inputFiles})
		if err != nil {
			return err
		}
		warnSession(stderr, *review.Session, func(client.CellView) bool { return true })
		if cmd.json {
			return client.WriteJSON(stdout, review.Session)
		}
		return printSessionReview(stdout, *review.Session, time.Now())
	case sessionClose:
		st, err := sc.CloseSession(ctx, cmd.id, cmd.reason)
		if err != nil {
			return err
		}
		return client.WriteJSON(stdout, st)
	}
	return fmt.Errorf("starter: session subcommand %q has no implementation", cmd.sub)
}

// printCellOutcome waits for the cell to end and prints its result, once its receipt verified,
// as `starter result` prints a run's, or returns why it has none (denied, expired, dropped,
// failed).
func printCellOutcome(ctx context.Context, sc *client.Client, cmd *command, cell int, stdout io.Writer) error {
	res, err := sc.WaitResult(ctx, client.Cell(cmd.id, cell), 0)
	if err != nil {
		return startedError{workflowID: cmd.id, err: err}
	}
	return printOutcome(ctx, sc, stdout, cmd, fmt.Sprintf("cell %d of session %s", cell, cmd.id), res, nil)
}
