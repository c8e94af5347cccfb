package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/tracing"
	"github.com/sandboxflow/sandboxflow/wheels"
)

// Name is the backend's name, part of every digest. The runtime (runc or runsc) is not part of
// it: it is the operator's setting, recorded on each container as the label LabelRuntime.
const Name = kinds.Docker

// Notes appended to stderr when the sandbox, not the code, decided how a run ended.
const (
	NoteMemoryLimit = "\nsandboxflow: the memory limit (%d bytes) was reached and the kernel killed a process of the run\n"
	NotePidsLimit   = "\nsandboxflow: the process limit (%d) was reached; forks failed or the sandbox was stopped\n"
	NoteDeadline    = "\nsandboxflow: the sandbox did not report within the timeout; the container was killed (output up to then is kept)\n"
	NoteCancelled   = "\nsandboxflow: the run's deadline passed; the container was killed (output up to then is kept)\n"
)

// diagBytes caps what the worker keeps of the container's own stderr (the bootstrap's
// diagnostics), quoted in errors.
const diagBytes = 16 << 10

// Backend runs each checked request in a fresh, hardened container (see the package
// documentation). It is safe for concurrent use. Call Close when done, to wait for removals.
type Backend struct {
	cfg     Config
	eng     engine
	seccomp string
	log     *slog.Logger
	uids    *uidPool

	// host holds what the backend learnt of the daemon on its first run (cgroup version).
	hostMu sync.Mutex
	host   *engineVersion

	removals sync.WaitGroup
	// noCapture runs without the outputs capture: BenchmarkOutputs's reference only.
	noCapture bool
	// pool holds started containers waiting for their run; nil when Config.WarmSandboxes is 0.
	pool *pool
	// pkgSlots is where the warm pool's containers get their empty package folders (a
	// subfolder of Config.Packages' SlotsDir of this backend's own); "" without Packages.
	pkgSlots string
	// slots holds one token per run or open session (Config.MaxSandboxes); nil without a cap.
	slots chan struct{}
	// sessions are the open sessions, which Close closes: their stream ends with this process.
	sessionsMu sync.Mutex
	sessions   map[*Session]struct{}

	// unfit is the image the runtime could not start the supervisor in (no python3), by ID, and
	// the error its runs get: they are refused before any container is made, until the image is
	// replaced. A start that fails this way leaves containerd's task and shim behind under
	// Docker 20.10 with gVisor, so it is not tried again on every run or pool refill.
	unfitMu sync.Mutex
	unfit   struct {
		id  string
		err error
	}
}

// startError types a failed start of a container made from img: a runtime that cannot exec
// the supervisor (the image has no python3) is a ConfigError, and the image is remembered as
// unfit; anything else is nil, for the caller to report.
func (b *Backend) startError(img imageInfo, err error) error {
	if !errors.Is(err, errInvalid) {
		return nil
	}
	ce := &guard.ConfigError{Msg: fmt.Sprintf("docker backend: image %q (%s) cannot start the sandbox supervisor (python3 missing?); use an image with python3 and sh (this worker makes no more containers from that image ID until it is replaced or the worker restarts): %v", b.cfg.Image, img.ID, err)}
	b.unfitMu.Lock()
	b.unfit.id, b.unfit.err = img.ID, ce
	b.unfitMu.Unlock()
	return ce
}

// New validates cfg and returns a backend using the Docker daemon it names. It does no I/O itself:
// an unreachable daemon shows in the first run (a retryable IntegrationError) and in Doctor. With
// WarmSandboxes it starts filling the warm pool in the background; call Close to empty it.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	eng, err := newDockerEngine(cfg.DockerHost)
	if err != nil {
		return nil, &guard.ConfigError{Msg: err.Error()}
	}
	return newBackend(cfg, eng)
}

