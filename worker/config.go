package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
)

// config is everything the worker reads from its flags and environment.
type config struct {
	conn             client.Connection
	taskQueue        string
	sandboxTaskQueue string
	role             string
	maxSandboxes     int
	reviewers        string
	scheduleToStart  time.Duration

	dev      bool
	dataDir  string
	uiPort   int
	keyFile  string
	codecTok string
	codecPrt int
	// devCodecEndpoint is set by serve when --dev runs a codec server for the UI.
	devCodecEndpoint string

	backend          string
	allowUnsafeLocal bool
	dockerImage      string
	dockerRuntime    string
	dockerNetwork    string
	dockerMemory     int64
	dockerCPUs       float64
	dockerPids       int64
	dockerIPC        string
	reapInterval     time.Duration

	languages       string
	defaultTimeout  time.Duration
	maxTimeout      time.Duration
	grace           time.Duration
	approvalTimeout time.Duration
	maxStdout       int64
	maxStderr       int64
	allowNetwork    bool
	heartbeat       time.Duration

	logLevel string
}

// Roles of a worker process.
const (
	roleAll       = "all"       // workflows and sandboxes
	roleWorkflows = "workflows" // workflows only (and their local check activity)
	roleSandboxes = "sandboxes" // the sandbox activity only, on the sandbox task queue
)

// envPrefix prefixes each flag's environment fallback: --docker-image reads SANDBOXFLOW_DOCKER_IMAGE.
const envPrefix = "SANDBOXFLOW_"

func parseConfig(name string, args []string) (*config, *flag.FlagSet, error) {
	c := &config{conn: client.ConnectionFromEnv()}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&c.conn.Address, "address", c.conn.Address, "Temporal frontend host:port [TEMPORAL_ADDRESS] (default 127.0.0.1:7233; --dev listens there)")
	fs.StringVar(&c.conn.Namespace, "namespace", c.conn.Namespace, "Temporal namespace [TEMPORAL_NAMESPACE] (default \"default\")")
	fs.StringVar(&c.taskQueue, "task-queue", client.DefaultTaskQueue, "task queue of RunCode workflows")
	fs.StringVar(&c.sandboxTaskQueue, "sandbox-task-queue", "", "task queue of the sandbox activity (default: the workflow task queue)")
	fs.StringVar(&c.role, "role", roleAll, "what this process runs: all, workflows or sandboxes")
	fs.IntVar(&c.maxSandboxes, "max-sandboxes", 2, "how many sandboxes this worker runs at once")
	fs.StringVar(&c.reviewers, "reviewers", "", "reviewer keys, OpenSSH allowed_signers format; only decisions signed by one of them run code (required; --dev makes DATA_DIR/reviewer/ keys when absent) [SANDBOXFLOW_REVIEWERS]")
	fs.DurationVar(&c.scheduleToStart, "schedule-to-start-timeout", activities.DefaultScheduleToStartTimeout, "how long an approved run waits for a sandbox worker; past it the run ends with the approval unused")

	fs.BoolVar(&c.dev, "dev", false, "start an embedded Temporal server (SQLite in --data-dir) and its Web UI, then run the worker against it")
	fs.StringVar(&c.dataDir, "data-dir", ".sandboxflow", "where --dev keeps its SQLite database")
	fs.IntVar(&c.uiPort, "ui-port", 8233, "--dev: the Web UI's port on 127.0.0.1 (negative: no UI)")
	fs.StringVar(&c.keyFile, "key-file", "", "payload encryption keys, one ID:BASE64 a line, the first current [SANDBOXFLOW_KEY_FILE]")
	fs.StringVar(&c.codecTok, "codec-token", "", "bearer token of the codec server (default with --dev and a key file: a random one, printed) [SANDBOXFLOW_CODEC_TOKEN]")
	fs.IntVar(&c.codecPrt, "codec-port", 0, "serve the codec server on 127.0.0.1:PORT (with --dev and a key file, default 8234)")

	fs.StringVar(&c.backend, "backend", "docker", "where code runs: docker or local (DEVELOPMENT ONLY)")
	fs.BoolVar(&c.allowUnsafeLocal, "allow-unsafe-local", false, "let --backend local run: nothing is isolated")
	fs.StringVar(&c.dockerImage, "docker-image", "python:3.12-slim", "image with python3 and sh; never pulled (pull or build it first)")
	fs.StringVar(&c.dockerRuntime, "docker-runtime", "runc", "container runtime: runc, or runsc for gVisor")
	fs.StringVar(&c.dockerNetwork, "docker-network", "", "Docker network for runs that ask for network (default bridge: open egress)")
	fs.Int64Var(&c.dockerMemory, "docker-memory-bytes", 0, "memory limit of a sandbox, no swap (default 256 MiB)")
	fs.Float64Var(&c.dockerCPUs, "docker-cpus", 0, "CPUs of a sandbox (default 1)")
	fs.Int64Var(&c.dockerPids, "docker-pids", 0, "process limit of a sandbox (default 64 under runc, higher under runsc)")
	fs.StringVar(&c.dockerIPC, "docker-ipc", "", "IPC mode: none (default; no /dev/shm, so multiprocessing fails) or private")
	fs.DurationVar(&c.reapInterval, "reap-interval", 5*time.Minute, "how often orphaned sandbox containers are looked for")

	fs.StringVar(&c.languages, "languages", guard.Python, "languages offered: python, sh, or python,sh")
	fs.DurationVar(&c.defaultTimeout, "default-timeout", guard.DefaultTimeout, "timeout of a request that sets none")
	fs.DurationVar(&c.maxTimeout, "max-timeout", guard.DefaultMaxTimeout, "longest timeout a request may ask for")
	fs.DurationVar(&c.grace, "grace", guard.DefaultGrace, "added to the timeout for the backstop")
	fs.DurationVar(&c.approvalTimeout, "approval-timeout", guard.DefaultApprovalTimeout, "how long a run waits for a person")
	fs.Int64Var(&c.maxStdout, "max-stdout-bytes", guard.DefaultMaxStdoutBytes, "cap on stdout kept")
	fs.Int64Var(&c.maxStderr, "max-stderr-bytes", guard.DefaultMaxStderrBytes, "cap on stderr kept")
	fs.BoolVar(&c.allowNetwork, "allow-network", false, "let requests ask for a network")
	fs.DurationVar(&c.heartbeat, "heartbeat-timeout", 0, "sandbox activity heartbeat timeout (default 15s)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")

	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if err := applyEnv(fs); err != nil {
		return nil, fs, err
	}
	return c, fs, c.validate()
}

