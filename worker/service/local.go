package service

import (
	"context"
	"flag"
	"log/slog"

	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/guard"
)

// LocalOptions configure the local backend (DEVELOPMENT ONLY).
type LocalOptions struct {
	// AllowUnsafe must be set for the local backend to start: nothing it runs is isolated.
	AllowUnsafe bool
}

// localKind is the local backend's entry in backendKinds.
func localKind() backendKind {
	return backendKind{
		name:  kinds.Local,
		usage: kinds.Local + " (DEVELOPMENT ONLY)",
		flags: func(fs *flag.FlagSet, o *Options) {
			fs.BoolVar(&o.Local.AllowUnsafe, "allow-unsafe-local", false, "let --backend local run: nothing is isolated")
		},
		build: func(_ context.Context, o *Options, logger *slog.Logger) (guard.Backend, func(), error) {
			lb, err := local.New(local.Config{AllowUnsafeLocal: o.Local.AllowUnsafe, Logger: logger, UID: local.DefaultUID})
			if err != nil {
				return nil, nil, err
			}
			logger.Warn("WARNING: " + lb.RunWarning())
			return lb, func() {}, nil
		},
		doctor: func(_ context.Context, o *Options) []check {
			_, err := local.New(local.Config{AllowUnsafeLocal: o.Local.AllowUnsafe, UID: local.DefaultUID})
			if err != nil {
				return []check{{name: "backend local", detail: err.Error()}}
			}
			return []check{{name: "backend local", ok: true, detail: "ready (DEVELOPMENT ONLY: nothing is isolated)"}}
		},
	}
}