func newBackend(cfg Config, eng engine) (*Backend, error) {
	opt, err := seccompOpt(cfg.SeccompProfile, cfg.Runtime)
	if err != nil {
		return nil, &guard.ConfigError{Msg: "docker backend: " + err.Error()}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	b := &Backend{cfg: cfg, eng: eng, seccomp: opt, log: log.With("backend", Name), uids: newUIDPool(cfg.UIDs)}
	if cfg.MaxSandboxes > 0 {
		b.slots = make(chan struct{}, cfg.MaxSandboxes)
	}
	if cfg.Packages != nil {
		var id [8]byte
		if _, err := rand.Read(id[:]); err != nil {
			return nil, &guard.ConfigError{Msg: "docker backend: " + err.Error()}
		}
		b.pkgSlots = filepath.Join(cfg.Packages.SlotsDir(), hex.EncodeToString(id[:]))
	}
	if cfg.WarmSandboxes > 0 {
		b.pool = newPool(b)
		b.pool.start()
	}
	return b, nil
}

// WarmStats reports what the warm pool did; zero when it is off.
func (b *Backend) WarmStats() WarmStats {
	if b.pool == nil {
		return WarmStats{}
	}
	return b.pool.snapshot()
}

// Name returns "docker".
func (b *Backend) Name() string { return Name }

// Config returns the backend's configuration with defaults applied.
func (b *Backend) Config() Config { return b.cfg }

// Close removes the warm pool's waiting containers and every open session's container (a
// session's state lives in its container and its stream in this process), waits until every
// removal has finished (or ctx ends), then releases the Docker client. Call it after the last Run.
func (b *Backend) Close(ctx context.Context) error {
	if b.pool != nil {
		b.pool.close()
	}
	b.sessionsMu.Lock()
	open := make([]*Session, 0, len(b.sessions))
	for s := range b.sessions {
		open = append(open, s)
	}
	b.sessionsMu.Unlock()
	for _, s := range open {
		_ = s.Close(ctx) // logged by Close; the reaper retries
	}
	err := b.WaitRemovals(ctx)
	if cerr := b.eng.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("docker: close client: %w", cerr)
	}
	return err
}

// WaitRemovals waits until every container removal started so far has finished, or ctx ends.
func (b *Backend) WaitRemovals(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		b.removals.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("docker: wait for container removals: %w", ctx.Err())
	}
}

// sandbox is one created container, started at most once, for one run, then removed.
type sandbox struct {
	id      string
	name    string
	uid     int
	image   imageInfo
	release func()
	// session is set for a session's container (OpenSession), which carries LabelSession.
	session bool
	// nonce is a session's secret (LabelSessionNonce); "" for a run's container.
	nonce string
	// packages is the host folder mounted read-only at PackagesMount: the request's package
	// environment, or a warm container's empty slot (slot set); "" for none.
	packages string
	// slot says packages is a warm container's slot, into which the run that takes it links
	// its environment (linkPackages); it is removed with the container.
	slot bool
}

// Run runs c in a fresh container, one the warm pool started for it or one created now, and
// removes the container afterwards.
//
// Errors: a guard.ConfigError for a setting that cannot work (missing image or network, an image
// that declares volumes or does not match its pinned digest, unknown runtime, an image without
// python3 or ctypes); a guard.IntegrationError with CodeMayHaveStarted false for every failure
// before the whole request reached the container (daemon unreachable, create, attach, start or
// the write failed), and true after (unreadable output, the supervisor vanished, cancelled). A
// timeout is a result.
func (b *Backend) Run(ctx context.Context, c guard.Checked) (guard.Result, error) {
	start := time.Now()
	a, err := b.acquireFor(ctx, c, true)
	if err != nil {
		return guard.Result{}, err
	}
	a.start = start
	return a.Run(ctx)
}

// Acquire is the first part of Run (guard.Acquirer): it checks c as Run does, waits for a free
// sandbox slot and takes a container for c, a started one from the warm pool or one created now.
// Nothing runs in it: the Acquired's Run sends the request, and its Discard removes the container
// (it never goes back to the pool). It never waits for a slot: with all in use it returns
// guard.ErrAcquireLater, and the request takes one when it runs. Errors are Run's from before the
// start.
func (b *Backend) Acquire(ctx context.Context, c guard.Checked) (guard.Acquired, error) {
	a, err := b.acquireFor(ctx, c, false)
	if err != nil {
		return nil, err
	}
	return a, nil
}

var _ guard.Acquirer = (*Backend)(nil)

// acquired is a container Acquire took for one request, with its sandbox slot.
type acquired struct {
	b           *Backend
	c           guard.Checked
	sb          *sandbox
	warm        *warmSandbox
	request     []byte
	releaseSlot func()
	start       time.Time
	used        atomic.Bool
	// packages is c's package environment, nil without packages.
	packages *wheels.Env
}

