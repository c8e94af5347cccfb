package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/inbox"
	"github.com/sandboxflow/sandboxflow/internal/cli"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// inboxMain serves the reviewers' inbox until ctx ends: `starter inbox --listen 127.0.0.1:8235`.
// It prints no JSON document, and returns the exit code: 2 for a usage error, 1 for a failure.
func inboxMain(ctx context.Context, args []string, _, stderr io.Writer) int {
	var l inbox.Listen
	fs, c := serverFlags("inbox", stderr)
	fs.StringVar(&l.Addr, "listen", envOr("SANDBOXFLOW_INBOX_LISTEN", inbox.DefaultListen), "host:port to serve the inbox on (other than loopback needs --tls-cert and --tls-key)")
	fs.StringVar(&l.CertFile, "tls-cert", os.Getenv("SANDBOXFLOW_INBOX_TLS_CERT"), "TLS certificate (PEM)")
	fs.StringVar(&l.KeyFile, "tls-key", os.Getenv("SANDBOXFLOW_INBOX_TLS_KEY"), "TLS key (PEM)")
	fs.StringVar(&l.Origin, "origin", os.Getenv("SANDBOXFLOW_INBOX_ORIGIN"), "the URL reviewers open (default http://localhost:PORT on loopback; its host is the passkeys' relying party id)")
	reviewers := fs.String("reviewers", os.Getenv("SANDBOXFLOW_REVIEWERS"), "the reviewers file (OpenSSH allowed_signers), read again when it changes (required)")
	counters := fs.String("passkey-counters", os.Getenv("SANDBOXFLOW_INBOX_PASSKEY_COUNTERS"), "where the inbox keeps each passkey's last signature counter, to refuse one that does not grow (default: in memory, forgotten on restart)")
	hosts := fs.String("hosts", os.Getenv("SANDBOXFLOW_HOSTS"), "verify every result and cell against these sandbox hosts' keys (the workers' hosts file; default: the keys each run's check recorded)")
	sandboxQueue := fs.String("sandbox-task-queue", os.Getenv("SANDBOXFLOW_SANDBOX_TASK_QUEUE"), "the sandbox task queue statements name when a run's status does not (default: --task-queue)")
	if code, ok := parseServerFlags(fs, args, stderr, "key-file", "tls-cert", "tls-key", "origin", "sandbox-task-queue", "passkey-counters", "hosts"); !ok {
		return code
	}
	if *reviewers == "" {
		fmt.Fprintln(stderr, "starter inbox: --reviewers FILE (or SANDBOXFLOW_REVIEWERS) is required: the same reviewers file the workers use")
		return cli.ExitUsage
	}
	var hostKeys *receipt.Hosts
	if *hosts != "" {
		var err error
		if hostKeys, err = receipt.LoadHosts(*hosts); err != nil {
			fmt.Fprintln(stderr, "starter inbox: --hosts:", err)
			return cli.ExitUsage
		}
	}
	if err := serveInbox(ctx, c, l, inboxFiles{reviewers: *reviewers, counters: *counters, hosts: hostKeys}, *sandboxQueue, stderr); err != nil {
		fmt.Fprintln(stderr, "starter inbox:", err)
		return 1
	}
	return 0
}

// inboxFiles are what the inbox reads besides Temporal: the reviewers file, where it keeps the
// passkeys' counters, and the sandbox hosts' keys (nil: each check's).
type inboxFiles struct {
	reviewers, counters string
	hosts               *receipt.Hosts
}

// serveInbox dials Temporal and serves the inbox until ctx ends.
func serveInbox(ctx context.Context, c *command, l inbox.Listen, f inboxFiles, sandboxQueue string, stderr io.Writer) error {
	origin, err := l.Check()
	if err != nil {
		return err
	}
	tc, opts, err := client.DialKeys(ctx, c.conn, c.keyFile)
	if err != nil {
		return err
	}
	defer tc.Close()
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	srv, err := inbox.New(inbox.Config{
		Temporal: tc, DataConverter: opts.DataConverter, Namespace: opts.Namespace, TaskQueue: c.taskQueue, SandboxTaskQueue: sandboxQueue,
		ReviewersPath: f.reviewers, Origin: origin, Logger: logger, PasskeyCountersPath: f.counters, Hosts: f.hosts,
	})
	if err != nil {
		return err
	}
	return inbox.Serve(ctx, l, srv, func(addr string) {
		fmt.Fprintf(stderr, "reviewers' inbox on %s (listening on %s; relying party %s; reviewers %s)\n", origin, addr, srv.RPID(), f.reviewers)
	})
}

// serverFlags returns the flag set of a server command (inbox, mcp) with the connection flags.
func serverFlags(name string, stderr io.Writer) (*flag.FlagSet, *command) {
	fs := cli.NewFlagSet("starter "+name, stderr)
	c := &command{name: name}
	c.addConnFlags(fs)
	return fs, c
}

// parseServerFlags parses a server command's flags; when it returns false the command ends with
// code (0 after -h, 2 for a usage error, which it printed).
func parseServerFlags(fs *flag.FlagSet, args []string, stderr io.Writer, mayBeEmpty ...string) (code int, ok bool) {
	_, err := cli.Parse(fs, args, 0, 0, mayBeEmpty...)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		return 0, false
	}
	fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
	return cli.ExitUsage, false
}
