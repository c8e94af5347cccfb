package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
	"github.com/sandboxflow/sandboxflow/worker/service"
)

// envPrefix prefixes each flag's environment fallback: --docker-image reads SANDBOXFLOW_DOCKER_IMAGE.
const envPrefix = "SANDBOXFLOW_"

// parseConfig reads the worker's options from its flags and their environment fallbacks, and
// validates them.
func parseConfig(name string, args []string) (*service.Options, *flag.FlagSet, error) {
	c := &service.Options{Conn: client.ConnectionFromEnv()}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&c.Conn.Address, "address", c.Conn.Address, "Temporal frontend host:port [TEMPORAL_ADDRESS] (default 127.0.0.1:7233; --dev listens there)")
	fs.StringVar(&c.Conn.Namespace, "namespace", c.Conn.Namespace, "Temporal namespace [TEMPORAL_NAMESPACE] (default \"default\")")
	fs.StringVar(&c.TaskQueue, "task-queue", contract.DefaultTaskQueue, "task queue of RunCode workflows")
	fs.StringVar(&c.SandboxTaskQueue, "sandbox-task-queue", "", "task queue of the sandbox activity (default: the workflow task queue)")
	fs.StringVar(&c.Role, "role", service.RoleAll, "what this process runs: all, workflows or sandboxes")
	fs.IntVar(&c.MaxSandboxes, "max-sandboxes", 2, "how many sandboxes this worker runs at once (unset, with --backend docker: from the Docker daemon's host, min(2×CPUs/--docker-cpus, 0.75×memory/--docker-memory-bytes, 256), at least 1, logged at start and shown by doctor; other backends: 2)")
	fs.IntVar(&c.WorkflowCache, "workflow-cache", service.DefaultWorkflowCache, "how many runs the workflow worker keeps in memory between their tasks (its sticky cache): at least the runs waiting at once, so that their status queries are answered without replaying their histories")
	fs.IntVar(&c.WorkflowTasks, "workflow-tasks", service.DefaultWorkflowTasks, "how many workflow tasks the workflow worker runs at once")
	fs.IntVar(&c.WorkflowPollers, "workflow-pollers", service.DefaultWorkflowPollers, "how many long polls fetch workflow tasks (the task queue's and the worker's sticky queue's)")
	trustFlags(fs, c)
	fs.DurationVar(&c.ScheduleToStartTimeout, "schedule-to-start-timeout", activities.DefaultScheduleToStartTimeout, "how long an approved run waits for a sandbox worker; past it the run ends with the approval unused")

	fs.BoolVar(&c.Dev, "dev", false, "start an embedded Temporal server (SQLite in --data-dir) and its Web UI, then run the worker against it")
	fs.StringVar(&c.DataDir, "data-dir", ".sandboxflow", "where --dev keeps its SQLite database, and a worker its passkey counters and its spool of running runs (DATA_DIR/spool: a worker restarted on the host delivers their results)")
	fs.IntVar(&c.UIPort, "ui-port", 8233, "--dev: the Web UI's port on 127.0.0.1 (negative: no UI)")
	fs.StringVar(&c.KeyFile, "key-file", "", "payload encryption keys, one ID:BASE64 a line, the first current [SANDBOXFLOW_KEY_FILE]")
	fs.StringVar(&c.CodecToken, "codec-token", "", "bearer token of the codec server (default with --dev and a key file: a random one, printed; with --backend local only from the environment: the code can read the command line) [SANDBOXFLOW_CODEC_TOKEN]")
	fs.IntVar(&c.CodecPort, "codec-port", 0, "serve the codec server on 127.0.0.1:PORT (with --dev and a key file, default 8234)")
	fs.IntVar(&c.InboxPort, "inbox-port", 8235, "--dev: serve the reviewers' inbox on 127.0.0.1:PORT, opened as http://localhost:PORT (negative: none)")

	emptyOK := service.BackendFlags(fs, c)
	service.NotifyFlags(fs, c)
	fs.DurationVar(&c.ReapInterval, "reap-interval", 5*time.Minute, "how often orphaned sandboxes (Docker containers, E2B sandboxes) are looked for")

	fs.StringVar(&c.Languages, "languages", guard.Python, "languages offered: python, sh, or python,sh")
	fs.DurationVar(&c.DefaultTimeout, "default-timeout", guard.DefaultTimeout, "timeout of a request that sets none")
	fs.DurationVar(&c.MaxTimeout, "max-timeout", guard.DefaultMaxTimeout, "longest timeout a request may ask for")
	fs.DurationVar(&c.Grace, "grace", guard.DefaultGrace, "added to the timeout for the backstop")
	fs.DurationVar(&c.ApprovalTimeout, "approval-timeout", guard.DefaultApprovalTimeout, "how long a run waits for a person")
	fs.Int64Var(&c.MaxStdoutBytes, "max-stdout-bytes", guard.DefaultMaxStdoutBytes, "cap on stdout kept")
	fs.Int64Var(&c.MaxStderrBytes, "max-stderr-bytes", guard.DefaultMaxStderrBytes, "cap on stderr kept")
	fs.BoolVar(&c.AllowOpenNetwork, "allow-open-network", false, "RISK: let requests ask for network=true, an open network (open egress: the host's services and cloud metadata included); prefer --egress-allow")
	fs.BoolVar(&c.AllowMixedIndentation, "allow-mixed-indentation", false, "accept Python code and .py input files whose indentation mixes tabs and spaces (refused by default: Python's tab stops are 8 columns apart, a reviewer's screen's may not be)")
	fs.IntVar(&c.Quorum, "quorum", 1, fmt.Sprintf("how many distinct reviewers (distinct principals and keys) must approve every run, 1 to %d; workflow workers and sandbox hosts each enforce their own", guard.MaxQuorum))
	fs.IntVar(&c.RiskyQuorum, "risky-quorum", 0, fmt.Sprintf("how many distinct reviewers must approve a run that asks for network, egress or secrets (the larger of this and --quorum applies; 0: --quorum), up to %d", guard.MaxQuorum))
	fs.StringVar(&c.SensitiveEnv, "sensitive-env", "", "env names, comma-separated, whose values reviewers are shown as \"sensitive, N bytes\" instead of as text")
	fs.StringVar(&c.EgressAllow, "egress-allow", "", "egress patterns requests may ask for, comma-separated: host[:port], *.domain[:port], IP or CIDR (the most a request may get)")
	fs.StringVar(&c.EgressPrivateOK, "egress-private-ok", "", "CIDRs egress may reach although private, loopback or link-local, comma-separated")
	fs.Int64Var(&c.EgressMaxBytes, "egress-max-bytes", guard.DefaultEgressMaxBytes, "cap on one run's egress bytes, in and out")
	fs.IntVar(&c.EgressMaxConns, "egress-max-conns", guard.DefaultEgressMaxConns, "cap on one run's egress connection attempts")
	fs.StringVar(&c.SecretsFile, "secrets-file", "", "egress secrets, one NAME HOSTPATTERN Header: value a line (mode 0600); requests name them, the proxy adds the header, the sandbox never sees it [SANDBOXFLOW_SECRETS_FILE]")
	fs.DurationVar(&c.HeartbeatTimeout, "heartbeat-timeout", 0, "sandbox activity heartbeat timeout (default 15s)")
	fs.DurationVar(&c.MaxSessionLifetime, "max-session-lifetime", guard.DefaultMaxSessionLifetime, "longest a session may live (a session asks for this or less)")
	fs.DurationVar(&c.MaxSessionIdle, "max-session-idle", guard.DefaultMaxSessionIdle, "longest a session may sit with no cell submitted, waiting or running before it ends")
	fs.IntVar(&c.MaxSessionCells, "max-session-cells", guard.DefaultMaxSessionCells, "most cells a session may run (denied ones count)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464); empty: off")

	// Stray words ("worker docter") and flags given an empty value ("--task-queue ''") are usage
	// errors; the flags listed may be set empty on purpose.
	if _, err := cli.Parse(fs, args, 0, 0, append(emptyOK, "sandbox-task-queue", "key-file", "codec-token")...); err != nil {
		return nil, fs, err
	}
	tokenOnCommandLine := false
	fs.Visit(func(f *flag.Flag) { tokenOnCommandLine = tokenOnCommandLine || f.Name == "codec-token" })
	if err := applyEnv(fs); err != nil {
		return nil, fs, &cli.UsageError{Msg: err.Error()}
	}
	// Unset sandbox counts are sized to the host when the worker starts (service.SizeForHost);
	// a flag or its environment fallback wins.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	c.MaxSandboxesFromHost, c.Docker.WarmSandboxesFromHost = !given["max-sandboxes"], !given["warm-sandboxes"]
	// Any uid reads a process's command line (/proc/PID/cmdline), the code of the local backend
	// included, and the codec server on the host's loopback decrypts any payload for the token;
	// the environment is the worker's own.
	if tokenOnCommandLine && c.Backend == kinds.Local {
		return nil, fs, &guard.ConfigError{Msg: "--codec-token on the command line can be read by the code --backend local runs (/proc/PID/cmdline is readable by every uid), " +
			"which could then decrypt every payload through the codec server; set " + codec.CodecTokenEnv + " instead"}
	}
	return c, fs, c.Validate()
}

