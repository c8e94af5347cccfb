package service

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/egress"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// Roles of a worker process.
const (
	// RoleAll runs workflows and sandboxes.
	RoleAll = "all"
	// RoleWorkflows runs workflows only (and their local check activity).
	RoleWorkflows = "workflows"
	// RoleSandboxes runs the sandbox activity only, on the sandbox task queue.
	RoleSandboxes = "sandboxes"
)

// Options configure one worker process. The worker command fills them from its flags and the
// environment; New validates them once.
type Options struct {
	// Conn says how to reach Temporal (address, namespace, TLS, API key).
	Conn client.Connection
	// TaskQueue is the task queue of RunCode workflows. Required.
	TaskQueue string
	// SandboxTaskQueue is the task queue of the sandbox activity. Optional: empty means TaskQueue.
	SandboxTaskQueue string
	// Role is RoleAll, RoleWorkflows or RoleSandboxes. Required.
	Role string
	// MaxSandboxes caps how many sandboxes this worker runs at once. Must be at least 1.
	MaxSandboxes int
	// MaxSandboxesFromHost (set when --max-sandboxes was not given) has the docker kind derive
	// MaxSandboxes from the host at start (see SizeForHost); other kinds keep MaxSandboxes.
	MaxSandboxesFromHost bool
	// Reviewers is the reviewers file (OpenSSH allowed_signers): only decisions signed by one of
	// its keys run code. Required, except with Dev: then a development key is made once in
	// DataDir/reviewer and used.
	Reviewers string
	// PolicyFile is the operators' policy rules (package rules, JSON or YAML): the checks apply
	// them and record the file's hash, and a sandbox host applies its own again to what it
	// receives. Optional: empty means no rules and no caps.
	PolicyFile string
	// HostKey is this sandbox host's signing key file (OpenSSH ed25519): it signs a receipt of
	// every run and cell. Optional: with Dev a key is made once in DataDir/host; otherwise,
	// without it, results carry no receipt (and workflows with a hosts file refuse them).
	HostKey string
	// HostName is the host's name in its receipts. Optional: defaults to the machine's.
	HostName string
	// Hosts is the hosts file (allowed_signers, host names as principals): the workflow refuses
	// a result whose receipt does not verify against it. Optional: with Dev, DataDir/host/hosts
	// (listing HostKey); otherwise, without it, results are accepted without receipts (a
	// warning says so at start).
	Hosts string
	// PasskeyOrigin is the reviewers' inbox origin (scheme://host[:port]): passkey decisions are
	// accepted only when made on it. Optional: empty refuses passkey decisions, except with Dev
	// and its inbox, whose origin (http://localhost:InboxPort) is then used.
	PasskeyOrigin string
	// PasskeyCounters is where a sandbox host keeps the last signature counter it accepted per
	// passkey. Optional: defaults to DataDir/passkey-counters.json.
	PasskeyCounters string
	// ScheduleToStartTimeout is how long an approved run waits for a sandbox worker; past it the
	// run ends with the approval unused. Optional: defaults to 10 minutes.
	ScheduleToStartTimeout time.Duration

	// WorkflowCache, WorkflowTasks and WorkflowPollers size the workflow worker: how many runs
	// it keeps in memory between their tasks (the sticky workflow cache), how many workflow
	// tasks it runs at once and how many long polls fetch them (workflowtasks.go). Optional: zero
	// means DefaultWorkflowCache, DefaultWorkflowTasks, DefaultWorkflowPollers.
	WorkflowCache   int
	WorkflowTasks   int
	WorkflowPollers int

	// Dev starts an embedded Temporal server (SQLite in DataDir) and its Web UI on UIPort
	// (negative: no UI), and runs the worker against it.
	Dev     bool
	DataDir string
	UIPort  int
	// KeyFile holds the payload encryption keys. Optional: empty means history in the clear.
	KeyFile string
	// CodecToken is the codec server's bearer token. Optional: a random one, printed.
	CodecToken string
	// CodecPort serves the codec server on 127.0.0.1. Optional: 0 means none (8234 with Dev and a
	// key file).
	CodecPort int
	// InboxPort is where Dev serves the reviewers' inbox on 127.0.0.1 (negative: not at all).
	InboxPort int

	// Backend names the kind of backend (kinds.Docker, ...; see backendKinds). Each kind's own
	// settings are in its field below; the others are ignored.
	Backend string
	Docker  DockerOptions
	E2B     E2BOptions
	HTTP    HTTPOptions
	Local   LocalOptions
	// ReapInterval is how often orphaned sandboxes are looked for (Docker containers, E2B
	// sandboxes). Must be positive.
	ReapInterval time.Duration

	// Languages offered, comma-separated ("python", "python,sh").
	Languages string
	// DefaultTimeout, MaxTimeout, Grace, ApprovalTimeout, MaxStdoutBytes and MaxStderrBytes are
	// the policy's (zero: guard's defaults).
	DefaultTimeout  time.Duration
	MaxTimeout      time.Duration
	Grace           time.Duration
	ApprovalTimeout time.Duration
	MaxStdoutBytes  int64
	MaxStderrBytes  int64
	// AllowOpenNetwork lets requests ask for network=true: open egress. Off by default.
	AllowOpenNetwork bool
	// AllowMixedIndentation accepts Python source whose indentation mixes tabs and spaces
	// (guard.Policy.AllowMixedIndentation). Off by default: such source is refused.
	AllowMixedIndentation bool
	// Quorum and RiskyQuorum are how many distinct reviewers must approve every run, and a run
	// that asks for network, egress or secrets (guard.Policy.Quorum, RiskyQuorum). Optional:
	// zero means one.
	Quorum      int
	RiskyQuorum int
	// SensitiveEnv is a comma-separated list of env names whose values views show as
	// "sensitive, N bytes" (guard.Policy.SensitiveEnv). Optional: none.
	SensitiveEnv string
	// EgressAllow and EgressPrivateOK are comma-separated egress patterns and CIDRs;
	// EgressMaxBytes and EgressMaxConns cap one run's egress (zero: guard's defaults).
	EgressAllow     string
	EgressPrivateOK string
	EgressMaxBytes  int64
	EgressMaxConns  int
	// SecretsFile is the worker's egress secrets file (egress.LoadSecrets: NAME HOSTPATTERN
	// Header: value, mode 0600 or 0640); requests name its secrets. Optional: none.
	SecretsFile string
	secrets     *egress.Secrets
	// HeartbeatTimeout is the sandbox activity's heartbeat timeout (zero: 15 s).
	HeartbeatTimeout time.Duration
	// LateResultWait is how long a run whose sandbox activity timed out waits for a late result,
	// and how long a sandbox host tries to deliver one (activities.Config.LateResultWait and
	// LateResultDelivery; zero: 2 min).
	LateResultWait time.Duration
	// MaxSessionLifetime, MaxSessionIdle and MaxSessionCells cap a session: how long it lives,
	// how long it may sit with no cell, and how many cells it runs (zero: guard's defaults,
	// 1 h, 10 min and 100).
	MaxSessionLifetime time.Duration
	MaxSessionIdle     time.Duration
	MaxSessionCells    int
	// sessionEnded tells the Docker reaper whether a session's workflow run has ended (Serve
	// sets it from its Temporal client; without it a session's container is reaped by age only,
	// past the session lifetime cap).
	sessionEnded func(ctx context.Context, workflowID, runID string) (bool, error)
	// namespaceID is the Temporal namespace's id on the server sessionEnded asks (Serve sets it
	// with sessionEnded); the Docker backend labels its containers with it and its reaper asks
	// that server only about containers with the same id.
	namespaceID string

	// Notify are the notification channels (NotifyFlags). Optional: none.
	Notify NotifyOptions

	// LogLevel is debug, info, warn or error.
	LogLevel string
	// MetricsListen serves Prometheus metrics at http://MetricsListen/metrics. Optional: empty
	// means no metrics server.
	MetricsListen string
}

