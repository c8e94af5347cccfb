package docker

import (
	"context"
	"errors"
	"io"
	"time"
)

// engine is every Docker call the backend makes. It speaks in this package's own types, so the
// Docker client module can change in one file (client.go), and a hand-written fake can stand in
// for it in tests of the error paths.
type engine interface {
	// Ping checks that the daemon answers.
	Ping(ctx context.Context) error
	// Version returns the daemon's version facts and the API version the client negotiated.
	Version(ctx context.Context) (engineVersion, error)
	// ImagePresent reports whether the daemon has the image locally. It never pulls.
	ImagePresent(ctx context.Context, ref string) (bool, error)
	// Image inspects a local image. It never pulls; a missing image is an error for which
	// isNotFound is true.
	Image(ctx context.Context, ref string) (imageInfo, error)
	// NetworkPresent reports whether the daemon has the named network.
	NetworkPresent(ctx context.Context, name string) (bool, error)
	// Create creates a container and returns its id. It never pulls; a missing image or
	// network is an error for which isNotFound is true.
	Create(ctx context.Context, spec containerSpec) (string, error)
	// Attach attaches to the container's stdin, stdout and stderr. Call it before Start.
	Attach(ctx context.Context, id string) (attachment, error)
	// Start starts a created container.
	Start(ctx context.Context, id string) error
	// Wait blocks until the container is not running and returns its exit code.
	Wait(ctx context.Context, id string) (int64, error)
	// Inspect returns the container's state.
	Inspect(ctx context.Context, id string) (containerState, error)
	// Rename gives a container a new name.
	Rename(ctx context.Context, id, name string) error
	// Kill sends SIGKILL to the container.
	Kill(ctx context.Context, id string) error
	// Signal sends the named signal ("USR1") to the container's PID 1, the supervisor.
	Signal(ctx context.Context, id, signal string) error
	// Remove force-removes the container (killing it first if it runs) with its anonymous
	// volumes. A removal already in progress elsewhere counts as done.
	Remove(ctx context.Context, id string) error
	// Logs copies what the container wrote on stdout and stderr since it started, as far as the
	// log driver kept it (containerSpec.KeepLog), to the writers. Call it once the container
	// stopped (Wait) for the whole of it.
	Logs(ctx context.Context, id string, stdout, stderr io.Writer) error
	// FollowLogs is Logs that goes on copying what the container writes after the call, until
	// the container stops, ctx ends, or a writer returns an error (which it returns).
	FollowLogs(ctx context.Context, id string, stdout, stderr io.Writer) error
	// Counters finds the running container's cgroup counters, to read as often as needed while
	// the container lives.
	Counters(ctx context.Context, id string) (counters, error)
	// List returns every container, running or not, that carries all the given labels.
	List(ctx context.Context, labels map[string]string) ([]containerSummary, error)
	// Close releases the client.
	Close() error
}

// attachment is a container's attached stdio.
type attachment interface {
	// Write writes to the container's stdin.
	io.Writer
	// CloseWrite ends the container's stdin.
	CloseWrite() error
	// Demux copies the container's stdout and stderr to the writers until both end. An error
	// from a writer stops the copy and is returned.
	Demux(stdout, stderr io.Writer) error
	// Close closes the connection; a Demux in progress returns.
	Close() error
}

// containerSpec is everything a sandbox container is created with.
type containerSpec struct {
	Name    string
	Image   string
	Cmd     []string
	Env     []string
	Labels  map[string]string
	WorkDir string
	User    string

	Runtime        string
	NetworkMode    string
	IPCMode        string
	ShmBytes       int64
	ReadonlyRootfs bool
	CapDrop        []string
	CapAdd         []string
	SecurityOpt    []string
	PidsLimit      int64
	MemoryBytes    int64
	NanoCPUs       int64
	Tmpfs          map[string]string
	Init           bool
	Ulimits        []ulimit
	Hostname       string
	// DNS replaces the resolver addresses Docker writes into /etc/resolv.conf.
	DNS             []string
	OomScoreAdj     int
	CgroupnsPrivate bool
	// MaskedPaths replace Docker's default masked paths.
	MaskedPaths []string
	// KeepStdin keeps the container's stdin open when the attached worker's connection ends
	// (the daemon's StdinOnce off), so that another worker can attach and write to it: a
	// session's (AdoptSession). A run's stdin ends with its worker's connection: its supervisor
	// learns from that end that its worker is gone.
	KeepStdin bool
	// KeepLog has the daemon keep up to that many bytes of what the container writes (the
	// "local" log driver), so that a worker other than the one attached can read a run's report
	// (Backend.Adopt); zero keeps nothing (the "none" driver).
	KeepLog int64
}

// imageInfo is what the backend reads from an inspected image.
type imageInfo struct {
	// ID is the image ID, "sha256:...".
	ID          string
	RepoDigests []string
	// Volumes are the paths the image declares as VOLUMEs.
	Volumes []string
}

type ulimit struct {
	Name       string
	Soft, Hard int64
}

// containerState is what the backend reads from an inspected container.
type containerState struct {
	Running   bool
	ExitCode  int
	OOMKilled bool
	Error     string
}

// counters reads a container's cgroup counters.
type counters interface {
	Read(ctx context.Context) (containerStats, error)
}

// containerStats is one reading of a running container's cgroup counters.
type containerStats struct {
	// CPU is the CPU time (user and system) the container's cgroup counted since it started.
	CPU time.Duration
	// PeakMemoryBytes is the highest memory use the cgroup recorded since the container
	// started (cgroup v1's max_usage); 0 when the daemon gives none (cgroup v2).
	PeakMemoryBytes int64
	// MemoryBytes is the cgroup's memory use at the reading.
	MemoryBytes int64
}

// containerSummary is one container found by List.
type containerSummary struct {
	ID string
	// Name is the container's name, without Docker's leading slash.
	Name    string
	Created time.Time
	Labels  map[string]string
	State   string
}

// engineVersion is what Doctor reports about the daemon.
type engineVersion struct {
	ServerVersion string
	APIVersion    string
	MinAPIVersion string
	ClientAPI     string
	Runtimes      []string
	InitBinary    string
	// CgroupVersion is "1" or "2" ("" when the daemon does not say).
	CgroupVersion string
	// NCPU is the number of CPUs of the daemon's host.
	NCPU int
	// SecurityOptions are the daemon's, such as "name=seccomp,profile=default", "name=apparmor",
	// "name=userns".
	SecurityOptions []string
}

// errNotFound is what engine methods return (wrapped) when the object does not exist.
var errNotFound = errors.New("not found")

func isNotFound(err error) bool { return errors.Is(err, errNotFound) }

// errUnreachable is what engine methods return (wrapped) when the daemon cannot be reached.
var errUnreachable = errors.New("docker daemon unreachable")

// errConflict is what engine methods return (wrapped) when the daemon refused a request because
// of the object's state at that moment, such as a force-remove that met the container still
// exiting ("Could not kill running container ..., is not running"): worth a short retry.
var errConflict = errors.New("conflict")

// errInvalid is what engine methods return (wrapped) when the daemon refused a request as
// invalid (an unknown runtime, a bad profile): a setting to fix, not a fault to retry.
var errInvalid = errors.New("invalid request")
