package docker

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/defaults"
	"github.com/sandboxflow/sandboxflow/wheels"
)

// Defaults of Config. A zero field of a Config takes these values.
const (
	DefaultImage          = "python:3.12-slim"
	DefaultCPUs           = 1.0
	DefaultMemoryBytes    = 256 << 20
	DefaultPidsLimit      = 64
	DefaultRunscPidsLimit = 512
	DefaultTmpfsBytes     = 64 << 20
	DefaultNetwork        = "bridge"
	DefaultIPC            = IPCPrivate
	DefaultShmBytes       = 64 << 20
	DefaultWarmMaxAge     = 5 * time.Minute
	MaxWarmSandboxes      = 64
	DefaultUIDFirst       = 100000
	DefaultUIDLast        = 100999
	DefaultDeployment     = "default"
	DefaultDeadlineSlack  = 2 * time.Second
	DefaultCleanupTimeout = 30 * time.Second
	// DefaultRemoveRetryWait is the first wait before a removal that met a conflict tries again.
	DefaultRemoveRetryWait = 100 * time.Millisecond
	// RuntimeRunsc is the OCI runtime name of gVisor as Debian's runsc package registers it. Any
	// runtime IsGVisor accepts is run the same way.
	RuntimeRunsc = "runsc"
	// IPCPrivate gives each sandbox its own IPC namespace and a private /dev/shm (a tmpfs of
	// ShmBytes, noexec, nosuid, nodev, owned by the sandbox's uid); IPCNone gives the private
	// namespace without /dev/shm (Python's multiprocessing then fails).
	IPCPrivate = "private"
	IPCNone    = "none"
	// oomScoreAdj is every sandbox container's OOM score adjustment: the host's OOM killer picks
	// a sandbox before the worker or the daemon. The code's own process raises its score to 1000,
	// so inside a sandbox the code goes before the supervisor.
	oomScoreAdj = 500
)

// Label keys every sandbox container carries. LabelManaged marks the containers this package
// owns: the reaper removes only containers that carry it.
const (
	LabelPrefix     = "io.sandboxflow."
	LabelManaged    = LabelPrefix + "managed"
	LabelWorkflowID = LabelPrefix + "workflow-id"
	LabelRunID      = LabelPrefix + "run-id"
	LabelActivityID = LabelPrefix + "activity-id"
	LabelCreated    = LabelPrefix + "created"
	LabelRuntime    = LabelPrefix + "runtime"
	LabelDigest     = LabelPrefix + "digest"
	// LabelDeployment carries Config.Deployment: the reaper removes only its own deployment's
	// containers.
	LabelDeployment = LabelPrefix + "deployment"
	// LabelNamespaceID carries Config.NamespaceID (when set): the id of the Temporal namespace
	// whose server the container's worker asks about its runs and sessions. The reaper asks its
	// own server only about containers with its own id (see Reap).
	LabelNamespaceID = LabelPrefix + "namespace-id"
	// LabelWarm marks a container the warm pool created before any run asked for it, with the
	// pool's id (logged when the pool starts). It names no run (labels cannot change after
	// create): the worker logs which run took it. While it waits in the pool its name starts with
	// WarmNamePrefix; the run that takes it renames it.
	LabelWarm = LabelPrefix + "warm"
	// LabelImageID is the image ID (sha256:...) the container was created from.
	LabelImageID = LabelPrefix + "image-id"
	// LabelSession marks a session's container (OpenSession) with the session's workflow id; its
	// LabelRunID is the session's run id and its LabelDigest the session's settings digest. The
	// reaper removes it once that workflow run has ended (Config.SessionEnded).
	LabelSession = LabelPrefix + "session"
	// LabelUID is the uid the container's code runs as: a worker that adopts a session's
	// container (AdoptSession) reserves it, so it never hands it to another sandbox.
	LabelUID = LabelPrefix + "uid"
	// LabelSessionNonce is a session container's secret (random hex): its supervisor echoes it in
	// the frames that open the session and end each cell, which the code cannot forge, so that
	// AdoptSession knows the kept output it reads starts at the container's first byte.
	LabelSessionNonce = LabelPrefix + "session-nonce"
)