// applyEnv sets each flag not given on the command line from SANDBOXFLOW_<NAME>, the name
// upper-cased with '-' as '_'.
func applyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil || f.Name == "address" || f.Name == "namespace" {
			return
		}
		env := envPrefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, serr)
			}
		}
	})
	return err
}

func (c *config) validate() error {
	switch c.role {
	case roleAll, roleWorkflows, roleSandboxes:
	default:
		return &guard.ConfigError{Msg: fmt.Sprintf("--role %q: want all, workflows or sandboxes", c.role)}
	}
	if c.role == roleSandboxes && c.sandboxTaskQueue == "" {
		return &guard.ConfigError{Msg: "--role sandboxes needs --sandbox-task-queue"}
	}
	if c.maxSandboxes < 1 {
		return &guard.ConfigError{Msg: fmt.Sprintf("--max-sandboxes must be at least 1, got %d", c.maxSandboxes)}
	}
	switch c.backend {
	case "docker", "local":
	default:
		return &guard.ConfigError{Msg: fmt.Sprintf("--backend %q: want docker or local", c.backend)}
	}
	switch c.dockerRuntime {
	case "runc", "runsc", "":
	default:
		return &guard.ConfigError{Msg: fmt.Sprintf("--docker-runtime %q: want runc or runsc", c.dockerRuntime)}
	}
	return c.policy().Validate()
}

func (c *config) policy() guard.Policy {
	var langs []string
	for _, l := range strings.Split(c.languages, ",") {
		if l = strings.TrimSpace(l); l != "" {
			langs = append(langs, l)
		}
	}
	return guard.Policy{
		Languages:       langs,
		DefaultTimeout:  c.defaultTimeout,
		MaxTimeout:      c.maxTimeout,
		Grace:           c.grace,
		ApprovalTimeout: c.approvalTimeout,
		MaxStdoutBytes:  c.maxStdout,
		MaxStderrBytes:  c.maxStderr,
		AllowNetwork:    c.allowNetwork,
	}.WithDefaults()
}
