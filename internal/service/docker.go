package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/guard"
)

func dockerBackendName(*Options) string { return docker.Name }

func dockerConfig(cfg *Options, logger *slog.Logger) docker.Config {
	runtime := cfg.DockerRuntime
	if runtime == "runc" {
		runtime = ""
	}
	return docker.Config{
		Image:       cfg.DockerImage,
		Runtime:     runtime,
		CPUs:        cfg.DockerCPUs,
		MemoryBytes: cfg.DockerMemoryBytes,
		PidsLimit:   cfg.DockerPids,
		Network:     cfg.DockerNetwork,
		IPC:         cfg.DockerIPC,
		Logger:      logger,
	}
}

// reapAge is how old a sandbox container must be before the reaper takes it for an orphan: older
// than any run the policy allows, so a live run on another worker of the same daemon is left alone.
func reapAge(cfg *Options) time.Duration {
	p := cfg.Policy()
	return p.MaxTimeout + p.Grace + time.Minute
}

// newDockerBackend builds the Docker backend, removes orphaned sandboxes at once and starts the
// reaper that looks for more every --reap-interval.
func newDockerBackend(ctx context.Context, cfg *Options, logger *slog.Logger) (guard.Backend, func(), error) {
	b, err := docker.New(dockerConfig(cfg, logger))
	if err != nil {
		return nil, nil, err
	}
	reapCtx, stopReaper := context.WithCancel(context.WithoutCancel(ctx))
	reaped := b.StartReaper(reapCtx, cfg.ReapInterval, reapAge(cfg))
	return b, func() {
		stopReaper()
		<-reaped
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := b.Close(cctx); err != nil {
			logger.Warn("docker backend close", "error", err)
		}
	}, nil
}

func dockerChecks(ctx context.Context, cfg *Options) []check {
	var out []check
	for _, c := range docker.Doctor(ctx, dockerConfig(cfg, slog.Default())) {
		out = append(out, check{name: c.Name, ok: c.OK, detail: c.Detail})
	}
	return out
}
