// Package docker is sandboxflow's default backend: every run gets a fresh, hardened Docker
// container that is started once, for that run only, and removed afterwards whatever happens.
//
// # The container
//
// Each container is created with:
//
//   - no network (NetworkMode "none": loopback only); a request with network=true joins
//     Config.Network instead. Docker's "bridge" network is open egress, cloud metadata addresses
//     and services on the host included: give a network with egress rules if you allow network.
//     Under runsc registered with --network=none a container has only loopback whatever network
//     it joins;
//   - a read-only root filesystem, with /work (the working folder) and /tmp as tmpfs mounted
//     rw,noexec,nosuid,nodev with a size and uid/gid/mode options, so the sandbox user owns them;
//   - CapDrop ALL, no-new-privileges, user 65534:65534 (a configured root user is refused);
//   - sandboxflow's own seccomp profile (seccomp.json, DefaultSeccompProfile): an allow list of
//     ordinary system calls, everything else failing with ENOSYS, and EPERM for calls the
//     sandbox never needs: io_uring_* (which Docker 20.10's default profile lets through),
//     unshare, setns, mount and the new mount API, ptrace, process_vm_readv/writev, kcmp,
//     pidfd_getfd, keyctl, bpf, perf_event_open, userfaultfd, modules, clocks, swap, reboot,
//     quotas, NUMA policy, personality. clone is allowed only without namespace flags;
//   - a pids limit, memory with swap equal to memory (no swap), CPUs, IPC "none", RLIMIT_CORE 0
//     and RLIMIT_NOFILE 1024;
//   - Docker's init (docker-init, tini) as PID 1, so the sandbox's processes are reaped and the
//     bootstrap is not PID 1;
//   - the logging driver "none" (output never lands in the daemon's log files);
//   - no host mounts and no Docker socket; the image is never pulled (a missing image is a
//     guard.ConfigError naming the `docker pull` or build to run);
//   - labels: LabelManaged, the Temporal workflow id, run id and activity id, the creation time,
//     the runtime and the digest, plus Config.Labels.
//
// # A run
//
// The container's command is `python3 -I -S -c <bootstrap>`, where the bootstrap (bootstrap.py,
// embedded) is ours. The code, input files, env and limits go in on stdin as one JSON document;
// code never goes on a command line (a host's `ps` would show it). The bootstrap writes the input
// files into /work, runs the code as a child in its own session (Python with -u and
// PYTHONUNBUFFERED=1, reading its program from a pipe; sh reading a script from /tmp), drains both
// output streams to the end while keeping at most the caps, and on the child's exit or the
// timeout SIGKILLs the child's process group and then every process the sandbox user can signal,
// so daemons and processes that ignore SIGTERM do not outlive the run. It then collects the
// produced files and prints one JSON line.
//
// The child's environment is the request's env plus LANG=C.UTF-8 (the request may override it),
// and PATH, HOME=/work, TMPDIR=/tmp and, for Python, PYTHONUNBUFFERED=1 and
// PYTHONDONTWRITEBYTECODE=1 (the sandbox's, overriding the request). Nothing of the worker's
// environment reaches the container.
//
// Produced files are regular files under /work, found without following links (symlinks,
// FIFOs, devices and sockets are dropped and set files_truncated), at most 8 folders deep; an
// input file whose bytes did not change is not reported, a changed one is. Names that are not
// valid UTF-8, or that guard.CheckFileName refuses, or that collide, are dropped and set
// files_truncated; so are files over the size and count limits.
//
// The worker treats the result line as untrusted (the code runs as the same user and could write
// to the bootstrap's stdout): it reads at most maxResultBytes (the caps, base64-encoded, plus room
// for names), parses it strictly, re-applies every limit with guard.Enforce, and a result it
// cannot read is a guard.IntegrationError with CodeMayHaveStarted set.
//
// # Time, limits and errors
//
// The bootstrap enforces the timeout and reports the output printed before it. The worker
// enforces its own deadline of timeout + Config.DeadlineSlack after the container started: it
// never waits for the container to exit by itself after that, but kills and force-removes it and
// reports a timeout. When the run's context ends the container is killed and removed at once.
//
// A process killed by the memory limit gives the outcome memory_limit (from the container's
// OOMKilled state or the memory cgroup's oom_kill counter) and a note on stderr; a run that hit
// the pids limit (the pids cgroup's max counter) and did not end well gives the outcome pids_limit.
// Under runsc the pids limit also counts gVisor's own host threads (about six per process of the
// code, with the ptrace platform): a modest pipeline can hit it, and the whole sandbox then exits
// with code 2 and no message, which is reported as the outcome pids_limit, not as the code's exit.
// That is why runsc gets a higher default pids limit (512); under runsc a fork bomb usually
// reaches the memory limit first.
//
// Errors follow guard: every failure before the request has been written in full on the
// container's stdin (daemon unreachable, create, attach or start failed) is an IntegrationError
// with CodeMayHaveStarted false, which may be retried: the bootstrap runs nothing before it has
// read the whole document. Every failure after is CodeMayHaveStarted true and never retried. A
// missing image or network, a runtime the daemon does not know and an image without python3 are
// ConfigErrors.
//
// # Off the critical path
//
// A run is prepare (create the container) → execute (attach, start, send the request, read the
// result, wait, inspect) → remove. When the bootstrap could read the pids and memory cgroup
// counters itself (runc), the worker does not wait for the container's exit or inspect it. The
// forced removal of a finished container happens in the background; Close and WaitRemovals wait for it, and a container that could not be removed is
// left to the reaper. A pool could later create containers ahead of time with prepare; each would
// still be started once, for one run, and removed.
//
// # Orphans
//
// Containers left behind by a lost worker carry LabelManaged. Reap removes those created more
// than a threshold ago; StartReaper runs it at worker start and on an interval. The threshold
// must exceed the longest run (DefaultReapAge: the default maximum timeout and grace plus five
// minutes).
//
// # What leaks
//
// Even with network "none", Docker copies the host's resolver configuration into
// /etc/resolv.conf. Under runc the code sees the host's kernel version (uname), CPU model and
// count (/proc/cpuinfo) and total memory (/proc/meminfo, sysinfo), and shares the host kernel:
// for hostile code use runsc (gVisor), which has its own kernel and hides most of these, or a VM.
// noexec on /work and /tmp stops executing files written there, but not code that loads a
// program from memory (memfd) or an interpreter; it is one layer, not a boundary.
//
// IPC "none" leaves no /dev/shm under runc, so Python's multiprocessing fails; IPC "private"
// (with Config.ShmBytes) gives a private /dev/shm.
//
// Never give the worker's Docker socket to anything else: access to it is root on the host.
// The worker itself needs it; run the worker on a host (or VM) dedicated to sandboxes.
package docker