// acquireFor is Acquire; wait says whether to wait for a free slot (Run's own acquire) or to
// return guard.ErrAcquireLater.
func (b *Backend) acquireFor(ctx context.Context, c guard.Checked, wait bool) (*acquired, error) {
	if err := refuseNativeLoaders(c); err != nil {
		return nil, err
	}
	if _, err := encodeRequest(c, 0, nil); err != nil {
		return nil, err
	}
	if len(c.Egress) > 0 {
		if _, err := b.proxyConfig(c); err != nil {
			return nil, err
		}
	}
	env, err := b.install(ctx, c.CheckedSettings)
	if err != nil {
		return nil, err
	}
	releaseSlot, free := b.tryTakeSlot()
	if !free {
		if !wait {
			return nil, guard.ErrAcquireLater
		}
		if releaseSlot, err = b.takeSlot(ctx); err != nil {
			return nil, err
		}
	}
	_, span := tracing.Start(ctx, tracing.SpanTakeSandbox, attribute.String("sandboxflow.runtime", b.cfg.Runtime))
	sb, warm, err := b.acquire(ctx, c, packagesDir(env))
	span.SetAttributes(attribute.Bool("sandboxflow.warm", warm != nil))
	tracing.End(span, err, guard.TypeOf(err))
	if err != nil {
		releaseSlot()
		return nil, err
	}
	request, err := encodeRun(c, sb.uid, b.egressPlan(c), b.noCapture)
	if err != nil {
		if warm != nil {
			warm.att.Close()
		}
		sb.release()
		_ = b.remove(ctx, sb.id, warm != nil)
		releaseSlot()
		return nil, err
	}
	return &acquired{b: b, c: c, sb: sb, warm: warm, request: request, releaseSlot: releaseSlot, start: time.Now(), packages: env}, nil
}

// Run sends the request and runs it, then removes the container (Backend.Run's second part).
func (a *acquired) Run(ctx context.Context) (guard.Result, error) {
	if !a.used.CompareAndSwap(false, true) {
		return guard.Result{}, &guard.IntegrationError{Op: "docker: run on an acquired container", Err: errors.New("it was run or discarded already")}
	}
	b, sb, c := a.b, a.sb, a.c
	defer a.releaseSlot()
	res, removeNow, err := b.execute(ctx, sb, c, a.request, a.warm)
	if a.warm != nil {
		b.pool.refillAfter(refillAfterRun)
	}
	if removeNow {
		if rerr := b.remove(ctx, sb.id, true); rerr != nil {
			b.log.Warn("sandbox container not removed; the reaper will retry", "container", sb.id, "error", rerr)
		}
		sb.release()
	} else {
		// The container is exiting on its own (its supervisor sent its last frame): removing it
		// waits as the refill does, off the reviewer's path.
		b.removeAfter(sb, false, removeAfterRun)
	}
	if err != nil {
		return guard.Result{}, err
	}
	// The one place the backend applies the limits (the guard wrapper re-applies them to
	// whatever a backend returns).
	res = guard.Enforce(res, c.Limits)
	res.Duration = time.Since(a.start)
	res.Digest = c.Digest
	res.Backend = Name
	res.ImageID = sb.image.ID
	return withPackages(res, a.packages), nil
}

// SandboxID is the container's id (guard.Identified), for Adopt.
func (a *acquired) SandboxID() string { return a.sb.id }

// Discard removes the container with nothing run in it (killing a warm one) and frees its slot;
// a warm container never goes back to the pool.
func (a *acquired) Discard() {
	if !a.used.CompareAndSwap(false, true) {
		return
	}
	if a.warm != nil {
		a.warm.att.Close()
		a.b.pool.signal()
	}
	a.b.removeLater(a.sb, a.warm != nil)
	a.releaseSlot()
}

