package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/internal/cli"
	"github.com/sandboxflow/sandboxflow/internal/smallfile"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// maxAuditBytes bounds an audit record read by audit verify.
const maxAuditBytes = 64 << 20

// auditMain runs `starter audit ID`, `starter audit verify FILE --reviewers F --hosts F` and
// `starter audit --since T` and `starter audit --follow`, and returns the exit code.
func auditMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usageErr := func(err error) int {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		_ = client.WriteJSON(stdout, client.ErrorOutput{Error: client.ErrorBody{Type: client.TypeUsageError, Message: err.Error()}})
		fmt.Fprintln(stderr, "starter:", err)
		return cli.ExitUsage
	}
	fail := func(err error) int {
		_ = client.WriteJSON(stdout, client.NewErrorOutput(err))
		fmt.Fprintln(stderr, "starter:", err)
		return 1
	}
	if len(args) > 0 && args[0] == "verify" {
		fs := cli.NewFlagSet("starter audit verify", stderr)
		reviewers := fs.String("reviewers", os.Getenv("SANDBOXFLOW_REVIEWERS"), "the reviewers' keys to verify the decisions against (allowed_signers)")
		hosts := fs.String("hosts", os.Getenv("SANDBOXFLOW_HOSTS"), "the sandbox hosts' keys to verify the receipt against (allowed_signers, host names as principals)")
		pos, err := cli.Parse(fs, args[1:], 1, 1)
		if err == nil && (*reviewers == "" || *hosts == "") {
			err = &cli.UsageError{Msg: "give --reviewers FILE and --hosts FILE: the check trusts your files, never the keys the record names"}
		}
		if err != nil {
			return usageErr(err)
		}
		return auditVerify(pos[0], *reviewers, *hosts, stdout, stderr)
	}
	c := &command{name: "audit"}
	fs := cli.NewFlagSet("starter audit", stderr)
	c.addConnFlags(fs)
	since := fs.String("since", "", "stream the record of every run and session that finished after T (RFC 3339, or a duration ago such as 1h) as JSON Lines")
	runID := fs.String("run-id", "", "the run of ID to export (default: its latest)")
	var fo followFlags
	fo.add(fs)
	pos, err := cli.Parse(fs, args, 0, 1)
	switch {
	case err != nil:
	case fo.follow && len(pos) != 0:
		err = &cli.UsageError{Msg: "--follow streams every run: give no run ID"}
	case fo.follow:
	case fo.cursor != "" || fo.settle != 0:
		err = &cli.UsageError{Msg: "--cursor and --settle go with --follow"}
	case *since == "" && len(pos) != 1:
		err = &cli.UsageError{Msg: "give a run ID, or --since T"}
	case *since != "" && len(pos) != 0:
		err = &cli.UsageError{Msg: "give a run ID or --since T, not both"}
	}
	var after time.Time
	if err == nil && *since != "" {
		after, err = parseSince(*since, time.Now())
	}
	if err != nil {
		return usageErr(err)
	}
	sc, err := client.Connect(ctx, c.conn, c.keyFile, c.taskQueue)
	if err != nil {
		return fail(err)
	}
	defer sc.Close()
	if fo.follow {
		return followAudit(ctx, sc, fo, after, stdout, fail)
	}
	if *since != "" {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if _, err := sc.AuditSince(ctx, after, func(rec contract.AuditRecord) error { return enc.Encode(rec) }); err != nil {
			return fail(err)
		}
		return 0
	}
	rec, err := sc.Audit(ctx, pos[0], *runID)
	if err != nil {
		return fail(err)
	}
	if err := client.WriteJSON(stdout, rec); err != nil {
		return fail(err)
	}
	return 0
}

// parseSince reads T: RFC 3339, or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, &cli.UsageError{Msg: fmt.Sprintf("--since %q: want RFC 3339 (2026-12-02T03:00:00Z) or a duration such as 1h", s)}
}

// auditVerify checks the record in file offline and prints the verdict; 1 when a check failed.
func auditVerify(file, reviewersFile, hostsFile string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		_ = client.WriteJSON(stdout, client.NewErrorOutput(err))
		fmt.Fprintln(stderr, "starter:", err)
		return 1
	}
	b, err := smallfile.Read(file, maxAuditBytes)
	if err != nil {
		return fail(fmt.Errorf("audit verify: %w", err))
	}
	reviewers, err := approval.LoadReviewers(reviewersFile)
	if err != nil {
		return fail(fmt.Errorf("audit verify: --reviewers: %w", err))
	}
	hosts, err := receipt.LoadHosts(hostsFile)
	if err != nil {
		return fail(fmt.Errorf("audit verify: --hosts: %w", err))
	}
	var v client.AuditVerdict
	if stream, ok, err := readStream(b); err != nil {
		return fail(fmt.Errorf("audit verify: %s: %w", file, err))
	} else if ok {
		v = client.VerifyAuditStream(stream, reviewers, hosts)
	} else {
		var rec contract.AuditRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return fail(fmt.Errorf("audit verify: %s: %w", file, err))
		}
		v = client.VerifyAudit(rec, reviewers, hosts)
	}
	if err := client.WriteJSON(stdout, v); err != nil {
		return fail(err)
	}
	if !v.OK {
		for _, c := range v.Checks {
			if !c.OK {
				fmt.Fprintf(stderr, "starter: audit verify: %s: %s\n", c.Name, c.Error)
			}
		}
		return 1
	}
	return 0
}
