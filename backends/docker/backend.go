package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Name is the backend's name, part of every digest. The runtime (runc or runsc) is not part of
// it: it is the operator's setting, recorded on each container as the label LabelRuntime.
const Name = "docker"

// Notes appended to stderr when the sandbox, not the code, decided how a run ended.
const (
	NoteMemoryLimit = "\nsandboxflow: the memory limit (%d bytes) was reached and the kernel killed a process of the run\n"
	NotePidsLimit   = "\nsandboxflow: the process limit (%d) was reached; forks failed or the sandbox was stopped\n"
	NoteDeadline    = "\nsandboxflow: the sandbox did not report within the timeout; the container was killed and its output is lost\n"
	NoteCancelled   = "\nsandboxflow: the run's deadline passed; the container was killed and its output is lost\n"
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

	removals sync.WaitGroup
}

// New validates cfg and returns a backend using the Docker daemon it names. It does no I/O: an
// unreachable daemon shows in the first run (a retryable IntegrationError) and in Doctor.
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
	var compact bytes.Buffer
	if err := json.Compact(&compact, cfg.SeccompProfile); err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: seccomp profile: %v", err)}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Backend{cfg: cfg, eng: eng, seccomp: "seccomp=" + compact.String(), log: log.With("backend", Name)}, nil
}

// Name returns "docker".
func (b *Backend) Name() string { return Name }

// Config returns the backend's configuration with defaults applied.
func (b *Backend) Config() Config { return b.cfg }

// Close waits until every removal started by Run has finished (or ctx ends), then releases the
// Docker client. Call it after the last Run.
func (b *Backend) Close(ctx context.Context) error {
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
	id string
}

// Run runs c in a fresh container and removes the container afterwards.
//
// Errors: a guard.ConfigError for a setting that cannot work (missing image or network, unknown
// runtime, an image without python3); a guard.IntegrationError with CodeMayHaveStarted false for
// every failure before the request reached the container (daemon unreachable, create, attach or
// start failed), and true after (wait failed, unreadable result, cancelled). A timeout is a
// result.
func (b *Backend) Run(ctx context.Context, c guard.Checked) (guard.Result, error) {
	start := time.Now()
	stdin, err := encodeRequest(c)
	if err != nil {
		return guard.Result{}, err
	}
	sb, err := b.prepare(ctx, c)
	if err != nil {
		return guard.Result{}, err
	}
	res, removeNow, err := b.execute(ctx, sb, c, stdin)
	if removeNow {
		if rerr := b.remove(ctx, sb.id, true); rerr != nil {
			b.log.Warn("sandbox container not removed; the reaper will retry", "container", sb.id, "error", rerr)
		}
	} else {
		b.removeLater(sb.id)
	}
	if err != nil {
		return guard.Result{}, err
	}
	res = guard.Enforce(res, c.Limits)
	res.Duration = time.Since(start)
	res.Digest = c.Digest
	res.Backend = Name
	return res, nil
}

// spec is the container c runs in: every hardening setting of the package documentation.
func (b *Backend) spec(c guard.Checked, name string) containerSpec {
	network := "none"
	if c.Network {
		network = b.cfg.Network
	}
	tmpfs := func(size int64) string {
		uid, gid, _ := strings.Cut(b.cfg.User, ":")
		return "rw,noexec,nosuid,nodev,size=" + strconv.FormatInt(size, 10) + ",uid=" + uid + ",gid=" + gid + ",mode=0700"
	}
	runtime := b.cfg.Runtime
	if runtime == "" {
		runtime = "runc"
	}
	labels := map[string]string{
		LabelManaged:    "true",
		LabelWorkflowID: c.Owner.WorkflowID,
		LabelRunID:      c.Owner.RunID,
		LabelActivityID: c.Owner.ActivityID,
		LabelCreated:    time.Now().UTC().Format(time.RFC3339Nano),
		LabelRuntime:    runtime,
		LabelDigest:     c.Digest,
	}
	for k, v := range b.cfg.Labels {
		labels[k] = v
	}
	shm := int64(0)
	if b.cfg.IPC == "private" {
		shm = b.cfg.ShmBytes
	}
	return containerSpec{
		Name:           name,
		Image:          b.cfg.Image,
		Cmd:            bootstrapCmd(),
		Labels:         labels,
		WorkDir:        "/work",
		User:           b.cfg.User,
		Hostname:       "sandbox",
		Runtime:        b.cfg.Runtime,
		NetworkMode:    network,
		IPCMode:        b.cfg.IPC,
		ShmBytes:       shm,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges", b.seccomp},
		PidsLimit:      b.cfg.PidsLimit,
		MemoryBytes:    b.cfg.MemoryBytes,
		NanoCPUs:       int64(b.cfg.CPUs * 1e9),
		Tmpfs:          map[string]string{"/work": tmpfs(b.cfg.WorkTmpfsBytes), "/tmp": tmpfs(b.cfg.TmpTmpfsBytes)},
		Init:           true,
		Ulimits:        []ulimit{{Name: "core", Soft: 0, Hard: 0}, {Name: "nofile", Soft: 1024, Hard: 1024}},
	}
}