// spec is the container c runs in (nil for one the warm pool starts ahead): every hardening
// setting of the package documentation.
func (b *Backend) spec(c *guard.Checked, sb *sandbox, host engineVersion) containerSpec {
	network, dns := "none", []string{"127.0.0.1"}
	if c != nil && c.Network {
		network, dns = b.cfg.Network, nil
	}
	tmpfs := func(size int64) string {
		return fmt.Sprintf("rw,noexec,nosuid,nodev,size=%d,uid=%d,gid=%d,mode=0700", size, sb.uid, sb.uid)
	}
	mounts := map[string]string{"/work": tmpfs(b.cfg.WorkTmpfsBytes), "/tmp": tmpfs(b.cfg.TmpTmpfsBytes)}
	// Under runc the supervisor runs as the sandbox uid, out of the code's reach as a
	// non-dumpable PID 1. gVisor enforces neither of those for its init, so under runsc the
	// supervisor is root inside gVisor's kernel with CAP_SETUID, CAP_SETGID and CAP_SETPCAP
	// only; it drops all three from the bounding and ambient sets of the code's process and runs
	// it as the sandbox uid (which loses the rest on the switch).
	user, capAdd := fmt.Sprintf("%d:%d", sb.uid, sb.uid), []string(nil)
	if IsGVisor(b.cfg.Runtime) {
		user, capAdd = "0:0", []string{"SETUID", "SETGID", "SETPCAP"}
	}
	if b.cfg.IPC == IPCPrivate {
		mounts["/dev/shm"] = tmpfs(b.cfg.ShmBytes)
	}
	var binds map[string]string
	if sb.packages != "" {
		binds = map[string]string{PackagesMount: sb.packages}
	}
	return containerSpec{
		Name:            sb.name,
		Image:           sb.image.ID,
		Cmd:             supervisorCmd(),
		Labels:          b.labels(c, sb),
		WorkDir:         "/work",
		User:            user,
		CapAdd:          capAdd,
		Hostname:        "sandbox",
		Runtime:         b.cfg.Runtime,
		NetworkMode:     network,
		DNS:             dns,
		IPCMode:         IPCNone,
		ReadonlyRootfs:  true,
		CapDrop:         []string{"ALL"},
		SecurityOpt:     []string{"no-new-privileges", b.seccomp},
		PidsLimit:       b.cfg.PidsLimit,
		MemoryBytes:     b.cfg.MemoryBytes,
		NanoCPUs:        int64(b.cfg.CPUs * 1e9),
		Tmpfs:           mounts,
		ReadOnlyBinds:   binds,
		Ulimits:         []ulimit{{Name: "core", Soft: 0, Hard: 0}, {Name: "nofile", Soft: 1024, Hard: 1024}},
		OomScoreAdj:     oomScoreAdj,
		CgroupnsPrivate: host.CgroupVersion == "2",
		MaskedPaths:     maskedPaths(host.NCPU),
		KeepLog:         b.keepLog(sb),
		KeepStdin:       sb.session,
	}
}

// keptReportBytes bounds what the daemon keeps of a run or session container's output for Adopt
// and AdoptSession: the supervisor's frames, which its caps bound (a run's egress tunnel adds its
// traffic). Past it the daemon truncates the log: a run that wrote more cannot be adopted, and a
// session whose log was cut is refused by its nonce (see AdoptSession).
const keptReportBytes = 1 << 30

// keepLog is containerSpec.KeepLog for sb: a run's container keeps its report for Adopt, a
// session's its whole output for AdoptSession; a warm container's too (a run takes it).
func (b *Backend) keepLog(*sandbox) int64 { return keptReportBytes }

// labels are the labels of c's container; a container the warm pool starts (c nil) names no run.
func (b *Backend) labels(c *guard.Checked, sb *sandbox) map[string]string {
	runtime := b.cfg.Runtime
	if runtime == "" {
		runtime = "runc"
	}
	labels := map[string]string{
		LabelManaged:    "true",
		LabelDeployment: b.cfg.Deployment,
		LabelCreated:    time.Now().UTC().Format(time.RFC3339Nano),
		LabelRuntime:    runtime,
		LabelImageID:    sb.image.ID,
		LabelUID:        strconv.Itoa(sb.uid),
	}
	if b.cfg.NamespaceID != "" {
		labels[LabelNamespaceID] = b.cfg.NamespaceID
	}
	if c == nil {
		labels[LabelWarm] = b.pool.id
	} else {
		labels[LabelWorkflowID] = c.Owner.WorkflowID
		labels[LabelRunID] = c.Owner.RunID
		labels[LabelActivityID] = c.Owner.ActivityID
		labels[LabelDigest] = c.Digest
		if sb.session {
			labels[LabelSession] = c.Owner.WorkflowID
			labels[LabelSessionNonce] = sb.nonce
		}
	}
	for k, v := range b.cfg.Labels {
		labels[k] = v
	}
	return labels
}

