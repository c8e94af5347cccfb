package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/devserver"
	"github.com/sandboxflow/sandboxflow/metrics"
	"github.com/sandboxflow/sandboxflow/notify"
	"github.com/sandboxflow/sandboxflow/rules"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// defaultDevCodecPort is where --dev serves the codec server when a key file is set.
const defaultDevCodecPort = 8234

// Worker is one worker process: the RunCode workflow, its check and the sandbox activity, over the
// configured backend and policy, with payload encryption and, for Dev, an embedded Temporal
// server and Web UI.
type Worker struct {
	opts   Options
	logger *slog.Logger
	notify *notify.Activities
}

// New validates opts and returns the worker, or a guard.ConfigError.
func New(opts Options, logger *slog.Logger) (*Worker, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Worker{opts: opts, logger: logger}, nil
}

// Doctor runs every check, prints one PASS or FAIL line each to out, and reports whether any
// failed.
func (w *Worker) Doctor(ctx context.Context, out io.Writer) (failed bool) {
	return doctor(ctx, &w.opts, out)
}

// Serve runs the worker until ctx ends. An error means it could not start (a ConfigError for a
// setting the environment refuses) or stopped abnormally.
func (w *Worker) Serve(ctx context.Context) error {
	cfg, logger := &w.opts, w.logger
	conn, codecEndpoint, err := w.setUpCodec(ctx)
	if err != nil {
		return err
	}
	if cfg.Dev {
		stop, err := w.startDevServer(ctx, &conn, codecEndpoint)
		if err != nil {
			return err
		}
		defer stop()
	}
	files, err := readTrustFiles(cfg, logger)
	if err != nil {
		return err
	}
	met, err := startMetrics(ctx, cfg, logger)
	if err != nil {
		return err
	}
	stopTracing, err := startTracing(ctx, &conn, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	tc, err := dialTemporal(ctx, conn, met)
	if err != nil {
		return err
	}
	defer tc.Close()
	serveWaiting(met, cfg, tc)
	if cfg.Dev {
		if err := startDevInbox(ctx, cfg, tc, conn, logger, files.hosts); err != nil {
			return err
		}
	} else if err := checkSearchAttributes(ctx, tc, conn.Namespace); err != nil {
		return err
	}
	backend, closeBackend, err := w.openBackend(ctx, tc, conn.Namespace, met)
	if err != nil {
		return err
	}
	defer closeBackend()
	topts, err := conn.Options()
	if err != nil {
		return err
	}
	if w.notify, err = notifyActivities(cfg, topts.DataConverter, logger, files.reviewers); err != nil {
		return err
	}
	acts, err := activities.New(w.activitiesConfig(files, topts.DataConverter, backend, met))
	if err != nil {
		return err
	}
	icpt := metricsInterceptors(met)
	stopWorkers, err := w.startWorkers(tc, acts, backend != nil, icpt)
	if err != nil {
		return err
	}
	defer stopWorkers()
	// The runs whose worker died on this host while their code ran get their results now, and
	// its sessions a worker that keeps their sandboxes.
	adopted := make(chan struct{})
	hosts := &adoptedHosts{w: w, tc: tc, acts: acts, icpt: icpt}
	go func() { defer close(adopted); acts.Adopt(ctx, tc, hosts.poll) }()
	defer hosts.stop()
	defer func() { <-adopted }()
	<-ctx.Done()
	logger.Info("worker stopping")
	return nil
}

// trustFiles are the files the checks record and the receipts are signed with: the reviewers
// file, and this host's key, name and hosts file.
type trustFiles struct {
	reviewers, hostKey, hostName, hosts string
	// rules are the policy rules (Options.PolicyFile); nil without a file.
	rules *rules.Set
}

// readTrustFiles finds the reviewers file and the receipt files (ReviewersFile, receiptFiles).
func readTrustFiles(cfg *Options, logger *slog.Logger) (trustFiles, error) {
	var f trustFiles
	var err error
	if f.reviewers, err = ReviewersFile(cfg, logger); err != nil {
		return f, err
	}
	f.hostKey, f.hostName, f.hosts, err = receiptFiles(cfg, logger)
	if err != nil || cfg.PolicyFile == "" {
		return f, err
	}
	if f.rules, err = rules.Load(cfg.PolicyFile); err != nil {
		return f, &guard.ConfigError{Msg: err.Error()}
	}
	logger.Info("policy rules loaded", "file", cfg.PolicyFile, "policy_hash", f.rules.Hash())
	return f, nil
}

// openBackend sizes this host and opens its sandbox backend, unless the worker runs workflows
// only (then the backend is nil). closeBackend is never nil.
func (w *Worker) openBackend(ctx context.Context, tc tclient.Client, namespace string, met *metrics.Metrics) (guard.Backend, func(), error) {
	cfg, logger := &w.opts, w.logger
	if cfg.Role == RoleWorkflows {
		return nil, func() {}, nil
	}
	how, err := cfg.sizeToHost(ctx)
	if err != nil {
		return nil, nil, err
	}
	logSizing(logger, how)
	if cfg.namespaceID, err = namespaceID(ctx, tc.WorkflowService(), namespace); err != nil {
		return nil, nil, err
	}
	cfg.sessionEnded = sessionEnded(tc)
	b, closeBackend, err := NewBackend(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	observeBackend(cfg, b, met)
	return b, closeBackend, nil
}

// activitiesConfig is the activities' configuration from the worker's options. A backend that
// keeps a sandbox for a session (guard.SessionBackend) gets this host's own queue for its
// sessions' holds and cells; any other refuses sessions.
func (w *Worker) activitiesConfig(files trustFiles, dc converter.DataConverter, backend guard.Backend, met *metrics.Metrics) activities.Config {
	cfg := &w.opts
	hostQueue := ""
	if backend != nil && guard.SessionsOffered(backend) {
		hostQueue = hostTaskQueue(cfg)
	}
	return activities.Config{
		Notify:           notifyRecorded(w.notify),
		DataConverter:    dc,
		Policy:           cfg.Policy(),
		Rules:            files.rules,
		Backend:          backend,
		BackendName:      cfg.Backend,
		HostTaskQueue:    hostQueue,
		NoSessions:       !cfg.kind().sessions,
		MaxSessions:      cfg.MaxSandboxes,
		Sink:             metricsSink(met, activities.SlogSink{Logger: w.logger}, cfg),
		SandboxTaskQueue: cfg.SandboxTaskQueue,
		HeartbeatTimeout: cfg.HeartbeatTimeout,
		LateResultWait:   cfg.LateResultWait,
		ReviewersFile:    files.reviewers,
		HostKeyFile:      files.hostKey,
		HostName:         files.hostName,
		HostsFile:        files.hosts,

		PasskeyOrigin:          passkeyOrigin(cfg),
		PasskeyCountersFile:    passkeyCounters(cfg),
		ScheduleToStartTimeout: cfg.ScheduleToStartTimeout,
		SpoolDir:               filepath.Join(cfg.DataDir, "spool"),
	}
}

// setUpCodec loads the payload keys (warning when there are none), completes the connection
// settings, and starts the codec server when one is asked for (always with Dev and a key file).
func (w *Worker) setUpCodec(ctx context.Context) (conn client.Connection, codecEndpoint string, err error) {
	cfg, logger := &w.opts, w.logger
	var ring *codec.KeyRing
	if cfg.KeyFile != "" {
		if ring, err = codec.LoadKeyRing(cfg.KeyFile); err != nil {
			return conn, "", err
		}
		logger.Info("payload encryption on", "key_ids", ring.KeyIDs(), "current", ring.CurrentKeyID())
	}
	codec.WarnIfPlaintext(logger, ring)
	conn = cfg.Conn.WithDefaults()
	conn.KeyRing = ring
	conn.Logger = logger
	if ring != nil && (cfg.CodecPort > 0 || cfg.Dev) {
		port := cfg.CodecPort
		if port == 0 {
			port = defaultDevCodecPort
		}
		if codecEndpoint, err = startCodecServer(ctx, cfg, ring, port, logger); err != nil {
			return conn, "", err
		}
	}
	return conn, codecEndpoint, nil
}

// startDevServer starts the embedded Temporal server and points conn at it; stop stops it.
func (w *Worker) startDevServer(ctx context.Context, conn *client.Connection, codecEndpoint string) (stop func(), err error) {
	cfg, logger := &w.opts, w.logger
	srv, err := devserver.Start(ctx, devserver.Config{
		Address:          conn.Address,
		Namespace:        conn.Namespace,
		DataDir:          cfg.DataDir,
		UIPort:           cfg.UIPort,
		SearchAttributes: contract.SearchAttributeKeys(),
		Codec:            devserver.Codec{Endpoint: codecEndpoint, IncludeCredentials: codecEndpoint != ""},
		Logger:           logger,
	})
	if err != nil {
		return nil, fmt.Errorf("dev server: %w", err)
	}
	conn.Address = srv.FrontendAddress()
	logger.Info("dev server ready: Temporal "+srv.FrontendAddress()+", Web UI "+srv.UIURL(),
		"namespace", srv.Namespace(), "database", srv.DatabasePath())
	return func() {
		if err := srv.Stop(); err != nil {
			logger.Error("dev server stop", "error", err)
		}
	}, nil
}

// checkSearchAttributes refuses to start against a namespace that lacks RunCode's search
// attributes, and says how to create them.
func checkSearchAttributes(ctx context.Context, tc tclient.Client, namespace string) error {
	missing, err := contract.MissingSearchAttributes(ctx, tc.OperatorService(), namespace)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return &guard.ConfigError{Msg: fmt.Sprintf("namespace %s lacks the search attributes %v; create them once with\n%s",
			namespace, missing, "  "+contract.CreateSearchAttributesCommand(namespace, missing))}
	}
	return nil
}

// startWorkers starts the Temporal workers of this role: the workflow task queue (with the
// sandbox activity too when it shares the queue) and the sandbox task queue, each capped at
// MaxSandboxes concurrent sandboxes.
func (w *Worker) startWorkers(tc tclient.Client, acts *activities.Activities, hasBackend bool, icpt []interceptor.WorkerInterceptor) (stop func(), err error) {
	cfg := &w.opts
	var workers []worker.Worker
	sandboxQueue := cfg.SandboxTaskQueue
	if sandboxQueue == "" {
		sandboxQueue = cfg.TaskQueue
	}
	if cfg.Role != RoleSandboxes {
		opts := cfg.workflowWorkerOptions(worker.Options{Interceptors: icpt, MaxHeartbeatThrottleInterval: activities.MaxHeartbeatInterval})
		if sandboxQueue == cfg.TaskQueue && hasBackend {
			opts.MaxConcurrentActivityExecutionSize = cfg.MaxSandboxes
			opts = activities.WorkerOptions(opts) // live output within LiveInterval
		}
		wf := worker.New(tc, cfg.TaskQueue, opts)
		workflows.Register(wf)
		acts.Register(wf)
		w.notify.Register(wf)
		workers = append(workers, wf)
	}
	if hasBackend && sandboxQueue != cfg.TaskQueue {
		sw := worker.New(tc, sandboxQueue, activities.WorkerOptions(worker.Options{MaxConcurrentActivityExecutionSize: cfg.MaxSandboxes, Interceptors: icpt}))
		acts.Register(sw)
		workers = append(workers, sw)
	}
	if hasBackend && acts.HostTaskQueue() != "" {
		// This host's own queue, for its sessions' holds and cells: a hold and a cell for each
		// of at most MaxSandboxes sessions.
		hw := worker.New(tc, acts.HostTaskQueue(), activities.WorkerOptions(worker.Options{MaxConcurrentActivityExecutionSize: 2 * cfg.MaxSandboxes, Interceptors: icpt}))
		acts.RegisterHost(hw)
		workers = append(workers, hw)
	}
	stop = func() {
		for _, wk := range workers {
			wk.Stop()
		}
	}
	for i, wk := range workers {
		if err := wk.Start(); err != nil {
			for _, started := range workers[:i] {
				started.Stop()
			}
			return nil, fmt.Errorf("start worker: %w", err)
		}
	}
	w.logger.Info("worker running", "task_queue", cfg.TaskQueue, "sandbox_task_queue", sandboxQueue, "host_task_queue", acts.HostTaskQueue(),
		"role", cfg.Role, "backend", cfg.Backend, "max_sandboxes", cfg.MaxSandboxes, "policy", cfg.Policy().String())
	return stop, nil
}

// adoptedHosts polls the host task queues of the sessions this worker took over from a worker
// that died on this host (activities.Adopt): their holds and cells come on the queue their
// sandbox was opened with.
type adoptedHosts struct {
	w    *Worker
	tc   tclient.Client
	acts *activities.Activities
	icpt []interceptor.WorkerInterceptor

	mu      sync.Mutex
	workers map[string]worker.Worker
}

// poll starts polling queue, once.
func (h *adoptedHosts) poll(queue string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.workers[queue]; ok || queue == h.acts.HostTaskQueue() {
		return
	}
	hw := worker.New(h.tc, queue, activities.WorkerOptions(worker.Options{MaxConcurrentActivityExecutionSize: 2 * h.w.opts.MaxSandboxes, Interceptors: h.icpt}))
	h.acts.RegisterHost(hw)
	if err := hw.Start(); err != nil {
		h.w.logger.Error("the host task queue of an adopted session is not polled: its session ends", "host_task_queue", queue, "error", err)
		return
	}
	if h.workers == nil {
		h.workers = map[string]worker.Worker{}
	}
	h.workers[queue] = hw
	h.w.logger.Info("polling the host task queue of a dead worker's sessions", "host_task_queue", queue)
}

// stop stops every poller poll started.
func (h *adoptedHosts) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hw := range h.workers {
		hw.Stop()
	}
}