//go:embed seccomp.json
var defaultSeccompProfile []byte

// DefaultSeccompProfile returns sandboxflow's seccomp profile (see doc.go), as JSON in Docker's
// profile format.
func DefaultSeccompProfile() []byte {
	return append([]byte(nil), defaultSeccompProfile...)
}

// Config configures the Docker backend. Every field is optional; New validates it once.
type Config struct {
	// Image runs every sandbox. It must hold python3 and sh. It is never pulled: pull or build it
	// before the worker starts. Optional: defaults to "python:3.12-slim".
	Image string
	// Runtime is the OCI runtime: "" for the daemon's default (runc), or gVisor: "runsc", or
	// "runsc-" and a suffix for another gVisor installation (IsGVisor). The daemon must have
	// registered it with runtimeArgs ["--network=none", "--oci-seccomp"], so that network-less
	// containers start and the seccomp profile applies inside the sandbox. Optional: defaults to
	// "" (runc).
	Runtime string
	// CPUs is how many CPUs a sandbox may use. Optional: defaults to 1.0.
	CPUs float64
	// MemoryBytes is the memory limit of a sandbox, tmpfs contents included; swap is set equal to
	// it, so there is none. Optional: defaults to 256 MiB.
	MemoryBytes int64
	// PidsLimit caps processes and threads in a sandbox. Under runsc it counts gVisor's own host
	// threads too (roughly six per process of the code). Optional: defaults to 64, or 512 under
	// runsc.
	PidsLimit int64
	// WorkTmpfsBytes and TmpTmpfsBytes size the tmpfs folders /work (the code's working folder)
	// and /tmp. Optional: default to 64 MiB each.
	WorkTmpfsBytes int64
	TmpTmpfsBytes  int64
	// Network is the Docker network a sandbox joins when its request sets network=true (without
	// it a sandbox has only loopback). Docker's "bridge" gives open egress, cloud metadata
	// addresses and services on the host included; give a network with egress rules instead.
	// Under runsc registered with --network=none a sandbox has only loopback whatever this says.
	// Optional: defaults to "bridge".
	Network string
	// IPC is IPCPrivate (a private IPC namespace with a private /dev/shm of ShmBytes: tmpfs,
	// noexec, nosuid, nodev, owned by the sandbox's uid, so multiprocessing works) or IPCNone
	// (a private IPC namespace without /dev/shm). Optional: defaults to IPCPrivate.
	IPC string
	// ShmBytes sizes /dev/shm when IPC is IPCPrivate; it counts against MemoryBytes. Optional:
	// defaults to 64 MiB.
	ShmBytes int64
	// UIDs is the range of uids the sandboxes run as: each concurrent sandbox of this backend
	// gets its own uid (and the same number as its gid), so sandboxes never share per-user
	// kernel limits (RLIMIT_NPROC, inotify instances, message queues) or signal each other.
	// 0 is refused. Backends that share a host should get ranges that do not overlap. Optional:
	// defaults to 100000-100999.
	UIDs UIDRange
	// Deployment names this deployment on the Docker host; every container carries it as
	// LabelDeployment and the reaper removes only containers with the same value. Deployments
	// that share a daemon must use different names (for example the Temporal namespace and
	// task queue), unless their NamespaceIDs differ. Optional: defaults to "default".
	Deployment string
	// NamespaceID is the id of the Temporal namespace SessionEnded asks about (DescribeNamespace's
	// NamespaceInfo.Id: unique per namespace and server, shared by the workers of one deployment
	// on one server). Every container carries it as LabelNamespaceID, and the reaper asks
	// SessionEnded only about containers with the same id: one of another id belongs to a worker
	// on another server (two dev servers on one machine with the same namespace and task queue),
	// whose runs and sessions this server does not know, so it is reaped by age alone, as without
	// the hook. Optional: without it containers carry no id, and this backend asks no hook about
	// a container that carries one.
	NamespaceID string
	// SeccompProfile is a seccomp profile in Docker's JSON format, applied to every sandbox.
	// Optional: defaults to DefaultSeccompProfile(). "unconfined" is refused.
	SeccompProfile []byte
	// Labels are added to every sandbox container. Keys starting with "io.sandboxflow." are this
	// package's own and are refused. Optional.
	Labels map[string]string
	// DockerHost is the daemon's address, e.g. "unix:///var/run/docker.sock". Optional: defaults
	// to the environment (DOCKER_HOST, DOCKER_API_VERSION, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY)
	// or the default socket.
	DockerHost string
	// DeadlineSlack is how long after the run's timeout the worker waits for the sandbox's own
	// report (which carries the output printed before the timeout) before it kills the container
	// and reports a timeout without output. Optional: defaults to 2 s.
	DeadlineSlack time.Duration
	// Logger receives warnings (a container that could not be removed, reaper errors).
	// Optional: defaults to slog.Default().
	Logger *slog.Logger
	// CleanupTimeout bounds each kill and removal, which run even after the run's context ends.
	// Optional: defaults to 30 s.
	CleanupTimeout time.Duration
	// RemoveRetryWait is how long a removal that met a conflict (the container still exiting)
	// waits before it tries again, twice as long before each later try, at most
	// removeConflictRetries times, all within CleanupTimeout. Optional: defaults to 100 ms.
	RemoveRetryWait time.Duration
	// WarmSandboxes is how many containers the backend keeps created and started ahead of need,
	// each with its supervisor waiting for its one request (see pool.go). Each serves exactly
	// one run and is removed after it, as a cold one is; runs that ask for the open network
	// (Network) always get a cold container. Optional: 0 (the default) turns the pool off.
	WarmSandboxes int
	// WarmMaxAge is how long a started container may wait in the pool; an older one is
	// replaced. Optional: defaults to 5 minutes.
	WarmMaxAge time.Duration
	// Egress configures the filtering proxy of runs whose request carries egress (issue 13).
	// Optional: the zero value runs the proxy with the guard's default caps, no private prefixes
	// and no secrets.
	Egress EgressConfig
	// MaxSandboxes caps the sandboxes this backend holds at once: runs (from the start of Run to
	// its return) and open sessions (from OpenSession to Close) alike. A run or session beyond it
	// waits for a free one until its context ends (then a guard.IntegrationError that may be
	// retried). The worker sets it to --max-sandboxes, so that sessions, whose sandboxes outlive
	// the activity that opened them, count as runs do. Optional: 0 leaves only the uid range as a
	// bound.
	MaxSandboxes int
	// SessionEnded tells the reaper whether the workflow run of a session's container (its
	// LabelSession and LabelRunID) has ended; the worker asks Temporal. A session's container is
	// removed when it says true, kept when it says false, and left for the next reap on an error.
	// The reaper asks it too about a run's container (LabelWorkflowID and LabelRunID) younger than
	// the reap threshold, which a long max timeout makes hours: a lost worker's container is
	// removed once its run has ended (as outcome unknown, within the heartbeat timeout), not hours
	// later. Optional: nil reaps a session's container only once older than MaxSessionLifetime
	// plus the reap threshold, and a run's once older than the threshold.
	SessionEnded func(ctx context.Context, workflowID, runID string) (bool, error)
	// MaxSessionLifetime is the longest a session lives (the policy's session lifetime cap): a
	// session's container younger than this plus the reap threshold is never reaped without
	// SessionEnded. Optional: defaults to guard.DefaultMaxSessionLifetime (1 h).
	MaxSessionLifetime time.Duration
	// Packages installs the packages a request's lock names, on this host, before the code runs
	// (worker --package-index): the lock's environment is mounted read-only at PackagesMount in
	// a container of its own (never a warm one). Optional: nil refuses a request with packages
	// with a guard.ConfigError.
	Packages *wheels.Installer
}

