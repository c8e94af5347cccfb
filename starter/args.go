package main

import (
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

// command is one parsed command line. Parsing does no I/O: files are read when the command runs.
type command struct {
	name string

	conn      client.Connection
	taskQueue string
	keyFile   string

	// run
	req        guard.Request
	code, file string
	inputs     cli.Pairs
	wait       bool
	requestID  string
	workflowID string

	// show, approve, deny, result
	id         string
	json       bool
	envValues  bool
	inputFiles bool
	digest     string
	reason     string
	// reviewer is the principal a reviewer signs as (statement, approve, deny).
	reviewer    string
	waitTimeout time.Duration
	// hosts is result's hosts file (its receipt is verified against it).
	hosts string
	// follow: result --follow prints the output as it comes (watch.go)
	follow bool

	// statement, approve, deny
	key        string
	deny       bool
	approvalID string
	expiresIn  time.Duration
	// editFile is approve --edit's file: the edited code the reviewer approves instead.
	editFile string

	// session: the subcommand, open's settings, cell's language; cell is the cell of a
	// session that statement, approve and deny decide on (0: the waiting one)
	sub      string
	session  guard.SessionRequest
	language string
	cell     int

	// pending
	pageSize int
	nextPage string

	// tool-schema
	tool   client.ToolOptions
	format string

	// cancel: who asks (its reason is reason)
	by string
}

// defaultPageSize and maxPageSize bound `starter pending --page-size`.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// parseArgs parses a command line (without the program name). Every refusal is a *cli.UsageError,
// or flag.ErrHelp for -h.
func parseArgs(args []string, stderr io.Writer) (*command, error) {
	if len(args) == 0 {
		return nil, &cli.UsageError{Msg: "no command given"}
	}
	c := &command{name: args[0]}
	fs := cli.NewFlagSet("starter "+c.name, stderr)
	args = args[1:]
	switch c.name {
	case "run":
		return c, c.parseRun(fs, args)
	case "pending":
		c.addConnFlags(fs)
		fs.BoolVar(&c.json, "json", false, "print JSON for programs instead of a table")
		fs.IntVar(&c.pageSize, "page-size", defaultPageSize, "runs listed at most; the rest are on the next page")
		fs.StringVar(&c.nextPage, "next-page", "", "list the page after the one whose next_page_token (or table footer) gave TOKEN")
		if _, err := cli.Parse(fs, args, 0, 0, "next-page"); err != nil {
			return c, err
		}
		if c.pageSize < 1 || c.pageSize > maxPageSize {
			return c, &cli.UsageError{Msg: fmt.Sprintf("--page-size %d: want 1 to %d", c.pageSize, maxPageSize)}
		}
		return c, nil
	case "show", "result", "watch":
		return c, c.parseReview(fs, args)
	case "cancel":
		return c, c.parseCancel(fs, args)
	case "statement", "approve", "deny":
		return c, c.parseDecision(fs, args)
	case "session":
		return c, c.parseSession(stderr, args)
	case "tool-schema":
		return c, c.parseToolSchema(fs, args)
	case "-h", "--help", "help":
		return nil, flag.ErrHelp
	}
	return nil, &cli.UsageError{Msg: fmt.Sprintf("unknown command %q", c.name)}
}

func (c *command) addConnFlags(fs *flag.FlagSet) {
	c.conn = client.ConnectionFromEnv()
	fs.StringVar(&c.conn.Address, "address", c.conn.Address, "Temporal frontend host:port (TEMPORAL_ADDRESS; default 127.0.0.1:7233)")
	fs.StringVar(&c.conn.Namespace, "namespace", c.conn.Namespace, "Temporal namespace (TEMPORAL_NAMESPACE; default \"default\")")
	fs.StringVar(&c.taskQueue, "task-queue", envOr("SANDBOXFLOW_TASK_QUEUE", contract.DefaultTaskQueue), "task queue of RunCode workflows")
	fs.StringVar(&c.keyFile, "key-file", os.Getenv("SANDBOXFLOW_KEY_FILE"), "payload encryption keys shared with the workers")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

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
	fs.BoolVar(&c.wait, "wait", false, "wait for the decision and print the result")
	fs.StringVar(&c.workflowID, "workflow-id", "", "the run's workflow id, unused so far (default: sandbox-<uuid>)")
	fs.StringVar(&m.Agent, "agent", "", "metadata: the agent")
	fs.StringVar(&m.Session, "session", "", "metadata: the session")
	fs.StringVar(&m.ToolCallID, "tool-call-id", "", "metadata: the tool call")
	fs.StringVar(&m.RequestedBy, "requested-by", os.Getenv("USER"), "metadata: who asked")
	fs.StringVar(&c.req.Conversation, "conversation", "", "the conversation this run belongs to (letters, digits, . _ : @ -): reviewers see what changed since its previous run")
	fs.Var(&c.inputs, "input", "input file NAME=PATH (repeatable, each name once)")
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

func (c *command) parseReview(fs *flag.FlagSet, args []string) error {
	c.addConnFlags(fs)
	if c.name == "show" {
		fs.BoolVar(&c.envValues, "env-values", true, "show env values (the default: the code's behaviour can depend on them; the policy's sensitive names show as their length); kept so that older scripts still parse")
		fs.BoolVar(&c.inputFiles, "input-files", false, "also show the input files' contents (they can be modules the code imports)")
		fs.BoolVar(&c.json, "json", false, "print JSON for programs instead of text for a person")
	} else {
		fs.DurationVar(&c.waitTimeout, "timeout", 0, "wait at most this long for the result (default: until the run ends)")
		fs.StringVar(&c.hosts, "hosts", os.Getenv("SANDBOXFLOW_HOSTS"), "verify the result's receipt against these sandbox hosts' keys (default: the keys the run's check recorded)")
		c.addWatchFlags(fs)
	}
	pos, err := cli.Parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c.id = pos[0]
	if c.waitTimeout < 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("--timeout %s is negative", c.waitTimeout)}
	}
	if c.cell < 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("--cell %d: cells are numbered from 1", c.cell)}
	}
	return nil
}

