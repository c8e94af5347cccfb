package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sandboxflow/sandboxflow/client"
)

// A starterCommand is one entry of the command table: the words it answers to, its block of the
// usage text, and how its command line is parsed and run. The usage text, parseArgs, run and
// execute all read the table, so a new command is one entry here and one file that holds its
// parse and its exec.
type starterCommand struct {
	// names are the command words; commands that share a parser and a runner share an entry.
	names []string
	// help is the command's block of the usage text: its synopses from column 2, what it does
	// from column 24.
	help string
	// main runs a command that reads its own command line and prints its own errors (the
	// servers, audit), and returns the exit code. Such a command has no parse, offline or exec.
	main func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// server says that the command runs until interrupted: it keeps Go's default GC.
	server bool
	// parse adds the command's flags to fs and parses args (those after the command word) into
	// c. Every refusal is a *cli.UsageError, or flag.ErrHelp for -h. It does no I/O.
	parse func(c *command, fs *flag.FlagSet, args []string) error
	// offline runs a command that needs no connection to Temporal.
	offline func(c *command, stdout io.Writer) error
	// prepare, when set, reads what the command sends before any connection, so that a bad
	// file fails without one.
	prepare func(c *command, stdin io.Reader) error
	// exec runs the command with a client connected to Temporal.
	exec func(ctx context.Context, sc *client.Client, c *command, stdout, stderr io.Writer) error
}

// commands is every command of the starter, in the order the usage text lists them.
var commands = []starterCommand{
	{
		names: []string{"run"},
		help: `  run --code CODE | --file F [--language python] [--input NAME=PATH]... [--env NAME=VALUE]...
      [--timeout 30s] [--network] [--capture-content] [--workflow-id ID] [--wait]
                       start a run; prints {"workflow_id", "run_id", "digest"}; --wait then prints the result
`,
		parse: (*command).parseRun, prepare: prepareRun, exec: runCmd,
	},
	{
		names: []string{"pending"},
		help: `  pending [--json] [--page-size N] [--next-page TOKEN]
                       list the runs (and sessions with a waiting cell, kind "session") that wait for a decision, 100 (--page-size) at a time, newest first:
                       a table that ends with the next page's command, or --json for programs:
                       {"pending": [...], "next_page_token": "..." ("" on the last page)}
`,
		parse: (*command).parsePending, exec: pendingCmd,
	},
	{
		names: []string{"show"},
		help: `  show ID [--input-files] [--json]
                       everything a reviewer needs: code with line numbers, limits, env names,
                       digest, deadline, env values (sensitive ones as their length), start-up warnings
`,
		parse: (*command).parseReview, exec: showCmd,
	},
	{
		names: []string{"statement", "approve", "deny"},
		help: `  statement ID --reviewer P [--deny] [--approval-id U] [--expires-in D]
                       print the statement a reviewer signs (ssh-keygen -Y sign -n sandboxflow-approval);
                       it names P, the principal you sign as (--reviewer or SANDBOXFLOW_REVIEWER)
  approve ID --digest D --key FILE --reviewer P [--reason R] [--edit FILE] [--wait]
  deny ID --key FILE --reviewer P --reason R
                       sign the decision with your reviewer key (--key or SANDBOXFLOW_REVIEWER_KEY;
                       a .pub file signs through ssh-agent) as P and send it; approve --wait then
                       prints the result too
  approve SESSION --cell N --key FILE --reviewer P [--digest D] [--reason R] [--wait]
  deny SESSION --cell N --key FILE --reviewer P --reason R
  statement SESSION --cell N --reviewer P [--deny]
                       the same for cell N of a session: the statement binds the session, the cell's
                       code and every earlier cell with its output (checked against what session show
                       shows); without --cell, the cell that waits, printed on stderr first
`,
		parse: (*command).parseDecision, exec: decisionCmd,
	},
	{
		names: []string{"session"},
		help: `  session open [--language python,sh]... [--input NAME=PATH]... [--env NAME=VALUE]... [--timeout 30s]
      [--network] [--allow-host P]... [--secret S]... [--lifetime 1h] [--idle-timeout 10m]
      [--max-cells 100] [--workflow-id ID] [--conversation C]
                       open a session (one sandbox whose state lives across cells); prints
                       {"session_id", "run_id", "settings_digest"}; --conversation as run's
  session cell SESSION (--code CODE | FILE | -) [--language L] [--retries N] [--wait]
                       submit a cell; prints {"cell", "digest", ...}; --wait then prints its result
                       as result does (exit 1 with {"error": ...} when it did not run); --retries N
                       says it retries cell N (denied, failed, ...): reviewers see the diff against it
  session show SESSION [--input-files] [--json]
                       the settings and every cell: its code, its reviewer, its output; the waiting
                       cell marked; code shown as show shows it (tabs, invisible characters, warnings)
  session close SESSION [--reason R]
                       close it: a waiting cell is dropped, the sandbox removed; prints its status
`,
		parse: (*command).parseSession, prepare: (*command).readSession, exec: sessionCmd,
	},
	{
		names: []string{"review"},
		help: `  review --key FILE --reviewer P [--input-files]
                       walk what pending lists: show each run (session show each waiting cell) as
                       show does, then ask on stderr approve, deny (with a reason), skip or quit, read
                       the answer from stdin (a line: a, d, s, q), sign and send it as approve (the
                       digest shown) or deny does; ends with a one-line tally
`,
		parse: (*command).parseReviewLoop, prepare: prepareReviewLoop, exec: reviewLoopCmd,
	},
	{
		names: []string{"result"},
		help: `  result ID [--timeout D] [--hosts F] [--follow] [--json] [--out DIR [--force]]
                       wait for the run's result (exit 1 with {"error": ...} when it did not run, or
                       when its receipt does not verify against the hosts the check recorded, or F);
                       on a terminal a summary for a person (output escaped, files and outputs with
                       sizes and types, approvals, the host whose receipt verified), else or with
                       --json the result as JSON; --out writes the files and outputs into DIR
                       (output-<index>-<n>.<ext>), refusing unsafe names, symlinks and existing
                       files (--force replaces files); --follow prints its output on stderr as it
                       comes (escaped), as watch does
`,
		parse: (*command).parseReview, exec: resultCmd,
	},
	{
		names: []string{"watch"},
		help: `  watch ID [--cell N] [--timeout D]
                       print the run's (or cell N's) output as it comes, escaped for the terminal
                       (stdout on stdout, stderr on stderr), then the result on stdout; starter's
                       own lines begin with the record separator 0x1E, which the code's output
                       never holds: the result, and on stderr "[starter: N bytes of the code's
                       stdout skipped]" where this reader missed some
`,
		parse: (*command).parseReview, exec: watchCmd,
	},
	{
		names: []string{"audit"},
		help: `  audit ID [--run-id R]
                       the run's whole record from its history, one JSON document (docs/audit.schema.json)
  audit verify FILE --reviewers F --hosts F
                       check a record offline against your key files: the digest, every signature,
                       the receipt and the result's hashes; prints {"ok", "checks"}; exit 1 says what failed
  audit --since T      the records of the runs and sessions that finished after T (RFC 3339 or 1h), as JSON Lines
  audit --follow [--since T | --cursor C] [--settle D]
                       stream a record per check, decision, claim, refusal and end as they happen, as JSON
                       Lines (docs/schema/audit-stream.schema.json); resume after a record with its cursor;
                       audit verify accepts the lines
`,
		main: auditMain,
	},
	{
		names: []string{"policy"},
		help: `  policy test FILE REQUEST.json [--backend docker]
                       what a policy file's rules decide for a request (JSON, as RunCode takes it), starting
                       nothing: prints {"policy_hash", "refused", "rule", "reason", "quorum", "groups", "warnings"}; exit 1 when refused
`,
		main: policyMain,
	},
	{
		names: []string{"cancel"},
		help: `  cancel ID [--cell N] [--reason R] [--by NAME] [--wait]
                       cancel a waiting or running run; prints {"state", "by"}: a waiting run ends
                       with nothing run, a running sandbox is stopped and the result holds the output
                       printed before (outcome "cancelled"); --wait then prints that result. With
                       --cell N, cell N of a session (the one that waits or runs): the cell is
                       stopped and the session goes on (Docker; other backends end the session)
`,
		parse: (*command).parseCancel, exec: cancelCmd,
	},
	{
		names: []string{"tool-schema"},
		help: `  tool-schema --format openai|anthropic [--languages python,sh] [--backend NAME]
`,
		parse: (*command).parseToolSchema, offline: toolSchemaCmd,
	},
	{
		names: []string{"inbox"},
		help: `  inbox --reviewers FILE [--listen 127.0.0.1:8235] [--tls-cert F --tls-key F]
                       serve the reviewers' inbox (a web page to read runs and sign with a passkey)
`,
		main: inboxMain, server: true,
	},
	{
		names: []string{"mcp"},
		help: `  mcp [--http 127.0.0.1:PORT] [--mcp-wait 50s] [--inbox-url URL] [--languages L] [--timeout D]
      [--allow-host P]... [--secret S]... [--env NAME=VALUE]... [--agent NAME]
                       serve the run_code and run_status tools, and open_session, run_cell, cell_status
                       and close_session (one sandbox per task, every cell approved), over MCP
                       (stdio, or streamable HTTP)
`,
		main: mcpMain, server: true,
	},
}