func startCodecServer(ctx context.Context, cfg *Options, ring *codec.KeyRing, port int, logger *slog.Logger) (string, error) {
	token := cfg.CodecToken
	if token == "" {
		var err error
		if token, err = codec.NewToken(); err != nil {
			return "", err
		}
		logger.Warn("codec server token (give it to operators who may read decoded payloads): " + token)
	}
	uiOrigin := "http://127.0.0.1:" + strconv.Itoa(cfg.UIPort)
	srv, err := codec.NewServer(ring, codec.ServerOptions{Token: token, AllowedOrigins: []string{uiOrigin, "http://localhost:" + strconv.Itoa(cfg.UIPort)}})
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("codec server: listen on %s: %w", addr, err)
	}
	go func() {
		if err := srv.Serve(ctx, ln); err != nil {
			logger.Error("codec server stopped", "error", err)
		}
	}()
	endpoint := "http://" + addr
	logger.Info("codec server on " + endpoint + " (bearer token required): the temporal CLI takes --codec-endpoint " + endpoint +
		" --codec-auth \"Bearer $TOKEN\"; in a browser open " + endpoint + "/login once, enter the token, then reload the Web UI")
	return endpoint, nil
}

// passkeyOrigin is where passkey decisions must be made: --passkey-origin, or the --dev inbox.
func passkeyOrigin(cfg *Options) string {
	if cfg.PasskeyOrigin == "" && cfg.Dev && cfg.InboxPort >= 0 {
		return "http://localhost:" + strconv.Itoa(cfg.InboxPort)
	}
	return cfg.PasskeyOrigin
}

// passkeyCounters is the sandbox host's passkey counters file.
func passkeyCounters(cfg *Options) string {
	if cfg.PasskeyCounters != "" {
		return cfg.PasskeyCounters
	}
	return filepath.Join(cfg.DataDir, "passkey-counters.json")
}

// devInboxPasskeyCounters is the --dev inbox's passkey counters file.
func devInboxPasskeyCounters(cfg *Options) string {
	return filepath.Join(cfg.DataDir, "inbox-passkey-counters.json")
}

// hostTaskQueue is this sandbox host's own task queue, which only it polls: the sandbox task
// queue (or the workflow task queue) with "-host-" and a random suffix, new at every start (a
// restarted host keeps no sandbox, so its sessions must not find it under the old name).
func hostTaskQueue(cfg *Options) string {
	queue := cfg.SandboxTaskQueue
	if queue == "" {
		queue = cfg.TaskQueue
	}
	return queue + "-host-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
}