// PackagesMount is where a sandbox sees its lock's environment, read-only; the supervisor puts
// it on the code's import path after the standard library, before the image's site-packages.
const PackagesMount = "/opt/sandboxflow/packages"

// IsGVisor reports whether runtime names gVisor: "runsc", or "runsc-" and a suffix, as gVisor's
// `runsc install --runtime NAME` names a second installation (runsc-debug, runsc-kvm, ...).
func IsGVisor(runtime string) bool {
	suffix, ok := strings.CutPrefix(runtime, RuntimeRunsc)
	return ok && (suffix == "" || len(suffix) > 1 && suffix[0] == '-')
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	pids := int64(DefaultPidsLimit)
	if IsGVisor(c.Runtime) {
		pids = DefaultRunscPidsLimit
	}
	defaults.Zero(&c, Config{
		Image: DefaultImage, CPUs: DefaultCPUs, MemoryBytes: DefaultMemoryBytes, PidsLimit: pids,
		WorkTmpfsBytes: DefaultTmpfsBytes, TmpTmpfsBytes: DefaultTmpfsBytes,
		Network: DefaultNetwork, IPC: DefaultIPC, ShmBytes: DefaultShmBytes,
		UIDs:       UIDRange{First: DefaultUIDFirst, Last: DefaultUIDLast},
		Deployment: DefaultDeployment, DeadlineSlack: DefaultDeadlineSlack,
		CleanupTimeout: DefaultCleanupTimeout, RemoveRetryWait: DefaultRemoveRetryWait, WarmMaxAge: DefaultWarmMaxAge,
		MaxSessionLifetime: guard.DefaultMaxSessionLifetime,
	})
	if len(c.SeccompProfile) == 0 {
		c.SeccompProfile = DefaultSeccompProfile()
	}
	return c
}