// acquire resolves the image and returns a container for c: a started one from the warm pool
// (warm set), or one created now (always, with packages: a warm container has no mount of
// them). Nothing runs in either until execute has written the whole request on its stdin, so
// every failure here may be retried.
func (b *Backend) acquire(ctx context.Context, c guard.Checked, packages string) (*sandbox, *warmSandbox, error) {
	img, err := b.resolveImage(ctx)
	if err != nil {
		return nil, nil, err
	}
	if c.Image != "" && c.Image != img.ID {
		// Resolved again here, where the container is made from it: a tag moved since the
		// guard's check runs nothing.
		return nil, nil, guard.ImageRefusal(c.Image, img.ID)
	}
	if b.pool != nil {
		if c.Network {
			b.pool.cold()
		} else if w := b.pool.take(ctx, img.ID); w != nil {
			if packages == "" || b.linkPackages(w, packages) {
				b.renameTaken(w.sb) // now: the approval's claim may still take a while
				return w.sb, w, nil
			}
		}
	}
	sb, err := b.create(ctx, img, &c, false, packages)
	return sb, nil, err
}

// create picks a uid and creates a container from img for c, or for the warm pool when c is nil;
// session marks a session's container (c then carries the session's owner and settings digest);
// packages is the host folder of c's package environment, or "".
func (b *Backend) create(ctx context.Context, img imageInfo, c *guard.Checked, session bool, packages string) (*sandbox, error) {
	host, err := b.hostFacts(ctx)
	if err != nil {
		return nil, &guard.IntegrationError{Op: "docker: daemon info", Err: err}
	}
	uid, release, err := b.uids.acquire()
	if err != nil {
		return nil, &guard.IntegrationError{Op: "docker: pick a sandbox uid from " + b.cfg.UIDs.String(), Err: err}
	}
	sb := &sandbox{uid: uid, image: img, release: release, session: session, packages: packages}
	if c == nil && b.pkgSlots != "" {
		if err := b.makeSlot(sb); err != nil {
			release()
			return nil, err
		}
	}
	var suffix [8]byte
	var nonce [32]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		release()
		return nil, &guard.IntegrationError{Op: "docker: container name", Err: err}
	}
	if session {
		if _, err := rand.Read(nonce[:]); err != nil {
			release()
			return nil, &guard.IntegrationError{Op: "docker: session nonce", Err: err}
		}
		sb.nonce = hex.EncodeToString(nonce[:])
	}
	sb.name = "sandboxflow-" + hex.EncodeToString(suffix[:])
	if c == nil {
		sb.name = WarmNamePrefix + hex.EncodeToString(suffix[:])
	}
	id, err := b.eng.Create(ctx, b.spec(c, sb, host))
	if err != nil {
		if ctx.Err() != nil {
			// The daemon may have created it after the call was given up: remove it by name.
			_ = b.remove(ctx, sb.name, false)
		}
		release()
		return nil, b.createError(ctx, c, err)
	}
	sb.id = id
	if ctx.Err() != nil {
		_ = b.remove(ctx, id, false)
		release()
		return nil, &guard.IntegrationError{Op: "docker: create container " + sb.name, Err: ctx.Err()}
	}
	return sb, nil
}

// hostFacts is what the daemon says of its host (cgroup version, CPUs), asked once per backend.
func (b *Backend) hostFacts(ctx context.Context) (engineVersion, error) {
	b.hostMu.Lock()
	defer b.hostMu.Unlock()
	if b.host == nil {
		v, err := b.eng.Version(ctx)
		if err != nil {
			return engineVersion{}, err
		}
		b.host = &v
	}
	return *b.host, nil
}

// dockerMaskedPaths are the paths Docker masks by default (moby's oci.DefaultSpec, Docker 28);
// a container's MaskedPaths replaces that list, so it starts from them.
var dockerMaskedPaths = []string{
	"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
	"/sys/devices/virtual/powercap",
}

