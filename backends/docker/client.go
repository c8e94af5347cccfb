package docker

// This is the only file that imports the Docker client module. Moving to another client (for
// example github.com/moby/moby/client) means rewriting this file alone.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// dockerEngine is the engine over github.com/docker/docker/client.
type dockerEngine struct {
	cli *client.Client
}

// newDockerEngine returns a client for host ("" means the environment: DOCKER_HOST, or the
// default socket) that negotiates the API version with the daemon. It does no I/O.
func newDockerEngine(host string) (*dockerEngine, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker: new client: %w", err)
	}
	return &dockerEngine{cli: cli}, nil
}

// classify adds this package's sentinels to a Docker client error, keeping the original.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%w: %w", errUnreachable, err)
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%w: %w", errNotFound, err)
	case cerrdefs.IsInvalidArgument(err):
		return fmt.Errorf("%w: %w", errInvalid, err)
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("%w: %w", errConflict, err)
	}
	return err
}

func (e *dockerEngine) Ping(ctx context.Context) error {
	_, err := e.cli.Ping(ctx)
	return classify(err)
}

func (e *dockerEngine) Version(ctx context.Context) (engineVersion, error) {
	v, err := e.cli.ServerVersion(ctx)
	if err != nil {
		return engineVersion{}, classify(err)
	}
	info, err := e.cli.Info(ctx)
	if err != nil {
		return engineVersion{}, classify(err)
	}
	out := engineVersion{
		ServerVersion:   v.Version,
		APIVersion:      v.APIVersion,
		MinAPIVersion:   v.MinAPIVersion,
		ClientAPI:       e.cli.ClientVersion(),
		InitBinary:      info.InitBinary,
		CgroupVersion:   info.CgroupVersion,
		NCPU:            info.NCPU,
		SecurityOptions: info.SecurityOptions,
	}
	for name := range info.Runtimes {
		out.Runtimes = append(out.Runtimes, name)
	}
	sort.Strings(out.Runtimes)
	return out, nil
}

func (e *dockerEngine) ImagePresent(ctx context.Context, ref string) (bool, error) {
	_, err := e.cli.ImageInspect(ctx, ref)
	return present(err)
}

func (e *dockerEngine) Image(ctx context.Context, ref string) (imageInfo, error) {
	img, err := e.cli.ImageInspect(ctx, ref)
	if err != nil {
		return imageInfo{}, classify(err)
	}
	out := imageInfo{ID: img.ID, RepoDigests: img.RepoDigests}
	if img.Config != nil {
		for v := range img.Config.Volumes {
			out.Volumes = append(out.Volumes, v)
		}
		sort.Strings(out.Volumes)
	}
	return out, nil
}

func (e *dockerEngine) NetworkPresent(ctx context.Context, name string) (bool, error) {
	_, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	return present(err)
}

func (e *dockerEngine) Create(ctx context.Context, s containerSpec) (string, error) {
	cfg := &container.Config{
		Image:        s.Image,
		Entrypoint:   s.Cmd,
		Env:          s.Env,
		Labels:       s.Labels,
		WorkingDir:   s.WorkDir,
		User:         s.User,
		Hostname:     s.Hostname,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    !s.KeepStdin,
		Healthcheck:  &container.HealthConfig{Test: []string{"NONE"}},
	}
	pids := s.PidsLimit
	initProc := s.Init
	host := &container.HostConfig{
		Runtime:        s.Runtime,
		NetworkMode:    container.NetworkMode(s.NetworkMode),
		IpcMode:        container.IpcMode(s.IPCMode),
		ShmSize:        s.ShmBytes,
		ReadonlyRootfs: s.ReadonlyRootfs,
		CapDrop:        s.CapDrop,
		CapAdd:         s.CapAdd,
		SecurityOpt:    s.SecurityOpt,
		Tmpfs:          s.Tmpfs,
		Init:           &initProc,
		LogConfig:      logConfig(s.KeepLog),
		DNS:            s.DNS,
		OomScoreAdj:    s.OomScoreAdj,
		MaskedPaths:    s.MaskedPaths,
		Resources: container.Resources{
			PidsLimit:  &pids,
			Memory:     s.MemoryBytes,
			MemorySwap: s.MemoryBytes,
			NanoCPUs:   s.NanoCPUs,
		},
	}
	if s.CgroupnsPrivate {
		host.CgroupnsMode = container.CgroupnsModePrivate
	}
	for _, u := range s.Ulimits {
		host.Ulimits = append(host.Ulimits, &container.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	resp, err := e.cli.ContainerCreate(ctx, cfg, host, nil, nil, s.Name)
	if err != nil {
		return "", classify(err)
	}
	return resp.ID, nil
}

// logConfig is the log driver of a container that keeps up to keep bytes of its output: Docker's
// "local" driver (it keeps bytes as they were written, binary frames included) in one file that
// is never rotated (a rotation would lose the report's start), or "none".
func logConfig(keep int64) container.LogConfig {
	if keep <= 0 {
		return container.LogConfig{Type: "none"}
	}
	return container.LogConfig{Type: "local", Config: map[string]string{
		"max-size": strconv.FormatInt(keep, 10), "max-file": "1", "compress": "false"}}
}

func (e *dockerEngine) Logs(ctx context.Context, id string, stdout, stderr io.Writer) error {
	return e.logs(ctx, id, false, stdout, stderr)
}

func (e *dockerEngine) FollowLogs(ctx context.Context, id string, stdout, stderr io.Writer) error {
	return e.logs(ctx, id, true, stdout, stderr)
}

func (e *dockerEngine) logs(ctx context.Context, id string, follow bool, stdout, stderr io.Writer) error {
	rc, err := e.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow})
	if err != nil {
		return classify(err)
	}
	defer rc.Close()
	_, err = stdcopy.StdCopy(stdout, stderr, rc)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

func (e *dockerEngine) Attach(ctx context.Context, id string) (attachment, error) {
	resp, err := e.cli.ContainerAttach(ctx, id, container.AttachOptions{
		Stream: true, Stdin: true, Stdout: true, Stderr: true,
	})
	if err != nil {
		return nil, classify(err)
	}
	return &hijacked{resp: resp}, nil
}

// hijacked is an attachment over the hijacked HTTP connection of an attach call. Without a TTY
// the daemon multiplexes stdout and stderr on it.
type hijacked struct {
	resp types.HijackedResponse
}

func (h *hijacked) Write(p []byte) (int, error) { return h.resp.Conn.Write(p) }
func (h *hijacked) CloseWrite() error           { return h.resp.CloseWrite() }
func (h *hijacked) Close() error                { h.resp.Close(); return nil }

func (h *hijacked) Demux(stdout, stderr io.Writer) error {
	_, err := stdcopy.StdCopy(stdout, stderr, h.resp.Reader)
	return err
}

func (e *dockerEngine) Start(ctx context.Context, id string) error {
	return classify(e.cli.ContainerStart(ctx, id, container.StartOptions{}))
}

func (e *dockerEngine) Wait(ctx context.Context, id string) (int64, error) {
	statusCh, errCh := e.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case st := <-statusCh:
		if st.Error != nil && st.Error.Message != "" {
			return st.StatusCode, fmt.Errorf("wait: %s", st.Error.Message)
		}
		return st.StatusCode, nil
	case err := <-errCh:
		return 0, classify(err)
	}
}

