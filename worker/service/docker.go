package service

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/metrics"
)

// DockerOptions configure the Docker backend; zero values take its defaults (see
// backends/docker.Config).
type DockerOptions struct {
	// Image, Runtime ("runc", or "runsc" or "runsc-NAME" for gVisor), Network, MemoryBytes, CPUs,
	// Pids and IPC are the sandbox container's.
	Image       string
	Runtime     string
	Network     string
	MemoryBytes int64
	CPUs        float64
	Pids        int64
	IPC         string
	// UIDRange is the range of uids sandboxes run as ("100000-100999"); Deployment names this
	// deployment on the Docker host for the reaper. Optional: the backend's default range, and
	// "NAMESPACE/TASK_QUEUE".
	UIDRange   string
	Deployment string
	// WarmSandboxes is how many containers this worker keeps started ahead of need, each serving
	// one run (0 turns the pool off). A value above MaxSandboxes counts as MaxSandboxes.
	WarmSandboxes int
	// WarmSandboxesFromHost (set when --warm-sandboxes was not given) derives WarmSandboxes from
	// the host at start (see SizeForHost).
	WarmSandboxesFromHost bool
	// WarmMaxAge is how long a started container may wait; an older one is replaced. Workers of
	// one deployment should share it: the reaper takes a waiting container older than it (plus
	// 30 s) for an orphan. Optional: defaults to 5 minutes.
	WarmMaxAge time.Duration
}

// dockerKind is the Docker backend's entry in backendKinds.
func dockerKind() backendKind {
	return backendKind{
		name: kinds.Docker,
		flags: func(fs *flag.FlagSet, o *Options) {
			d := &o.Docker
			fs.StringVar(&d.Image, "docker-image", "python:3.12-slim", "image with python3 and sh; never pulled (pull or build it first)")
			fs.StringVar(&d.Runtime, "docker-runtime", "runc", "container runtime: runc, or runsc (or runsc-NAME, another gVisor installation) for gVisor")
			fs.StringVar(&d.Network, "docker-network", "", "Docker network for runs that ask for network (default bridge: open egress)")
			fs.Int64Var(&d.MemoryBytes, "docker-memory-bytes", 0, "memory limit of a sandbox, no swap (default 256 MiB)")
			fs.Float64Var(&d.CPUs, "docker-cpus", 0, "CPUs of a sandbox (default 1)")
			fs.Int64Var(&d.Pids, "docker-pids", 0, "process limit of a sandbox (default 64 under runc, higher under runsc)")
			fs.StringVar(&d.IPC, "docker-ipc", "", "IPC mode: private (default: a private /dev/shm, so multiprocessing works) or none (no /dev/shm)")
			fs.StringVar(&d.UIDRange, "docker-uid-range", "", "uids the sandboxes run as, one per concurrent sandbox (default 100000-100999; never 0)")
			fs.StringVar(&d.Deployment, "docker-deployment", "", "this deployment's name on the Docker host; the reaper removes only its containers (default NAMESPACE/TASK_QUEUE)")
			fs.IntVar(&d.WarmSandboxes, "warm-sandboxes", 2, "Docker containers kept started ahead of need, each used for one run then removed (0: none; at most 64; unset: from the host, min(4×max, 0.75×memory/--docker-memory-bytes − max, 64), logged at start and shown by doctor)")
			fs.DurationVar(&d.WarmMaxAge, "warm-max-age", docker.DefaultWarmMaxAge, "how long a started container may wait for a run before it is replaced")
		},
		emptyOK:  []string{"docker-network", "docker-ipc"},
		validate: validateDocker,
		build:    newDockerBackend,
		observe: func(b guard.Backend, m *metrics.Metrics, o *Options) {
			if db, ok := b.(*docker.Backend); ok && o.Docker.WarmSandboxes > 0 {
				m.WarmPool(func() (int, uint64, uint64, uint64) {
					s := db.WarmStats()
					return s.Idle, s.Taken, s.Cold, s.Discarded
				})
			}
		},
		doctor: dockerChecks,
		reapExtra: func(o *Options) time.Duration {
			if o.Docker.WarmSandboxes == 0 {
				return 0
			}
			if o.Docker.WarmMaxAge == 0 {
				return docker.DefaultWarmMaxAge
			}
			return o.Docker.WarmMaxAge
		},
		egress:       true,
		packages:     true,
		metricsLabel: func(o *Options) string { return o.Docker.Runtime },
		// One container kept for the session (backends/docker, OpenSession).
		sessions: true,
	}
}

