package service

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/inbox"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// reviewersPath is the reviewers file this worker's workflows and hosts verify decisions
// against, which the --dev inbox reads too: --reviewers (or SANDBOXFLOW_REVIEWERS), else the
// development reviewer's allowed_signers in the data folder (ReviewersFile makes it).
func reviewersPath(cfg *Options) string {
	if cfg.Reviewers != "" {
		return cfg.Reviewers
	}
	return filepath.Join(cfg.DataDir, "reviewer", "allowed_signers")
}

// startDevInbox serves the reviewers' inbox on 127.0.0.1:--inbox-port (http://localhost:PORT)
// beside the dev server, until ctx ends, verifying results against hostsFile (the worker's hosts
// file; "" for each check's). A failure is logged; the worker keeps running.
func startDevInbox(ctx context.Context, cfg *Options, tc tclient.Client, conn client.Connection, logger *slog.Logger, hostsFile string) error {
	if cfg.InboxPort < 0 {
		return nil
	}
	var hosts *receipt.Hosts
	if hostsFile != "" {
		var err error
		if hosts, err = receipt.LoadHosts(hostsFile); err != nil {
			return fmt.Errorf("inbox: hosts file: %w", err)
		}
	}
	opts, err := conn.Options()
	if err != nil {
		return err
	}
	l := inbox.Listen{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.InboxPort))}
	origin, err := l.Check()
	if err != nil {
		return err
	}
	reviewers := reviewersPath(cfg)
	srv, err := inbox.New(inbox.Config{
		Temporal: tc, DataConverter: opts.DataConverter, Namespace: opts.Namespace, TaskQueue: cfg.TaskQueue, SandboxTaskQueue: cfg.SandboxTaskQueue,
		ReviewersPath: reviewers, Origin: origin, Logger: logger, Hosts: hosts,
		PasskeyCountersPath: devInboxPasskeyCounters(cfg),
	})
	if err != nil {
		return err
	}
	go func() {
		err := inbox.Serve(ctx, l, srv, func(string) {
			logger.Info("reviewers' inbox on "+origin+" (register a passkey there; add its line to "+reviewers+")", "reviewers", reviewers)
		})
		if err != nil {
			logger.Error("reviewers' inbox stopped", "error", err)
		}
	}()
	return nil
}