func (e *dockerEngine) Inspect(ctx context.Context, id string) (containerState, error) {
	c, err := e.cli.ContainerInspect(ctx, id)
	if err != nil {
		return containerState{}, classify(err)
	}
	if c.ContainerJSONBase == nil || c.State == nil {
		return containerState{}, fmt.Errorf("inspect %s: no state in the daemon's answer", id)
	}
	return containerState{
		Running:   c.State.Running,
		ExitCode:  c.State.ExitCode,
		OOMKilled: c.State.OOMKilled,
		Error:     c.State.Error,
	}, nil
}

// Counters reads the container's cgroup files on this host when it can find them (cgroup.go),
// else asks the daemon's stats API at each reading.
func (e *dockerEngine) Counters(ctx context.Context, id string) (counters, error) {
	c, err := e.cli.ContainerInspect(ctx, id)
	if err != nil {
		return nil, classify(err)
	}
	if c.ContainerJSONBase == nil || c.State == nil || !c.State.Running || c.State.Pid <= 0 {
		return nil, fmt.Errorf("counters of %s: the container is not running", id)
	}
	if files, err := cgroupFilesOf(c.State.Pid); err == nil {
		if _, err := files.read(); err == nil {
			return files, nil
		}
	}
	return apiCounters{e: e, id: id}, nil
}

// apiCounters reads a container's counters through the daemon's one-shot stats.
type apiCounters struct {
	e  *dockerEngine
	id string
}

func (a apiCounters) Read(ctx context.Context) (containerStats, error) {
	e, id := a.e, a.id
	r, err := e.cli.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return containerStats{}, classify(err)
	}
	defer r.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&st); err != nil {
		return containerStats{}, fmt.Errorf("stats %s: %w", id, err)
	}
	if st.Read.IsZero() {
		// The daemon answers a container that is not running with an empty reading.
		return containerStats{}, fmt.Errorf("stats %s: the container is not running", id)
	}
	return containerStats{CPU: time.Duration(st.CPUStats.CPUUsage.TotalUsage), PeakMemoryBytes: int64(st.MemoryStats.MaxUsage),
		MemoryBytes: int64(st.MemoryStats.Usage)}, nil
}

func (e *dockerEngine) Rename(ctx context.Context, id, name string) error {
	return classify(e.cli.ContainerRename(ctx, id, name))
}

func (e *dockerEngine) Kill(ctx context.Context, id string) error {
	return classify(e.cli.ContainerKill(ctx, id, "KILL"))
}

func (e *dockerEngine) Signal(ctx context.Context, id, signal string) error {
	return classify(e.cli.ContainerKill(ctx, id, signal))
}

func (e *dockerEngine) Remove(ctx context.Context, id string) error {
	err := e.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "is already in progress") {
		// Another removal (the reaper's, or the warm pool's) has it: it is going.
		return nil
	}
	return classify(err)
}

func (e *dockerEngine) List(ctx context.Context, labels map[string]string) ([]containerSummary, error) {
	args := filters.NewArgs()
	for k, v := range labels {
		args.Add("label", k+"="+v)
	}
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, classify(err)
	}
	out := make([]containerSummary, 0, len(list))
	for _, c := range list {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, containerSummary{
			ID:      c.ID,
			Name:    name,
			Created: time.Unix(c.Created, 0),
			Labels:  c.Labels,
			State:   string(c.State),
		})
	}
	return out, nil
}

func (e *dockerEngine) Close() error { return e.cli.Close() }

// present turns the error of an inspect call into whether the object exists: a not-found error
// means it does not; any other error is classified.
func present(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, classify(err)
}

// DaemonHost reports the CPUs and memory of the Docker daemon's host (its Info's NCPU and
// MemTotal), which are what the sandbox containers share. host "" means the environment, as in
// Config.DockerHost.
func DaemonHost(ctx context.Context, host string) (cpus int, memoryBytes int64, err error) {
	eng, err := newDockerEngine(host)
	if err != nil {
		return 0, 0, err
	}
	defer eng.Close()
	info, err := eng.cli.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("docker: daemon info: %w", classify(err))
	}
	return info.NCPU, info.MemTotal, nil
}
