package service

import (
	"context"
	"log/slog"

	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/guard"
)

// NewBackend builds the configured backend (and starts its reaper); closeBackend releases it when
// the worker stops.
func NewBackend(ctx context.Context, cfg *Options, logger *slog.Logger) (b guard.Backend, closeBackend func(), err error) {
	if cfg.Backend == "local" {
		lb, err := local.New(local.Config{AllowUnsafeLocal: cfg.AllowUnsafeLocal, Logger: logger, UID: local.DefaultUID})
		if err != nil {
			return nil, nil, err
		}
		logger.Warn("WARNING: " + lb.RunWarning())
		return lb, func() {}, nil
	}
	if cfg.Backend == backendE2B || cfg.Backend == backendHTTP {
		return newHostedBackend(ctx, cfg, logger)
	}
	return newDockerBackend(ctx, cfg, logger)
}