// lookupCommand returns the table's entry for a command word, or nil.
func lookupCommand(name string) *starterCommand {
	for i := range commands {
		if slices.Contains(commands[i].names, name) {
			return &commands[i]
		}
	}
	return nil
}

// usage is the starter's usage text: every command's help, in the table's order, and the
// connection flags they share.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: starter COMMAND [flags]\n\ncommands:\n")
	for _, c := range commands {
		b.WriteString(c.help)
	}
	b.WriteString(`
connection flags (every command but tool-schema; environment in brackets):
  --address HOST:PORT [TEMPORAL_ADDRESS]   --namespace NS [TEMPORAL_NAMESPACE]
  --task-queue Q [SANDBOXFLOW_TASK_QUEUE]  --key-file F [SANDBOXFLOW_KEY_FILE]
`)
	return b.String()
}

// synopsis is one line of help for a command word: its synopsis from the usage text and how to
// read the rest; for no command (""), how to list them.
func synopsis(name string) string {
	if c := lookupCommand(name); c != nil {
		for _, line := range strings.Split(c.help, "\n") {
			if l := strings.TrimSpace(line); strings.HasPrefix(l, name+" ") || l == name {
				return fmt.Sprintf("starter %s (starter %s -h for more)", l, name)
			}
		}
		return fmt.Sprintf("starter %s [flags] (starter %s -h for more)", name, name)
	}
	return "starter COMMAND [flags] (starter -h lists the commands)"
}