// Validate checks every setting before anything starts; a refusal is a guard.ConfigError.
func (o *Options) Validate() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return &guard.ConfigError{Msg: fmt.Sprintf("--log-level %q: want debug, info, warn or error", o.LogLevel)}
	}
	if strings.TrimSpace(o.TaskQueue) == "" {
		return &guard.ConfigError{Msg: "--task-queue must not be empty"}
	}
	if _, err := cli.List("languages", o.Languages); err != nil || strings.TrimSpace(o.Languages) == "" {
		return &guard.ConfigError{Msg: fmt.Sprintf("--languages %q: want a comma-separated list such as python,sh with no empty element", o.Languages)}
	}
	if o.UIPort > 65535 || o.CodecPort < 0 || o.CodecPort > 65535 {
		return &guard.ConfigError{Msg: fmt.Sprintf("--ui-port %d / --codec-port %d: want a port number", o.UIPort, o.CodecPort)}
	}
	if o.ReapInterval <= 0 {
		return &guard.ConfigError{Msg: fmt.Sprintf("--reap-interval must be positive, got %s", o.ReapInterval)}
	}
	switch o.Role {
	case RoleAll, RoleWorkflows, RoleSandboxes:
	default:
		return &guard.ConfigError{Msg: fmt.Sprintf("--role %q: want all, workflows or sandboxes", o.Role)}
	}
	if o.Role == RoleSandboxes && o.SandboxTaskQueue == "" {
		return &guard.ConfigError{Msg: "--role sandboxes needs --sandbox-task-queue"}
	}
	if o.MaxSandboxes < 1 {
		return &guard.ConfigError{Msg: fmt.Sprintf("--max-sandboxes must be at least 1, got %d", o.MaxSandboxes)}
	}
	if err := o.validateWorkflowSizing(); err != nil {
		return err
	}
	if err := o.validateBackend(); err != nil {
		return err
	}
	if err := o.loadSecrets(); err != nil {
		return err
	}
	if _, err := notifyActivities(o, nil, nil, ""); err != nil {
		return err
	}
	return o.Policy().Validate()
}

// Policy is the operator's policy these options describe, with guard's defaults filled in.
func (o *Options) Policy() guard.Policy {
	return guard.Policy{
		Languages:             splitList(o.Languages),
		DefaultTimeout:        o.DefaultTimeout,
		MaxTimeout:            o.MaxTimeout,
		Grace:                 o.Grace,
		ApprovalTimeout:       o.ApprovalTimeout,
		MaxStdoutBytes:        o.MaxStdoutBytes,
		MaxStderrBytes:        o.MaxStderrBytes,
		AllowOpenNetwork:      o.AllowOpenNetwork,
		AllowMixedIndentation: o.AllowMixedIndentation,
		SensitiveEnv:          splitList(o.SensitiveEnv),
		Quorum:                o.Quorum,
		RiskyQuorum:           o.RiskyQuorum,
		EgressAllow:           splitList(o.EgressAllow),
		EgressPrivateOK:       splitList(o.EgressPrivateOK),
		EgressMaxBytes:        o.EgressMaxBytes,
		EgressMaxConns:        o.EgressMaxConns,
		SecretNames:           o.secretNames(),
		MaxSessionLifetime:    o.MaxSessionLifetime,
		MaxSessionIdle:        o.MaxSessionIdle,
		MaxSessionCells:       o.MaxSessionCells,
	}.WithDefaults()
}

// splitList splits a comma-separated value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
