package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/guard"
)

func dockerBackendName(*Options) string { return docker.Name }

func dockerConfig(cfg *Options, withCA bool, logger *slog.Logger) (docker.Config, error) {
	runtime := cfg.DockerRuntime
	if runtime == "runc" {
		runtime = ""
	}
	var uids docker.UIDRange
	if cfg.DockerUIDRange != "" {
		var err error
		if uids, err = docker.ParseUIDRange(cfg.DockerUIDRange); err != nil {
			return docker.Config{}, &guard.ConfigError{Msg: fmt.Sprintf("--docker-uid-range: %v", err)}
		}
	}
	eg, err := dockerEgress(cfg, withCA, logger)
	if err != nil {
		return docker.Config{}, err
	}
	deployment := cfg.DockerDeployment
	if deployment == "" {
		deployment = cfg.Conn.WithDefaults().Namespace + "/" + cfg.TaskQueue
	}
	return docker.Config{
		UIDs:          uids,
		Deployment:    deployment,
		Image:         cfg.DockerImage,
		Runtime:       runtime,
		CPUs:          cfg.DockerCPUs,
		MemoryBytes:   cfg.DockerMemoryBytes,
		PidsLimit:     cfg.DockerPids,
		Network:       cfg.DockerNetwork,
		IPC:           cfg.DockerIPC,
		WarmSandboxes: min(cfg.WarmSandboxes, cfg.MaxSandboxes),
		WarmMaxAge:    cfg.WarmMaxAge,
		Logger:        logger,
		Egress:        eg,
	}, nil
}

// reapAge is how old a sandbox container must be before the reaper takes it for an orphan: older
// than any run the policy allows (after the longest wait in the warm pool), so a live run on
// another worker of the same daemon is left alone.
func reapAge(cfg *Options) time.Duration {
	p := cfg.Policy()
	age := p.MaxTimeout + p.Grace + time.Minute
	if cfg.Backend == "docker" && cfg.WarmSandboxes > 0 {
		warm := cfg.WarmMaxAge
		if warm == 0 {
			warm = docker.DefaultWarmMaxAge
		}
		age += warm
	}
	return age
}

// newDockerBackend builds the Docker backend, removes orphaned sandboxes at once and starts the
// reaper that looks for more every --reap-interval.
func newDockerBackend(ctx context.Context, cfg *Options, logger *slog.Logger) (guard.Backend, func(), error) {
	dc, err := dockerConfig(cfg, true, logger)
	if err != nil {
		return nil, nil, err
	}
	b, err := docker.New(dc)
	if err != nil {
		return nil, nil, err
	}
	// A wrong image or pin stops the worker at start-up rather than failing every run.
	if id, err := b.CheckImage(ctx); err != nil {
		return nil, nil, err
	} else {
		logger.Info("sandbox image", "image", dc.Image, "id", id)
	}
	reapCtx, stopReaper := context.WithCancel(context.WithoutCancel(ctx))
	reaped := reapEvery(reapCtx, b, cfg.ReapInterval, reapAge(cfg), logger)
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
	dc, err := dockerConfig(cfg, false, slog.Default())
	if err != nil {
		return []check{{name: "docker config", ok: false, detail: err.Error()}}
	}
	for _, c := range docker.Doctor(ctx, dc) {
		out = append(out, check{name: c.Name, ok: c.OK, detail: c.Detail})
	}
	return out
}