// Validate reports a guard.ConfigError for settings the backend cannot honour. It checks c after
// WithDefaults and does no I/O; Doctor checks the daemon, the image and the runtime.
func (c Config) Validate() error {
	c = c.WithDefaults()
	bad := func(format string, args ...any) error {
		return &guard.ConfigError{Msg: "docker backend: " + fmt.Sprintf(format, args...)}
	}
	if strings.TrimSpace(c.Image) != c.Image || strings.ContainsAny(c.Image, " \t\n") {
		return bad("image %q has white space", c.Image)
	}
	if c.Runtime != "" && !plainName(c.Runtime) {
		return bad("runtime %q is not a plain name", c.Runtime)
	}
	if c.CPUs < 0.01 || c.CPUs > 1024 {
		return bad("cpus must be between 0.01 and 1024, got %g", c.CPUs)
	}
	if c.MemoryBytes < 32<<20 {
		return bad("memory must be at least 32 MiB, got %d bytes", c.MemoryBytes)
	}
	if c.PidsLimit < 8 {
		return bad("pids limit must be at least 8, got %d", c.PidsLimit)
	}
	if c.WorkTmpfsBytes < 1<<20 || c.TmpTmpfsBytes < 1<<20 {
		return bad("tmpfs sizes must be at least 1 MiB, got /work %d and /tmp %d bytes", c.WorkTmpfsBytes, c.TmpTmpfsBytes)
	}
	switch c.Network {
	case "host", "none":
		return bad("network %q cannot be used for network=true: give a Docker network name (host shares the host's network; none has no network)", c.Network)
	}
	if strings.HasPrefix(c.Network, "container:") || !plainName(c.Network) {
		return bad("network %q is not a plain Docker network name", c.Network)
	}
	switch c.IPC {
	case IPCNone:
	case IPCPrivate:
		if c.ShmBytes < 1<<20 || c.ShmBytes >= c.MemoryBytes {
			return bad("shm size must be at least 1 MiB and below the memory limit, got %d bytes", c.ShmBytes)
		}
	default:
		return bad("ipc must be %q or %q, got %q", IPCPrivate, IPCNone, c.IPC)
	}
	if c.UIDs.First < 1 || c.UIDs.Last < c.UIDs.First || c.UIDs.Last > 1<<31-2 {
		return bad("uid range %d-%d must be ascending, above 0 (root) and below 2^31-1", c.UIDs.First, c.UIDs.Last)
	}
	if !plainLabelValue(c.Deployment) {
		return bad("deployment %q must be 1 to 128 letters, digits or - _ . / :", c.Deployment)
	}
	if c.NamespaceID != "" && !plainLabelValue(c.NamespaceID) {
		return bad("namespace id %q must be 1 to 128 letters, digits or - _ . / :", c.NamespaceID)
	}
	if err := checkImageRef(c.Image); err != nil {
		return bad("%v", err)
	}
	if err := checkSeccompProfile(c.SeccompProfile); err != nil {
		return bad("%v", err)
	}
	for k := range c.Labels {
		if strings.HasPrefix(k, LabelPrefix) {
			return bad("label %q uses the reserved prefix %s", k, LabelPrefix)
		}
		if k == "" {
			return bad("a label has an empty key")
		}
	}
	if c.WarmSandboxes < 0 || c.WarmSandboxes > MaxWarmSandboxes {
		return bad("warm sandboxes must be between 0 and %d, got %d", MaxWarmSandboxes, c.WarmSandboxes)
	}
	if c.WarmMaxAge < time.Second {
		return bad("warm sandbox max age must be at least 1 s, got %s", c.WarmMaxAge)
	}
	if c.MaxSandboxes < 0 || c.MaxSessionLifetime < 0 {
		return bad("max sandboxes and max session lifetime must not be negative, got %d and %s", c.MaxSandboxes, c.MaxSessionLifetime)
	}
	if c.RemoveRetryWait < 0 {
		return bad("remove retry wait must not be negative, got %s", c.RemoveRetryWait)
	}
	if c.DeadlineSlack < 0 || c.CleanupTimeout < time.Second {
		return bad("deadline slack must not be negative and cleanup timeout must be at least 1 s, got %s and %s", c.DeadlineSlack, c.CleanupTimeout)
	}
	return nil
}

