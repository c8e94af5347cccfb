// Command starter is how agent orchestrators, reviewers and auditors use sandboxflow from a
// terminal or a script: run, pending, show, statement, approve, deny, result, watch, cancel,
// audit, session, tool-schema, and two servers, inbox (the reviewers' web page) and mcp (tools for
// agents). Every command but the servers prints JSON on stdout, a failure too ({"error":
// {"type": ..., "message": ...}}), except that show, pending and session show print for a person
// unless given --json; usage errors exit 2, other failures 1. Each command goes through package
// client; the commands are documented in docs/orchestrators.md, docs/reviewing.md,
// docs/sessions.md and docs/receipts-and-audit.md, and `starter -h` lists their flags.
//
// It reaches Temporal through TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE (or --address and
// --namespace), and reads the payload keys from SANDBOXFLOW_KEY_FILE (or --key-file) when the
// workers encrypt payloads.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

const usage = `usage: starter COMMAND [flags]

commands:
  run --code CODE | --file F [--language python] [--input NAME=PATH]... [--env NAME=VALUE]...
      [--timeout 30s] [--network] [--capture-content] [--workflow-id ID] [--wait]
                       start a run; prints {"workflow_id", "run_id", "digest"}; --wait then prints the result
  pending [--json] [--page-size N] [--next-page TOKEN]
                       list the runs (and sessions with a waiting cell, kind "session") that wait for a decision, 100 (--page-size) at a time, newest first:
                       a table that ends with the next page's command, or --json for programs:
                       {"pending": [...], "next_page_token": "..." ("" on the last page)}
  show ID [--input-files] [--json]
                       everything a reviewer needs: code with line numbers, limits, env names,
                       digest, deadline, env values (sensitive ones as their length), start-up warnings
  statement ID --reviewer P [--deny] [--approval-id U] [--expires-in D]
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
  session open [--language python,sh]... [--input NAME=PATH]... [--env NAME=VALUE]... [--timeout 30s]
      [--network] [--allow-host P]... [--secret S]... [--lifetime 1h] [--idle-timeout 10m]
      [--max-cells 100] [--workflow-id ID]
                       open a session (one sandbox whose state lives across cells); prints
                       {"session_id", "run_id", "settings_digest"}
  session cell SESSION (--code CODE | FILE | -) [--language L] [--wait]
                       submit a cell; prints {"cell", "digest", ...}; --wait then prints its result
                       as result does (exit 1 with {"error": ...} when it did not run)
  session show SESSION [--input-files] [--json]
                       the settings and every cell: its code, its reviewer, its output; the waiting
                       cell marked; code shown as show shows it (tabs, invisible characters, warnings)
  session close SESSION [--reason R]
                       close it: a waiting cell is dropped, the sandbox removed; prints its status
  result ID [--timeout D] [--hosts F] [--follow]
                       wait for the run's result (exit 1 with {"error": ...} when it did not run, or
                       when its receipt does not verify against the hosts the check recorded, or F);
                       --follow prints its output on stderr as it comes (escaped), as watch does
  watch ID [--cell N] [--timeout D]
                       print the run's (or cell N's) output as it comes, escaped for the terminal
                       (stdout on stdout, stderr on stderr; "[N bytes skipped]" where this reader
                       missed some), then the result as result prints it
  audit ID [--run-id R]
                       the run's whole record from its history, one JSON document (docs/audit.schema.json)
  audit verify FILE --reviewers F --hosts F
                       check a record offline against your key files: the digest, every signature,
                       the receipt and the result's hashes; prints {"ok", "checks"}; exit 1 says what failed
  audit --since T      the records of the runs that finished after T (RFC 3339 or 1h), as JSON Lines
  cancel ID [--reason R] [--by NAME] [--wait]
                       cancel a waiting or running run; prints {"state", "by"}: a waiting run ends
                       with nothing run, a running sandbox is stopped and the result holds the output
                       printed before (outcome "cancelled"); --wait then prints that result
  tool-schema --format openai|anthropic [--languages python,sh] [--backend NAME]
  inbox --reviewers FILE [--listen 127.0.0.1:8235] [--tls-cert F --tls-key F]
                       serve the reviewers' inbox (a web page to read runs and sign with a passkey)
  mcp [--http 127.0.0.1:PORT] [--mcp-wait 50s] [--inbox-url URL] [--languages L] [--timeout D]
      [--allow-host P]... [--secret S]... [--env NAME=VALUE]... [--agent NAME]
                       serve the run_code and run_status tools, and open_session, run_cell, cell_status
                       and close_session (one sandbox per task, every cell approved), over MCP
                       (stdio, or streamable HTTP)

connection flags (every command but tool-schema; environment in brackets):
  --address HOST:PORT [TEMPORAL_ADDRESS]   --namespace NS [TEMPORAL_NAMESPACE]
  --task-queue Q [SANDBOXFLOW_TASK_QUEUE]  --key-file F [SANDBOXFLOW_KEY_FILE]
`

