package service

import (
	"context"
	"flag"
	"log/slog"
	"path/filepath"

	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/devserver"
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
		// One local python3 per session (backends/local, OpenSession): development only.
		sessions: true,
		flags: func(fs *flag.FlagSet, o *Options) {
			fs.BoolVar(&o.Local.AllowUnsafe, "allow-unsafe-local", false, "let --backend local run: nothing is isolated")
		},
		build: func(_ context.Context, o *Options, logger *slog.Logger) (guard.Backend, func(), error) {
			lb, err := local.New(localConfig(o, logger))
			if err != nil {
				return nil, nil, err
			}
			logger.Warn("WARNING: " + lb.RunWarning())
			return lb, func() {}, nil
		},
		doctor: func(_ context.Context, o *Options) []check {
			_, err := local.New(localConfig(o, nil))
			if err != nil {
				return []check{{name: "backend local", detail: err.Error()}}
			}
			return []check{{name: "backend local", ok: true, detail: "ready (DEVELOPMENT ONLY: nothing is isolated)"}}
		},
	}
}

// localConfig is the local backend's configuration: the code runs as local.DefaultUID, which may
// not read the worker's payload keys, secrets file, --dev reviewer key or --dev database (its
// history, in the clear without payload keys), nor change the reviewers file or the passkey
// counters files (deleting one forgets every counter, and a cloned passkey's assertion is
// accepted again).
func localConfig(o *Options, logger *slog.Logger) local.Config {
	unreadable := []string{o.KeyFile, o.SecretsFile}
	unchangeable := []string{passkeyCounters(o)}
	if o.Dev {
		db := filepath.Join(o.DataDir, devserver.DatabaseFileName)
		unreadable = append(unreadable, filepath.Join(o.DataDir, "reviewer", "id_ed25519"), db)
		for _, side := range devserver.DatabaseSideFiles {
			unreadable = append(unreadable, db+side)
		}
		unchangeable = append(unchangeable, devInboxPasskeyCounters(o))
	}
	return local.Config{AllowUnsafeLocal: o.Local.AllowUnsafe, Logger: logger, UID: local.DefaultUID,
		Unreadable: unreadable, Unchangeable: append([]string{reviewersPath(o)}, unchangeable...)}
}