func plainName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return true
}

// UIDRange is an inclusive range of uids, such as 100000-100999.
type UIDRange struct {
	First, Last int
}

// String returns "first-last".
func (r UIDRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// ParseUIDRange parses "first-last" (for example "100000-100999"), as a worker flag gives it.
func ParseUIDRange(s string) (UIDRange, error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return UIDRange{}, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: uid range %q must be FIRST-LAST, e.g. 100000-100999", s)}
	}
	return UIDRange{First: first, Last: last}, nil
}

func plainLabelValue(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-_./:", r):
		default:
			return false
		}
	}
	return true
}

// checkImageRef accepts any reference without white space; one pinned with @sha256: must carry
// 64 lower-case hex digits (the run then refuses any other image ID or repo digest).
func checkImageRef(ref string) error {
	_, digest, pinned := strings.Cut(ref, "@")
	if !pinned {
		return nil
	}
	hexPart, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return fmt.Errorf("image %q: a pinned image must end in @sha256: and 64 lower-case hex digits", ref)
	}
	return nil
}

func checkSeccompProfile(p []byte) error {
	if strings.TrimSpace(string(p)) == "unconfined" {
		return fmt.Errorf("seccomp profile \"unconfined\" is refused")
	}
	var v struct {
		DefaultAction string `json:"defaultAction"`
	}
	if err := json.Unmarshal(p, &v); err != nil {
		return fmt.Errorf("seccomp profile is not valid JSON: %w", err)
	}
	if v.DefaultAction == "" || v.DefaultAction == "SCMP_ACT_ALLOW" {
		return fmt.Errorf("seccomp profile must deny by default, got defaultAction %q", v.DefaultAction)
	}
	return nil
}
