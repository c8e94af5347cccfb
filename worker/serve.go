package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/devserver"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// defaultDevCodecPort is where --dev serves the codec server when a key file is set.
const defaultDevCodecPort = 8234

func serve(ctx context.Context, cfg *config, logger *slog.Logger) error {
	var ring *codec.KeyRing
	if cfg.keyFile != "" {
		var err error
		if ring, err = codec.LoadKeyRing(cfg.keyFile); err != nil {
			return err
		}
		logger.Info("payload encryption on", "key_ids", ring.KeyIDs(), "current", ring.CurrentKeyID())
	}
	codec.WarnIfPlaintext(logger, ring)

	conn := cfg.conn.WithDefaults()
	conn.KeyRing = ring
	conn.Logger = logger

	if ring != nil && (cfg.codecPrt > 0 || cfg.dev) {
		port := cfg.codecPrt
		if port == 0 {
			port = defaultDevCodecPort
		}
		endpoint, err := startCodecServer(ctx, cfg, ring, port, logger)
		if err != nil {
			return err
		}
		if cfg.dev {
			cfg.devCodecEndpoint = endpoint
		}
	}

	if cfg.dev {
		srv, err := devserver.Start(ctx, devserver.Config{
			Address:          conn.Address,
			Namespace:        conn.Namespace,
			DataDir:          cfg.dataDir,
			UIPort:           cfg.uiPort,
			SearchAttributes: contract.SearchAttributeKeys(),
			Codec:            devserver.Codec{Endpoint: cfg.devCodecEndpoint, IncludeCredentials: cfg.devCodecEndpoint != ""},
			Logger:           logger,
		})
		if err != nil {
			return fmt.Errorf("dev server: %w", err)
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				logger.Error("dev server stop", "error", err)
			}
		}()
		conn.Address = srv.FrontendAddress()
		logger.Info("dev server ready: Temporal "+srv.FrontendAddress()+", Web UI "+srv.UIURL(),
			"namespace", srv.Namespace(), "database", srv.DatabasePath())
	}

	reviewers, err := reviewersFile(cfg, logger)
	if err != nil {
		return err
	}

	tc, err := client.Dial(ctx, conn)
	if err != nil {
		return err
	}
	defer tc.Close()

	if !cfg.dev {
		missing, err := contract.MissingSearchAttributes(ctx, tc.OperatorService(), conn.Namespace)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return &guard.ConfigError{Msg: fmt.Sprintf("namespace %s lacks the search attributes %v; create them once with\n%s",
				conn.Namespace, missing, "  "+contract.CreateSearchAttributesCommand(conn.Namespace, missing))}
		}
	}

	var backend guard.Backend
	if cfg.role != roleWorkflows {
		b, closeBackend, err := newBackend(ctx, cfg, logger)
		if err != nil {
			return err
		}
		defer closeBackend()
		backend = b
	}
	acts, err := activities.New(activities.Config{
		Policy:           cfg.policy(),
		Backend:          backend,
		BackendName:      backendName(cfg),
		Sink:             activities.SlogSink{Logger: logger},
		SandboxTaskQueue: cfg.sandboxTaskQueue,
		HeartbeatTimeout: cfg.heartbeat,
		ReviewersFile:    reviewers,

		ScheduleToStartTimeout: cfg.scheduleToStart,
	})
	if err != nil {
		return err
	}

	var workers []worker.Worker
	sandboxQueue := cfg.sandboxTaskQueue
	if sandboxQueue == "" {
		sandboxQueue = cfg.taskQueue
	}
	if cfg.role != roleSandboxes {
		opts := worker.Options{}
		if sandboxQueue == cfg.taskQueue && backend != nil {
			opts.MaxConcurrentActivityExecutionSize = cfg.maxSandboxes
		}
		w := worker.New(tc, cfg.taskQueue, opts)
		workflows.Register(w)
		acts.Register(w)
		workers = append(workers, w)
	}
	if backend != nil && sandboxQueue != cfg.taskQueue {
		w := worker.New(tc, sandboxQueue, worker.Options{MaxConcurrentActivityExecutionSize: cfg.maxSandboxes})
		acts.Register(w)
		workers = append(workers, w)
	}
	for _, w := range workers {
		if err := w.Start(); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		defer w.Stop()
	}
	logger.Info("worker running", "task_queue", cfg.taskQueue, "sandbox_task_queue", sandboxQueue,
		"role", cfg.role, "backend", backendName(cfg), "max_sandboxes", cfg.maxSandboxes, "policy", cfg.policy().String())
	<-ctx.Done()
	logger.Info("worker stopping")
	return nil
}

func backendName(cfg *config) string {
	if cfg.backend == "local" {
		return "local"
	}
	return dockerBackendName(cfg)
}

func startCodecServer(ctx context.Context, cfg *config, ring *codec.KeyRing, port int, logger *slog.Logger) (string, error) {
	token := cfg.codecTok
	if token == "" {
		var err error
		if token, err = codec.NewToken(); err != nil {
			return "", err
		}
		logger.Warn("codec server token (give it to operators who may read decoded payloads): " + token)
	}
	uiOrigin := "http://127.0.0.1:" + strconv.Itoa(cfg.uiPort)
	srv, err := codec.NewServer(ring, codec.ServerOptions{Token: token, AllowedOrigins: []string{uiOrigin, "http://localhost:" + strconv.Itoa(cfg.uiPort)}})
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("codec server: listen on %s: %w", addr, err)
	}
	go func() {
		if err := srv.Serve(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
			logger.Error("codec server stopped", "error", err)
		}
	}()
	endpoint := "http://" + addr
	logger.Info("codec server on " + endpoint + " (bearer token required): the temporal CLI takes --codec-endpoint " + endpoint +
		" --codec-auth \"Bearer $TOKEN\"; in a browser open " + endpoint + "/login once, enter the token, then reload the Web UI")
	return endpoint, nil
}
