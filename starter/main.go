// Command starter is how agent orchestrators, reviewers and auditors use sandboxflow from a
// terminal or a script: run, pending, show, statement, approve, deny, review, result, watch,
// cancel, audit, session, tool-schema, and two servers, inbox (the reviewers' web page) and mcp
// (tools for agents). Every command but the servers prints one JSON document on stdout, a failure
// too ({"error": {"type": ..., "message": ...}}), except that show, pending and session show print
// for a person unless given --json, review prints what show prints and a tally, and result (and
// run, approve, session cell and cancel with --wait) prints the result for a person on a terminal
// unless given --json; usage errors exit 2 (the error and one line of help on stderr), other
// failures 1. Each command goes through package
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
	"strings"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
	"github.com/sandboxflow/sandboxflow/receipt"
)

func main() {
	if len(os.Args) < 2 || !isServer(os.Args[1]) {
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

// isServer says whether a command word names a server (inbox, mcp), which runs until interrupted.
func isServer(name string) bool {
	c := lookupCommand(name)
	return c != nil && c.server
}

// run runs one command line and returns the exit code: 0, 1 for a failure, 2 for a usage error.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Servers (which print no JSON document) and audit read their own command line.
	if len(args) > 0 {
		if c := lookupCommand(args[0]); c != nil && c.main != nil {
			return c.main(ctx, args[1:], stdout, stderr)
		}
	}
	cmd, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage())
		return 0
	}
	if err != nil {
		return usageFailed(stdout, stderr, args, err)
	}
	if err := execute(ctx, cmd, stdin, stdout, stderr); err != nil {
		var ue *cli.UsageError
		if errors.As(err, &ue) {
			return usageFailed(stdout, stderr, args, err)
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

// usageFailed reports a usage error: its JSON document on stdout, and on stderr the error and
// one line of help, the command's synopsis (`starter CMD -h` prints the whole usage text).
func usageFailed(stdout, stderr io.Writer, args []string, err error) int {
	_ = client.WriteJSON(stdout, client.ErrorOutput{Error: client.ErrorBody{Type: client.TypeUsageError, Message: err.Error()}})
	name := ""
	if len(args) > 0 && lookupCommand(args[0]) != nil {
		name = args[0]
	}
	msg := err.Error()
	var ue *cli.UsageError
	if errors.As(err, &ue) {
		msg = ue.Msg
	}
	fmt.Fprintf(stderr, "%s: %s\nusage: %s\n", strings.TrimSpace("starter "+name), msg, synopsis(name))
	return cli.ExitUsage
}

// execute runs a parsed command as its entry in the command table says: the commands that talk
// to Temporal share one dial, after reading what they send.
func execute(ctx context.Context, cmd *command, stdin io.Reader, stdout, stderr io.Writer) error {
	entry := lookupCommand(cmd.name)
	switch {
	case entry == nil || entry.offline == nil && entry.exec == nil:
		return fmt.Errorf("starter: command %q has no implementation", cmd.name)
	case entry.offline != nil:
		return entry.offline(cmd, stdout)
	}
	if entry.prepare != nil {
		if err := entry.prepare(cmd, stdin); err != nil {
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
	if sc, err = withHosts(sc, cmd); err != nil {
		return err
	}
	// A conversation's previous run is shown as decided only once its signature verified
	// against the reviewers file (the workers' own, as audit verify and inbox read it).
	sc = sc.WithReviewersFile(os.Getenv("SANDBOXFLOW_REVIEWERS"), os.Getenv("SANDBOXFLOW_PASSKEY_ORIGIN"))
	return entry.exec(ctx, sc, cmd, stdout, stderr)
}

// withHosts makes every result door of sc verify receipts against --hosts or SANDBOXFLOW_HOSTS,
// when either names a file (else against the hosts each run's check recorded).
func withHosts(sc *client.Client, cmd *command) (*client.Client, error) {
	file := cmd.hosts
	if file == "" {
		file = os.Getenv("SANDBOXFLOW_HOSTS")
	}
	if file == "" {
		return sc, nil
	}
	hosts, err := receipt.LoadHosts(file)
	if err != nil {
		return nil, fmt.Errorf("starter: hosts file: %w", err)
	}
	return sc.WithHosts(hosts), nil
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
