// Command worker runs sandboxflow's Temporal worker: the RunCode and Session workflows, their
// checks and notifications, and the sandbox host's activities (runs, sessions' sandboxes and
// cells, each verified, claimed, run once and signed with a receipt), over the configured backend
// and policy. --role workflows or --role sandboxes runs one side only. With --dev it also embeds a
// Temporal server with its Web UI and the reviewers' inbox (and, with a key file, the codec
// server), and makes development reviewer and host keys. Its flags are documented in docs/operating.md.
//
//	worker [flags]          run the worker (--dev: with an embedded Temporal server and Web UI)
//	worker doctor [flags]   check the reviewers file, Temporal, the namespace, the search
//	                        attributes, that workers poll the task queues, the backend, the
//	                        host key against the hosts file, sandbox counts and sessions
//
// Every flag falls back to the environment variable SANDBOXFLOW_<FLAG> (--docker-image reads
// SANDBOXFLOW_DOCKER_IMAGE); --address and --namespace read TEMPORAL_ADDRESS and
// TEMPORAL_NAMESPACE. Run `worker -h` for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandboxflow/sandboxflow/internal/cli"
	"github.com/sandboxflow/sandboxflow/worker/service"
)

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && args[0] == "doctor" {
		cmd, args = "doctor", args[1:]
	}
	cfg, _, err := parseConfig("worker", args)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	var usage *cli.UsageError
	if errors.As(err, &usage) {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(cli.ExitUsage)
	}
	if err != nil {
		// A setting that parses but is refused (a ConfigError): nothing has started.
		slog.Error("worker: refused configuration", slog.String("error", err.Error()))
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := newLogger(cfg.LogLevel)
	slog.SetDefault(logger)
	w, err := service.New(*cfg, logger)
	if err != nil {
		logger.Error("worker: refused configuration", slog.String("error", err.Error()))
		os.Exit(1)
	}
	if cmd == "doctor" {
		failed := w.Doctor(ctx, os.Stdout)
		stop()
		if failed {
			os.Exit(1)
		}
		return
	}
	if err := w.Serve(ctx); err != nil {
		stop()
		// log.Fatalf would go through slog's default handler at INFO: a failed start-up is an
		// ERROR.
		logger.Error("worker: stopped", slog.String("error", err.Error()))
		os.Exit(1)
	}
}

// newLogger returns the worker's logger at level, which Options.Validate has checked.
func newLogger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}
