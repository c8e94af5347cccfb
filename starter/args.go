package main

import (
	"bufio"
	"errors"
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
	// packages is --packages FILE: a lock for run, session open and session cell.
	packages   string
	wait       bool
	requestID  string
	retries    int
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
	// outDir is result --out's folder, where the files and outputs are written (outdir.go);
	// force lets it replace existing files.
	outDir string
	force  bool

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

	// review: the reviewer's answers, one a line (stdin)
	answers *bufio.Reader
}

// parseArgs parses a command line (without the program name) with its command's entry in the
// command table. Every refusal is a *cli.UsageError, or flag.ErrHelp for -h.
func parseArgs(args []string, stderr io.Writer) (*command, error) {
	if len(args) == 0 {
		return nil, &cli.UsageError{Msg: "no command given"}
	}
	c := &command{name: args[0]}
	switch c.name {
	case "-h", "--help", "help":
		return nil, flag.ErrHelp
	}
	entry := lookupCommand(c.name)
	if entry == nil || entry.parse == nil {
		return nil, &cli.UsageError{Msg: fmt.Sprintf("unknown command %q", c.name)}
	}
	// The flag package would print every flag on a usage error; run prints the error and one
	// line of help instead, and -h prints the flags here and the usage text on stdout.
	fs := cli.NewFlagSet("starter "+c.name, io.Discard)
	err := entry.parse(c, fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stderr)
		fs.PrintDefaults()
	}
	return c, err
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
	if c.name == "result" {
		fs.BoolVar(&c.json, "json", false, "print JSON even on a terminal (it is printed whenever stdout is not one)")
		fs.StringVar(&c.outDir, "out", "", "write the produced files and the outputs into this folder (made when missing), under checked names")
		fs.BoolVar(&c.force, "force", false, "with --out: replace existing files (never a symlink or a folder)")
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
	if c.force && c.outDir == "" {
		return &cli.UsageError{Msg: "--force replaces files --out writes: give --out DIR"}
	}
	return nil
}