// prepare creates the container for c. Nothing runs in it until execute writes the request on its
// stdin, so every failure here may be retried. It is the step a pool would do ahead of time.
func (b *Backend) prepare(ctx context.Context, c guard.Checked) (*sandbox, error) {
	var suffix [8]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, &guard.IntegrationError{Op: "docker: container name", Err: err}
	}
	name := "sandboxflow-" + hex.EncodeToString(suffix[:])
	id, err := b.eng.Create(ctx, b.spec(c, name))
	if err != nil {
		return nil, b.createError(ctx, c, err)
	}
	if ctx.Err() != nil {
		_ = b.remove(ctx, id, false)
		return nil, &guard.IntegrationError{Op: "docker: create container " + name, Err: ctx.Err()}
	}
	return &sandbox{id: id}, nil
}

// createError types a failed create: a missing image or network, or a setting the daemon
// refuses, is a ConfigError; anything else is an IntegrationError that may be retried.
func (b *Backend) createError(ctx context.Context, c guard.Checked, err error) error {
	wrapped := fmt.Errorf("docker: create container: %w", err)
	switch {
	case isNotFound(err):
		if present, ierr := b.eng.ImagePresent(ctx, b.cfg.Image); ierr == nil && !present {
			return &guard.ConfigError{Msg: missingImageMsg(b.cfg.Image)}
		}
		if c.Network {
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

// execute runs the request in the created container and reads its result. removeNow says whether
// the container must be removed before returning (it may still run); otherwise it has exited and
// its removal can happen off the critical path.
func (b *Backend) execute(ctx context.Context, sb *sandbox, c guard.Checked, stdin []byte) (res guard.Result, removeNow bool, err error) {
	notStarted := func(op string, err error) error {
		return &guard.IntegrationError{Op: op + " " + sb.id, Err: err}
	}
	started := func(op string, err error) error {
		return &guard.IntegrationError{Op: op + " " + sb.id, Err: err, CodeMayHaveStarted: true}
	}

	att, err := b.eng.Attach(ctx, sb.id)
	if err != nil {
		return guard.Result{}, true, notStarted("docker: attach container", err)
	}
	defer att.Close()
	stdout := &boundedBuffer{max: maxResultBytes(c.Limits)}
	diag := guard.NewCapBuffer(diagBytes)
	demuxed := make(chan error, 1)
	go func() { demuxed <- att.Demux(stdout, diag) }()

	if err := b.eng.Start(ctx, sb.id); err != nil {
		return guard.Result{}, true, notStarted("docker: start container", err)
	}
	deadline := time.NewTimer(c.Limits.Timeout + b.cfg.DeadlineSlack)
	defer deadline.Stop()

	// The bootstrap runs nothing before it has read the whole request and seen its end: code can
	// have started only once every byte was written.
	type written struct {
		n   int
		err error
	}
	wrote := make(chan written, 1)
	go func() {
		n, err := att.Write(stdin)
		if err == nil {
			err = att.CloseWrite()
		}
		wrote <- written{n, err}
	}()
	sentAll := false
	writeFailed := func(w written) error {
		op := "docker: write request to container"
		if sentAll {
			return started(op, w.err)
		}
		return notStarted(op, w.err)
	}

wait:
	for {
		select {
		case w := <-wrote:
			wrote = nil
			sentAll = w.n == len(stdin)
			if w.err != nil {
				return guard.Result{}, true, writeFailed(w)
			}
		case derr := <-demuxed:
			if derr != nil {
				if errors.Is(derr, errResultTooLarge) {
					return guard.Result{}, true, started("docker: read result of container",
						fmt.Errorf("%w (%d bytes)", derr, stdout.max))
				}
				return guard.Result{}, true, started("docker: read result of container", derr)
			}
			break wait
		case <-deadline.C:
			res := guard.Result{TimedOut: true, ExitCode: -1}
			return withNote(res, NoteDeadline, c.Limits.MaxStderrBytes), true, nil
		case <-ctx.Done():
			if !sentAll {
				return guard.Result{}, true, notStarted("docker: run cancelled before the request was sent to container", ctx.Err())
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				res := guard.Result{TimedOut: true, ExitCode: -1}
				return withNote(res, NoteCancelled, c.Limits.MaxStderrBytes), true, nil
			}
			return guard.Result{}, true, started("docker: run cancelled; container", ctx.Err())
		}
	}
	if wrote != nil {
		// The output ended while the request was still being written: the write ends at once.
		select {
		case w := <-wrote:
			sentAll = w.n == len(stdin)
			if w.err != nil && !sentAll {
				return guard.Result{}, true, writeFailed(w)
			}
		case <-time.After(b.cfg.CleanupTimeout):
			return guard.Result{}, true, started("docker: write request to container", errors.New("the write did not end after the container's output did"))
		}
	}
	if !sentAll {
		// The output ended before the request was written: the bootstrap never ran the code.
		return guard.Result{}, true, notStarted("docker: container exited before reading the request",
			fmt.Errorf("container stderr: %q", clip(diag.Bytes())))
	}

	// Fast path: a readable result whose bootstrap could see the cgroup counters needs nothing
	// from the daemon. The container is exiting; its (forced) removal happens off the critical
	// path.
	if br, err := decodeResult(stdout.buf); err == nil && br.LimitsKnown && len(br.Error) == 0 {
		res, err := b.interpret(c, stdout.buf, diag.Bytes(), 0, containerState{})
		return res, false, err
	}

	// The output has ended, so the bootstrap has exited; the container follows at once.
	waitCtx, cancel := context.WithTimeout(ctx, b.cfg.DeadlineSlack+5*time.Second)
	defer cancel()
	exitCode, err := b.eng.Wait(waitCtx, sb.id)
	if err != nil {
		return guard.Result{}, true, started("docker: wait for container", err)
	}
	state, err := b.eng.Inspect(waitCtx, sb.id)
	if err != nil {
		return guard.Result{}, true, started("docker: inspect container", err)
	}
	res, err = b.interpret(c, stdout.buf, diag.Bytes(), int(exitCode), state)
	return res, false, err
}

// interpret turns what the container left (its result line, its own stderr, its exit code and
// state) into a result or an error.
func (b *Backend) interpret(c guard.Checked, out, diag []byte, exitCode int, st containerState) (guard.Result, error) {
	memNote := fmt.Sprintf(NoteMemoryLimit, b.cfg.MemoryBytes)
	pidsNote := fmt.Sprintf(NotePidsLimit, b.cfg.PidsLimit)
	br, perr := decodeResult(out)
	if perr == nil && len(br.Error) > 0 {
		return guard.Result{}, &guard.IntegrationError{Op: "docker: sandbox bootstrap", Err: errors.New(string(clip(br.Error))), CodeMayHaveStarted: true}
	}
	if perr == nil {
		res := br.toResult(c.Limits)
		failed := res.TimedOut || res.ExitCode != 0
		switch {
		case st.OOMKilled || br.OOMKills > 0:
			if failed {
				res.Outcome = guard.OutcomeMemoryLimit
			}
			res = withNote(res, memNote, c.Limits.MaxStderrBytes)
		case br.PidsLimitHit:
			if failed {
				res.Outcome = guard.OutcomePidsLimit
			}
			res = withNote(res, pidsNote, c.Limits.MaxStderrBytes)
		}
		return guard.Enforce(res, c.Limits), nil
	}
	// No readable result: the sandbox itself ended the run, or something broke.
	switch {
	case st.OOMKilled:
		res := guard.Result{ExitCode: exitCode, Outcome: guard.OutcomeMemoryLimit}
		return guard.Enforce(withNote(res, memNote, c.Limits.MaxStderrBytes), c.Limits), nil
	case b.cfg.Runtime == RuntimeRunsc && exitCode == 2 && len(out) == 0:
		// gVisor's sandbox exits with 2 and no message when its own threads hit the pids limit.
		res := guard.Result{ExitCode: exitCode, Outcome: guard.OutcomePidsLimit}
		return guard.Enforce(withNote(res, pidsNote, c.Limits.MaxStderrBytes), c.Limits), nil
	case exitCode == 127 && len(out) == 0:
		return guard.Result{}, &guard.ConfigError{Msg: fmt.Sprintf(
			"docker backend: image %q cannot run the sandbox bootstrap (exit 127: python3 not found?); use an image with python3 and sh. Container stderr: %q",
			b.cfg.Image, clip(diag))}
	}
	return guard.Result{}, &guard.IntegrationError{
		Op:                 "docker: read result of container",
		Err:                fmt.Errorf("exit code %d: %w; container stderr: %q", exitCode, perr, clip(diag)),
		CodeMayHaveStarted: true,
	}
}

// clip shortens diagnostics quoted in errors.
func clip(b []byte) []byte {
	const max = 512
	if len(b) > max {
		return b[:max]
	}
	return b
}

// remove kills and force-removes a container, treating "not found" as success. It runs even
// when ctx has ended, bounded by the cleanup timeout.
func (b *Backend) remove(ctx context.Context, id string, kill bool) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.CleanupTimeout)
	defer cancel()
	if kill {
		// Best effort: Remove below kills too; a kill error (not running, gone) changes nothing.
		_ = b.eng.Kill(cctx, id)
	}
	if err := b.eng.Remove(cctx, id); err != nil && !isNotFound(err) {
		return fmt.Errorf("docker: remove container %s: %w", id, err)
	}
	return nil
}

// removeLater removes an exited container off the critical path; Close and WaitRemovals wait for
// it.
func (b *Backend) removeLater(id string) {
	b.removals.Add(1)
	go func() {
		defer b.removals.Done()
		if err := b.remove(context.Background(), id, false); err != nil {
			b.log.Warn("sandbox container not removed; the reaper will retry", "container", id, "error", err)
		}
	}()
}