// parseCancel parses cancel ID [--reason R] [--by NAME] [--wait].
func (c *command) parseCancel(fs *flag.FlagSet, args []string) error {
	c.addConnFlags(fs)
	fs.StringVar(&c.reason, "reason", "", "why (recorded with the run)")
	fs.StringVar(&c.by, "by", os.Getenv(client.EnvReviewer), "who cancels, as the run records it (default: "+client.EnvReviewer+", else $USER@hostname)")
	fs.BoolVar(&c.wait, "wait", false, "then wait for the run to end and print its result (the output printed before the cancel)")
	pos, err := cli.Parse(fs, args, 1, 1, "reason", "by")
	if err != nil {
		return err
	}
	c.id = pos[0]
	return nil
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
			fs.BoolVar(&c.wait, "wait", false, "then wait for the run's (or the cell's) result and print it too")
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

func (c *command) parseToolSchema(fs *flag.FlagSet, args []string) error {
	fs.StringVar(&c.format, "format", client.FormatOpenAI, "openai or anthropic")
	langs := fs.String("languages", guard.Python, "languages offered, comma-separated")
	fs.StringVar(&c.tool.Backend, "backend", "", "the backend that runs the code (local adds a warning)")
	fs.DurationVar(&c.tool.Timeout, "timeout", guard.DefaultTimeout, "the run's time limit")
	if _, err := cli.Parse(fs, args, 0, 0); err != nil {
		return err
	}
	var err error
	if c.tool.Languages, err = cli.List("languages", *langs); err != nil {
		return err
	}
	for _, l := range c.tool.Languages {
		if l != guard.Python && l != guard.Shell {
			return &cli.UsageError{Msg: fmt.Sprintf("--languages: %q is not a language the backends offer (python, sh)", l)}
		}
	}
	if c.format != client.FormatOpenAI && c.format != client.FormatAnthropic {
		return &cli.UsageError{Msg: fmt.Sprintf("--format %q: want %s or %s", c.format, client.FormatOpenAI, client.FormatAnthropic)}
	}
	if c.tool.Timeout <= 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("--timeout %s must be positive", c.tool.Timeout)}
	}
	return nil
}