// maskedPaths are the paths masked in every sandbox: Docker's defaults, each CPU's
// thermal_throttle folder (as Docker 28 masks them; runc skips paths that do not exist) and the
// host's boot id, an identifier of the host (and of its boot) that would link runs on one host.
func maskedPaths(ncpu int) []string {
	out := slices.Clone(dockerMaskedPaths)
	for i := range max(ncpu, 1) {
		out = append(out, fmt.Sprintf("/sys/devices/system/cpu/cpu%d/thermal_throttle", i))
	}
	return append(out, "/proc/sys/kernel/random/boot_id")
}

// ImageID is the ID of the image the backend would run a request in now (guard.ImageNamer):
// Config.Image resolved as every run resolves it.
func (b *Backend) ImageID(ctx context.Context) (string, error) {
	img, err := b.resolveImage(ctx)
	if err != nil {
		return "", err
	}
	return img.ID, nil
}

// resolveImage inspects the configured image: it must be present (never pulled), declare no
// VOLUMEs (they would land on the host's disk, uncapped) and, when pinned with @sha256:, carry
// that digest as its repo digest or its image ID. The container is created from the image ID, so
// what runs is what was checked.
func (b *Backend) resolveImage(ctx context.Context) (imageInfo, error) {
	ref := b.cfg.Image
	img, err := b.eng.Image(ctx, ref)
	name, digest, pinned := strings.Cut(ref, "@")
	if pinned && err != nil {
		// A locally built image has no repo digest: the pin may name its image ID.
		img, err = b.eng.Image(ctx, name)
	}
	switch {
	case isNotFound(err):
		return imageInfo{}, &guard.ConfigError{Msg: missingImageMsg(ref)}
	case err != nil:
		return imageInfo{}, &guard.IntegrationError{Op: "docker: inspect image " + ref, Err: err}
	case len(img.Volumes) > 0:
		return imageInfo{}, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: image %q declares VOLUMEs %v, which would be written to the host's disk without a size limit; use an image without VOLUME", ref, img.Volumes)}
	case pinned && img.ID != digest && !slices.Contains(img.RepoDigests, ref):
		return imageInfo{}, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: image %q is pinned, but the local image has ID %s and repo digests %v", ref, img.ID, img.RepoDigests)}
	}
	b.unfitMu.Lock()
	defer b.unfitMu.Unlock()
	if b.unfit.id == img.ID {
		return imageInfo{}, b.unfit.err
	}
	return img, nil
}

// createError types a failed create: a missing image or network, or a setting the daemon
// refuses, is a ConfigError; anything else is an IntegrationError that may be retried.
func (b *Backend) createError(ctx context.Context, c *guard.Checked, err error) error {
	wrapped := fmt.Errorf("docker: create container: %w", err)
	switch {
	case isNotFound(err):
		if present, ierr := b.eng.ImagePresent(ctx, b.cfg.Image); ierr == nil && !present {
			return &guard.ConfigError{Msg: missingImageMsg(b.cfg.Image)}
		}
		if c != nil && c.Network {
			if present, nerr := b.eng.NetworkPresent(ctx, b.cfg.Network); nerr == nil && !present {
				return &guard.ConfigError{Msg: fmt.Sprintf("docker backend: network %q does not exist; create it (docker network create ...) or set the backend's Network", b.cfg.Network)}
			}
		}
	case errors.Is(err, errInvalid):
		return &guard.ConfigError{Msg: fmt.Sprintf("docker backend: the daemon refused the container settings (runtime %q, image %q): %v", b.cfg.Runtime, b.cfg.Image, err)}
	}
	return &guard.IntegrationError{Op: "docker: create container", Err: wrapped}
}

func missingImageMsg(image string) string {
	return fmt.Sprintf("docker backend: image %q is not on this Docker host and is never pulled at run time; "+
		"run `docker pull %s` (or build it: any image with python3 and sh works; scripts/setup-docker.sh builds the test images) before starting the worker", image, image)
}

// clip shortens diagnostics quoted in errors.
func clip(b []byte) []byte {
	const max = 512
	if len(b) > max {
		return b[:max]
	}
	return b
}

