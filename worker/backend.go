package main

import (
	"context"
	"log/slog"

	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/guard"
)

// newBackend builds the configured backend; closeBackend releases it when the worker stops.
func newBackend(ctx context.Context, cfg *config, logger *slog.Logger) (b guard.Backend, closeBackend func(), err error) {
	if cfg.backend == "local" {
		lb, err := local.New(local.Config{AllowUnsafeLocal: cfg.allowUnsafeLocal, Logger: logger})
		if err != nil {
			return nil, nil, err
		}
		logger.Warn("WARNING: " + local.Warning)
		return lb, func() {}, nil
	}
	if cfg.backend == backendE2B || cfg.backend == backendHTTP {
		return newHostedBackend(ctx, cfg, logger)
	}
	return newDockerBackend(ctx, cfg, logger)
}
