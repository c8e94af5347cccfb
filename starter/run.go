package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

func (c *command) parseRun(fs *flag.FlagSet, args []string) error {
	c.addConnFlags(fs)
	env := &cli.Pairs{Flag: "--env"}
	c.inputs = cli.Pairs{Flag: "--input", NonEmptyValues: true}
	m := &c.req.Metadata
	fs.StringVar(&c.code, "code", "", "the code to run")
	fs.StringVar(&c.file, "file", "", "read the code from a file (- for stdin)")
	fs.StringVar(&c.req.Language, "language", guard.Python, "python or sh")
	fs.DurationVar(&c.req.Limits.Timeout, "timeout", 0, "time limit (default: the policy's, 30s)")
	fs.BoolVar(&c.req.Network, "network", false, "ask for a network (the policy must allow it)")
	fs.BoolVar(&c.req.CaptureContent, "capture-content", false, "let events carry code and output")
	fs.BoolVar(&c.wait, "wait", false, "wait for the decision and print the result instead (one document: JSON, or a summary on a terminal)")
	fs.BoolVar(&c.json, "json", false, "with --wait: print the result as JSON even on a terminal")
	fs.StringVar(&c.workflowID, "workflow-id", "", "the run's workflow id, unused so far (default: sandbox-<uuid>)")
	fs.StringVar(&m.Agent, "agent", "", "metadata: the agent")
	fs.StringVar(&m.Session, "session", "", "metadata: the session")
	fs.StringVar(&m.ToolCallID, "tool-call-id", "", "metadata: the tool call")
	fs.StringVar(&m.RequestedBy, "requested-by", os.Getenv("USER"), "metadata: who asked")
	fs.StringVar(&c.req.Conversation, "conversation", "", "the conversation this run belongs to (letters, digits, . _ : @ -): reviewers see what changed since its previous run or session")
	fs.Var(&c.inputs, "input", "input file NAME=PATH (repeatable, each name once)")
	fs.StringVar(&c.packages, "packages", "", "a Python lock FILE in pip's hash-checking format (name==version --hash=sha256:...): installed from the worker's --package-index before the code runs, approved with it")
	fs.Var(env, "env", "env var NAME=VALUE (repeatable, each name once)")
	fs.Var((*cli.Strings)(&c.req.Egress), "allow-host", "egress: a host the code may reach through the worker's proxy: host[:port], *.domain[:port], IP or CIDR (repeatable; within the worker's --egress-allow)")
	fs.Var((*cli.Strings)(&c.req.Secrets), "secret", "a worker secret, by name, the proxy adds to requests for its host; the sandbox never sees it (repeatable)")
	if _, err := cli.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	c.req.Env = env.Map
	switch {
	case c.code != "" && c.file != "":
		return &cli.UsageError{Msg: "give --code or --file, not both"}
	case c.code == "" && c.file == "":
		return &cli.UsageError{Msg: "give the code with --code CODE or --file F (--file - reads stdin)"}
	}
	return nil
}

// prepareRun reads the code and the input files and checks the request, before dialling.
func prepareRun(c *command, stdin io.Reader) error {
	if err := c.readRequest(stdin); err != nil {
		return err
	}
	return client.CheckRequest(c.req)
}

func runCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) error {
	started, err := sc.Start(ctx, cmd.req, client.StartOptions{
		WorkflowID: cmd.workflowID,
		OnStarted: func(s client.Started) {
			fmt.Fprintf(stderr, "starter: started workflow %s (run %s); waiting for the worker's check\n", s.WorkflowID, s.RunID)
		},
	})
	if err != nil {
		if started.WorkflowID != "" {
			return startedError{workflowID: started.WorkflowID, err: err}
		}
		return err
	}
	if !cmd.wait {
		return client.WriteJSON(stdout, started)
	}
	// One document: the result, which carries the digest that ran; the workflow id is on
	// stderr now and in the error document if the run fails (--workflow-id names it ahead).
	fmt.Fprintf(stderr, "starter: %s waits for a reviewer (starter show %s; starter approve %s --digest %s)\n",
		started.WorkflowID, started.WorkflowID, started.WorkflowID, started.Digest)
	cmd.id = started.WorkflowID
	res, err := sc.WaitResult(ctx, client.Run(started.WorkflowID), 0)
	if err != nil {
		return startedError{workflowID: started.WorkflowID, err: err}
	}
	return printOutcome(ctx, sc, stdout, cmd, "run "+started.WorkflowID, res, nil)
}