// validateDocker checks the Docker settings that need no daemon.
func validateDocker(o *Options) error {
	d := &o.Docker
	if d.WarmSandboxes < 0 || d.WarmSandboxes > docker.MaxWarmSandboxes {
		return &guard.ConfigError{Msg: fmt.Sprintf("--warm-sandboxes %d: want 0 (no pool) to %d", d.WarmSandboxes, docker.MaxWarmSandboxes)}
	}
	if d.WarmMaxAge < 0 || (d.WarmMaxAge > 0 && d.WarmMaxAge < time.Second) {
		return &guard.ConfigError{Msg: fmt.Sprintf("--warm-max-age %s: want at least 1s", d.WarmMaxAge)}
	}
	if d.Runtime != "runc" && d.Runtime != "" && !docker.IsGVisor(d.Runtime) {
		return &guard.ConfigError{Msg: fmt.Sprintf("--docker-runtime %q: want runc, or runsc (or runsc-NAME) for gVisor", d.Runtime)}
	}
	return nil
}

func dockerConfig(cfg *Options, withCA bool, logger *slog.Logger) (docker.Config, error) {
	d := &cfg.Docker
	runtime := d.Runtime
	if runtime == "runc" {
		runtime = ""
	}
	var uids docker.UIDRange
	if d.UIDRange != "" {
		var err error
		if uids, err = docker.ParseUIDRange(d.UIDRange); err != nil {
			return docker.Config{}, &guard.ConfigError{Msg: fmt.Sprintf("--docker-uid-range: %v", err)}
		}
	}
	eg, err := dockerEgress(cfg, withCA, logger)
	if err != nil {
		return docker.Config{}, err
	}
	packages, err := cfg.packageInstaller()
	if err != nil {
		return docker.Config{}, err
	}
	deployment := d.Deployment
	if deployment == "" {
		deployment = cfg.Conn.WithDefaults().Namespace + "/" + cfg.TaskQueue
	}
	return docker.Config{
		UIDs:          uids,
		Deployment:    deployment,
		Image:         d.Image,
		Runtime:       runtime,
		CPUs:          d.CPUs,
		MemoryBytes:   d.MemoryBytes,
		PidsLimit:     d.Pids,
		Network:       d.Network,
		IPC:           d.IPC,
		WarmSandboxes: d.WarmSandboxes,
		WarmMaxAge:    d.WarmMaxAge,
		Logger:        logger,
		Egress:        eg,
		Packages:      packages,
		// Runs and sessions share the host's sandbox slots; a session's container is reaped
		// once its workflow run has ended (or, without Temporal to ask, past the lifetime cap).
		MaxSandboxes:       cfg.MaxSandboxes,
		SessionEnded:       cfg.sessionEnded,
		NamespaceID:        cfg.namespaceID,
		MaxSessionLifetime: cfg.Policy().WithDefaults().MaxSessionLifetime,
	}, nil
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
	dc, err := dockerConfig(cfg, false, slog.Default())
	if err != nil {
		return []check{{name: "docker config", ok: false, detail: err.Error()}}
	}
	return checksOf(docker.Doctor(ctx, doctorDockerConfig(dc)))
}

// doctorDockerConfig is dc for doctor's probe: one container, created for the probe and removed
// after it, never a warm pool started for a run that will not come (the pool's size is shown on
// the sandboxes line).
func doctorDockerConfig(dc docker.Config) docker.Config {
	dc.WarmSandboxes = 0
	return dc
}