// trustFlags registers the flags of the keys the worker trusts and signs with, and of the late
// results its hosts' receipts make checkable.
func trustFlags(fs *flag.FlagSet, c *service.Options) {
	fs.StringVar(&c.Reviewers, "reviewers", "", "reviewer keys, OpenSSH allowed_signers format; only decisions signed by one of them run code (required; --dev makes DATA_DIR/reviewer/ keys when absent) [SANDBOXFLOW_REVIEWERS]")
	fs.StringVar(&c.PolicyFile, "policy", "", "the operators' policy rules (JSON or YAML, docs/policy.md): CEL rules that refuse, raise the quorum, require a group's approvals or warn, and caps per agent; checks record its hash and sandbox hosts apply their own again [SANDBOXFLOW_POLICY]")
	fs.StringVar(&c.HostKey, "host-key", "", "this sandbox host's own signing key (OpenSSH ed25519 private key): it signs a receipt of every run (--dev makes DATA_DIR/host/id_ed25519 when absent) [SANDBOXFLOW_HOST_KEY]")
	fs.StringVar(&c.HostName, "host-name", "", "this sandbox host's name in its receipts, its principal in the hosts file (default: the machine's host name) [SANDBOXFLOW_HOST_NAME]")
	fs.StringVar(&c.Hosts, "hosts", "", "the sandbox hosts' public keys, OpenSSH allowed_signers format with host names as principals: a result counts only with a receipt that verifies against one (--dev writes DATA_DIR/host/hosts when absent) [SANDBOXFLOW_HOSTS]")
	fs.StringVar(&c.PasskeyOrigin, "passkey-origin", "", "the reviewers' inbox origin, scheme://host[:port]: passkey decisions are accepted only when made on it (default with --dev: its inbox's http://localhost:PORT; otherwise none, and passkey decisions are refused) [SANDBOXFLOW_PASSKEY_ORIGIN]")
	fs.StringVar(&c.PasskeyCounters, "passkey-counters", "", "where a sandbox host keeps each passkey's last signature counter, to refuse one that does not grow (default DATA_DIR/passkey-counters.json) [SANDBOXFLOW_PASSKEY_COUNTERS]")
	fs.DurationVar(&c.LateResultWait, "late-result-wait", activities.DefaultLateResultWait, "how long a run whose sandbox activity timed out waits for the host's late result (recorded as 0 without --hosts); a sandbox host tries to deliver one for as long [SANDBOXFLOW_LATE_RESULT_WAIT]")
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
