package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/inbox"
)

// inboxCmd serves the reviewers' inbox: `starter inbox --listen 127.0.0.1:8235`.
func inboxCmd(ctx context.Context, fs *flag.FlagSet, args []string) (int, error) {
	cf := addConnFlags(fs)
	var l inbox.Listen
	fs.StringVar(&l.Addr, "listen", envOr("SANDBOXFLOW_INBOX_LISTEN", inbox.DefaultListen), "host:port to serve the inbox on (other than loopback needs --tls-cert and --tls-key)")
	fs.StringVar(&l.CertFile, "tls-cert", os.Getenv("SANDBOXFLOW_INBOX_TLS_CERT"), "TLS certificate (PEM)")
	fs.StringVar(&l.KeyFile, "tls-key", os.Getenv("SANDBOXFLOW_INBOX_TLS_KEY"), "TLS key (PEM)")
	fs.StringVar(&l.Origin, "origin", os.Getenv("SANDBOXFLOW_INBOX_ORIGIN"), "the URL reviewers open (default http://localhost:PORT on loopback; its host is the passkeys' relying party id)")
	reviewers := fs.String("reviewers", os.Getenv("SANDBOXFLOW_REVIEWERS"), "the reviewers file (OpenSSH allowed_signers), read again when it changes (required)")
	sandboxQueue := fs.String("sandbox-task-queue", os.Getenv("SANDBOXFLOW_SANDBOX_TASK_QUEUE"), "the sandbox task queue statements name when a run's status does not (default: --task-queue)")
	if err := fs.Parse(args); err != nil {
		return 2, nil
	}
	if *reviewers == "" {
		return 2, errors.New("--reviewers FILE (or SANDBOXFLOW_REVIEWERS) is required: the same reviewers file the workers use")
	}
	origin, err := l.Check()
	if err != nil {
		return 2, err
	}
	tc, _, err := cf.dial(ctx)
	if err != nil {
		return 1, err
	}
	defer tc.Close()
	conn := cf.conn
	if cf.keyFile != "" {
		if conn.KeyRing, err = codec.LoadKeyRing(cf.keyFile); err != nil {
			return 1, err
		}
	}
	opts, err := conn.Options()
	if err != nil {
		return 1, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv, err := inbox.New(inbox.Config{
		Temporal: tc, DataConverter: opts.DataConverter, TaskQueue: cf.taskQueue, SandboxTaskQueue: *sandboxQueue,
		ReviewersPath: *reviewers, Origin: origin, Logger: logger,
	})
	if err != nil {
		return 1, err
	}
	err = inbox.Serve(ctx, l, srv, func(addr string) {
		fmt.Fprintf(os.Stderr, "reviewers' inbox on %s (listening on %s; relying party %s; reviewers %s)\n", origin, addr, srv.RPID(), *reviewers)
	})
	if err != nil {
		return 1, err
	}
	return 0, nil
}
