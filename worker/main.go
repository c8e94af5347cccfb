// Command worker runs sandboxflow's Temporal worker: the RunCode workflow, its check and the
// sandbox activity, over the configured backend and policy.
//
//	worker [flags]          run the worker (--dev: with an embedded Temporal server and Web UI)
//	worker doctor [flags]   check Temporal, the namespace, the search attributes and the backend
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
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
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
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := newLogger(cfg.logLevel)
	slog.SetDefault(logger)

	if cmd == "doctor" {
		failed := doctor(ctx, cfg, os.Stdout)
		stop()
		if failed {
			os.Exit(1)
		}
		return
	}
	if err := serve(ctx, cfg, logger); err != nil {
		stop()
		log.Fatalf("worker: %v", err)
	}
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}