// removeConflictRetries bounds how often remove tries again after a conflict (the container
// still exiting), waiting Config.RemoveRetryWait, then twice as long each time.
const removeConflictRetries = 5

// remove kills and force-removes a container, treating "not found" as success and retrying a
// conflict (under gVisor, a kill can meet the container still exiting). It runs even when ctx
// has ended, bounded by the cleanup timeout.
func (b *Backend) remove(ctx context.Context, id string, kill bool) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.CleanupTimeout)
	defer cancel()
	if kill {
		// Best effort: Remove below kills too; a kill error (not running, gone) changes nothing.
		_ = b.eng.Kill(cctx, id)
	}
	wait := b.cfg.RemoveRetryWait
	for try := 0; ; try++ {
		err := b.eng.Remove(cctx, id)
		switch {
		case err == nil || isNotFound(err):
			return nil
		case !errors.Is(err, errConflict) || try == removeConflictRetries:
			return fmt.Errorf("docker: remove container %s: %w", id, err)
		}
		select {
		case <-cctx.Done():
			return fmt.Errorf("docker: remove container %s: %w", id, err)
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// removeLater removes a container off the critical path (killing it first when kill is set) and
// then frees its uid; Close and WaitRemovals wait for it.
func (b *Backend) removeLater(sb *sandbox, kill bool) { b.removeAfter(sb, kill, 0) }

// removeAfterRun is how long the removal of a container whose run ended waits (see
// refillAfterRun): past the result's way back to its reviewer.
const removeAfterRun = refillAfterRun

// removeAfter is removeLater, starting after d.
func (b *Backend) removeAfter(sb *sandbox, kill bool, d time.Duration) {
	b.removals.Add(1)
	go func() {
		defer b.removals.Done()
		defer sb.release()
		if d > 0 {
			time.Sleep(d)
		}
		if err := b.remove(context.Background(), sb.id, kill); err != nil {
			b.log.Warn("sandbox container not removed; the reaper will retry", "container", sb.id, "error", err)
		}
	}()
}

// CheckImage inspects the configured image as every run does (present, no VOLUMEs, matching its
// pin) and returns its ID. The worker calls it at start-up, so that a wrong image or pin stops
// the worker instead of failing every run.
func (b *Backend) CheckImage(ctx context.Context) (string, error) {
	img, err := b.resolveImage(ctx)
	if err != nil {
		return "", err
	}
	return img.ID, nil
}

// nativeLoaderEnv are env names that make a library load native code from a file they name:
// OpenSSL's configuration (providers and engines by path, loaded on `import hashlib` or `ssl`),
// its module and engine folders, and glibc's iconv modules. guard.DefaultDeniedEnv refuses them
// (and more) before approval, for every backend; this backend refuses them again, for a policy
// whose DeniedEnv leaves them out.
var nativeLoaderEnv = []string{"OPENSSL_CONF", "OPENSSL_MODULES", "OPENSSL_ENGINES", "GCONV_PATH"}

// refuseNativeLoaders refuses what would load native code from an input file: a file named like
// a native extension module (*.so: Python imports mod.so in place of the mod.py beside it and
// runs its initialisers), and env names of nativeLoaderEnv (OPENSSL_CONF naming an input file
// whose provider module is another one, whatever its name). /work is mounted noexec, so under
// runc and a current gVisor none of them can load; Debian's gVisor (20221219) maps them
// executable all the same, which would run native code the reviewer was shown as "binary" when
// the code imports a module it was shown as source, or hashlib. No run can use them, so refusing
// them costs nothing.
func refuseNativeLoaders(c guard.Checked) error {
	for _, f := range c.Files {
		if strings.HasSuffix(f.Name, ".so") {
			return &guard.ToolUsageError{Msg: fmt.Sprintf("docker backend: input file %q is named like a native extension module (*.so): "+
				"Python would import it in place of a module of that name, and /work is noexec, so no run can load it", f.Name)}
		}
	}
	for _, e := range c.Env {
		if slices.Contains(nativeLoaderEnv, e.Name) {
			return &guard.ToolUsageError{Msg: fmt.Sprintf("docker backend: env %s makes a library load native code from the file it names; "+
				"/work is noexec, so no run can use it", e.Name)}
		}
	}
	return nil
}
