package main

import (
	"context"
	"log/slog"

	"github.com/sandboxflow/sandboxflow/guard"
)

func dockerBackendName(cfg *config) string { return "docker" }

func newDockerBackend(ctx context.Context, cfg *config, logger *slog.Logger) (guard.Backend, func(), error) {
	return nil, nil, &guard.ConfigError{Msg: "docker backend: not wired yet"}
}

func dockerChecks(ctx context.Context, cfg *config) []check { return nil }