func main() {
	if len(os.Args) < 2 || os.Args[1] != "inbox" && os.Args[1] != "mcp" {
		shortLivedGC()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// shortLivedGC lets a command's heap grow to five times what it keeps (GOGC=400) unless GOGC
// or GOMEMLIMIT says otherwise: a command lives for one decision or one result, and its heap is a
// few MiB, so at Go's default it collected twice on the way to a result, each time on the path a
// reviewer waits on (about 3 ms of `approve --wait` on this 2-core machine). The servers (inbox,
// mcp) keep Go's default.
func shortLivedGC() {
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(400)
	}
}

// run runs one command line and returns the exit code: 0, 1 for a failure, 2 for a usage error.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Servers run until interrupted and print no JSON document.
	if len(args) > 0 && args[0] == "inbox" {
		return inboxMain(ctx, args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "mcp" {
		return mcpMain(ctx, args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "audit" {
		return auditMain(ctx, args[1:], stdout, stderr)
	}
	cmd, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		_ = client.WriteJSON(stdout, client.ErrorOutput{Error: client.ErrorBody{Type: client.TypeUsageError, Message: err.Error()}})
		fmt.Fprintf(stderr, "starter: %v\n%s", err, usage)
		return cli.ExitUsage
	}
	if err := execute(ctx, cmd, stdin, stdout, stderr); err != nil {
		var ue *cli.UsageError
		if errors.As(err, &ue) {
			_ = client.WriteJSON(stdout, client.ErrorOutput{Error: client.ErrorBody{Type: client.TypeUsageError, Message: err.Error()}})
			fmt.Fprintln(stderr, "starter:", err)
			return cli.ExitUsage
		}
		out := client.NewErrorOutput(err)
		var started startedError
		if errors.As(err, &started) {
			out.WorkflowID = started.workflowID
		}
		_ = client.WriteJSON(stdout, out)
		fmt.Fprintln(stderr, "starter:", err)
		return 1
	}
	return 0
}

// execute runs a parsed command: the commands that talk to Temporal share one dial.
func execute(ctx context.Context, cmd *command, stdin io.Reader, stdout, stderr io.Writer) error {
	if cmd.name == "tool-schema" {
		b, err := client.ToolSchema(cmd.format, cmd.tool)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(b))
		return err
	}
	if cmd.name == "run" {
		// Read what runs before dialling, so that a bad file fails without a connection.
		if err := cmd.readRequest(stdin); err != nil {
			return err
		}
		if err := client.CheckRequest(cmd.req); err != nil {
			return err
		}
	}
	if cmd.name == "session" {
		if err := cmd.readSession(stdin); err != nil {
			return err
		}
	}
	stopTracing, err := startTracing(ctx, &cmd.conn)
	if err != nil {
		return err
	}
	defer stopTracing()
	sc, err := client.Connect(ctx, cmd.conn, cmd.keyFile, cmd.taskQueue)
	if err != nil {
		return err
	}
	defer sc.Close()
	switch cmd.name {
	case "run":
		return runCmd(ctx, sc, cmd, stdout, stderr)
	case "pending":
		page, err := sc.PendingPage(ctx, cmd.pageSize, cmd.nextPage)
		if page.Runs == nil {
			page.Runs = []client.Pending{}
		}
		if err != nil || cmd.json {
			return printOr(stdout, page, err)
		}
		return printPending(stdout, page, cmd.pageSize, time.Now())
	case "show":
		// Env values are always read: the code's behaviour can depend on them.
		review, err := sc.Review(ctx, cmd.id, client.ReviewOptions{EnvValues: true, InputFiles: cmd.inputFiles})
		if err == nil && review.Warning != "" {
			fmt.Fprintln(stderr, "starter:", review.Warning)
		}
		if err == nil && review.NamesWarning != "" {
			fmt.Fprintln(stderr, "starter:", terminal(review.NamesWarning))
		}
		if err == nil {
			for _, w := range review.Request.Warnings {
				fmt.Fprintln(stderr, "starter: WARNING:", terminal(w.String()))
			}
		}
		if err != nil || cmd.json {
			return printOr(stdout, review, err)
		}
		return printReview(stdout, review, time.Now())
	case "session":
		return sessionCmd(ctx, sc, cmd, stdout, stderr)
	case "statement", "approve", "deny":
		session := cmd.cell > 0
		if !session && cmd.editFile == "" && (cmd.name == "deny" || cmd.name == "approve" && cmd.digest != "") {
			// A decision is tried as a run's first: its statement describes the workflow anyway,
			// and refuses a session by its type, so a run's decision costs no describe of its own.
			err := decideCmd(ctx, sc, cmd, stdout)
			var nr *client.NotRunCodeError
			if !errors.As(err, &nr) || nr.Type != contract.SessionWorkflowName {
				return err
			}
			session = true
		}
		if !session {
			var err error
			if session, err = sc.IsSession(ctx, cmd.id); err != nil {
				return err
			}
		}
		switch {
		case session && cmd.name == "statement":
			return cellStatementCmd(ctx, sc, cmd, stdout, stderr)
		case session:
			return decideCellCmd(ctx, sc, cmd, stdout, stderr)
		case cmd.name == "statement":
			return statementCmd(ctx, sc, cmd, stdout, stderr)
		}
		return decideCmd(ctx, sc, cmd, stdout)
	case "watch":
		return watchCmd(ctx, sc, cmd, stdout, stderr)
	case "result":
		if cmd.follow {
			return watchCmd(ctx, sc, cmd, stdout, stderr)
		}
		res, err := sc.WaitResult(ctx, cmd.id, cmd.waitTimeout)
		if err != nil {
			return err
		}
		if err := verifyResult(ctx, sc, cmd, res); err != nil {
			return err
		}
		return printResult(stdout, res)
	case "cancel":
		return cancelCmd(ctx, sc, cmd, stdout)
	}
	return fmt.Errorf("starter: command %q has no implementation", cmd.name)
}

// cancelCmd cancels the run as --by (else the client's default canceller) and prints what the
// run answered; with --wait, then its result.
func cancelCmd(ctx context.Context, sc *client.Client, cmd *command, stdout io.Writer) error {
	if cmd.by != "" {
		sc = sc.WithCanceller(cmd.by)
	}
	out, err := sc.Cancel(ctx, cmd.id, cmd.reason)
	if err != nil {
		return err
	}
	if err := client.WriteJSON(stdout, out); err != nil || !cmd.wait {
		return err
	}
	res, err := sc.WaitResult(ctx, cmd.id, 0)
	if err != nil {
		return err
	}
	return printResult(stdout, res)
}

// printOr prints v as JSON, unless err is set.
func printOr(stdout io.Writer, v any, err error) error {
	if err != nil {
		return err
	}
	return client.WriteJSON(stdout, v)
}

// printResult prints a run's result as JSON: the result itself, so that every field the host
// measured (the egress audit, the signal, the image ID) reaches the person or program reading it.
func printResult(stdout io.Writer, res guard.Result) error {
	return client.WriteJSON(stdout, res)
}

// startedError is an error about a run that was started: the error output names the run.
type startedError struct {
	workflowID string
	err        error
}

func (e startedError) Error() string { return e.err.Error() }
func (e startedError) Unwrap() error { return e.err }

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
	if err := client.WriteJSON(stdout, started); err != nil || !cmd.wait {
		return err
	}
	res, err := sc.WaitResult(ctx, started.WorkflowID, 0)
	if err != nil {
		return startedError{workflowID: started.WorkflowID, err: err}
	}
	return printResult(stdout, res)
}
