// Package docker is sandboxflow's default backend: every run gets a fresh, hardened Docker
// container that is started once, for that run only, and removed afterwards whatever happens;
// every session (issue 28) gets one such container for its whole life (see Sessions).
//
// # The container
//
// Each container is created with:
//
//   - no network (NetworkMode "none": loopback only), also for a request with egress, whose
//     connections go through the supervisor's relay to the worker's filtering proxy (see The
//     protocol), and a neutral, read-only /etc/resolv.conf
//     ("nameserver 127.0.0.1": Docker's per-container copy, read-only because the root is, so
//     the host's resolver addresses do not leak; no host file is mounted); a request with
//     network=true joins Config.Network instead, with Docker's usual resolver. Docker's "bridge"
//     network is open egress, cloud metadata addresses and services on the host included: give
//     a network with egress rules if you allow network. Under runsc registered with
//     --network=none a container has only loopback whatever network it joins;
//   - a read-only root filesystem, with /work (the working folder), /tmp and /dev/shm as tmpfs
//     mounted rw,noexec,nosuid,nodev with a size, owned (uid, gid, mode 0700) by the sandbox uid;
//   - a uid of its own: each concurrent sandbox of a backend runs as a distinct uid (and the
//     same gid) from Config.UIDs (default 100000-100999, never 0), so sandboxes never share
//     per-user kernel limits such as RLIMIT_NPROC, inotify instances or message queues;
//   - CapDrop ALL (under runsc the supervisor keeps CAP_SETUID, CAP_SETGID and CAP_SETPCAP, and
//     the code none of them, see below), no-new-privileges;
//   - Docker's default masked paths (/proc/kcore, /proc/keys, /proc/timer_list, /sys/firmware
//     and the rest of moby's list, each CPU's thermal_throttle) and the host's boot id
//     (/proc/sys/kernel/random/boot_id, an identifier of the host that would link runs on it),
//     which reads as empty under runc; gVisor shows a boot id of its own;
//   - sandboxflow's own seccomp profile (seccomp.json, DefaultSeccompProfile): an allow list of
//     ordinary system calls, everything else failing with ENOSYS, and EPERM for calls the
//     sandbox never needs: io_uring_* (which Docker 20.10's default profile lets through),
//     unshare, setns, mount and the new mount API, ptrace, process_vm_readv/writev, kcmp,
//     pidfd_getfd, keyctl, bpf, perf_event_open, userfaultfd, modules, clocks, swap, reboot,
//     quotas, NUMA policy, personality. prlimit64, setpriority, ioprio_set and sched_set* are
//     allowed only aimed at a process (or group) other than 1, and never at every process of a
//     uid: they check the uid alone, not ptrace's rules, so under runc (where PID 1, the
//     supervisor, is the code's uid) and under gVisor they would let the code lower the
//     supervisor's limits or starve it of CPU. clone is allowed only without namespace flags; clone3
//     fails with ENOSYS, so glibc falls back to clone. Under runsc clone3 is allowed instead:
//     Debian's gVisor (20221219) answers every seccomp errno with EPERM, and glibc falls back
//     only on ENOSYS, so threads, os.system and subprocess would all fail; inside gVisor's
//     kernel namespace flags need capabilities the code does not have;
//   - a pids limit, memory with swap equal to memory (no swap), CPUs, a private IPC namespace
//     (IPC "none" to Docker) with our own /dev/shm (Config.IPC IPCPrivate, the default, so
//     multiprocessing works; IPCNone leaves no /dev/shm), RLIMIT_CORE 0, RLIMIT_NOFILE 1024;
//   - OOM score adjustment 500 for the container (the host's OOM killer takes a sandbox before
//     the worker or the daemon) and 1000 for the code's own process (inside the sandbox the
//     code goes before the supervisor);
//   - a private cgroup namespace where the host has cgroup v2; no health check; the logging
//     driver "local" in one uncompressed file of at most 1 GiB (keptReportBytes): the daemon
//     keeps what the supervisor wrote, its frames, so that a worker other than the attached
//     one can read a run's report (Adopt) or a session's output (AdoptSession);
//   - the image by its ID: before each run the backend inspects Config.Image (it is never
//     pulled; missing, it is a guard.ConfigError naming the `docker pull` or build to run),
//     refuses an image that declares VOLUMEs (they would land on the host's disk uncapped),
//     checks a pin (NAME@sha256:D must match a repo digest or the image ID), creates the
//     container from the ID it saw and reports that ID in guard.Result.ImageID;
//   - no host mounts and no Docker socket;
//   - labels: LabelManaged, LabelDeployment (Config.Deployment), LabelNamespaceID (Config.NamespaceID,
//     when set), the Temporal workflow id, run id and activity id, the creation time, the runtime, the digest and the image ID, plus
//     Config.Labels, and LabelUID (the uid the code runs as); a session's container also
//     LabelSession (the session's workflow id), with the session's run id and its settings
//     digest as LabelRunID and LabelDigest, and LabelSessionNonce (see Sessions).
//
// # The supervisor, and what the code can reach
//
// The container's command is `python3 -I -S -c <supervisor>`: the supervisor (supervisor.py,
// embedded) is ours and is the container's PID 1. The code never goes on a command line.
//
// Under runc the supervisor and the code share the sandbox uid, and the supervisor is out of
// the code's reach because:
//
//   - it is the init of the container's PID namespace and ignores every catchable signal, so
//     the kernel delivers no signal to it from inside the namespace, SIGKILL and SIGSTOP
//     included, and kill(-1) skips it;
//   - it is non-dumpable (prctl PR_SET_DUMPABLE 0): the code cannot open /proc/1/mem,
//     /proc/1/environ or /proc/1/fd/*, and ptrace, process_vm_readv/writev and pidfd_getfd fail
//     with EPERM anyway (seccomp);
//   - the code never holds the supervisor's stdin or stdout: it runs as a child with its stdin,
//     stdout and stderr on pipes, and every other descriptor closed on exec.
//
// gVisor (Debian's 20221219) enforces neither the init's signal protection nor the dumpable
// flag for /proc, so under runsc the supervisor is root inside gVisor's kernel (never the host's)
// with CAP_SETUID, CAP_SETGID and CAP_SETPCAP only, and runs the code, writes its files, collects
// them and kills its processes as the sandbox uid. Before the code's process switches to that
// uid it empties its bounding set (CAP_SETPCAP, which the drop needs, last), its ambient set and
// its inheritable set, and checks the bounding set is empty (or fails the run); the switch then
// clears the permitted and effective sets, so the code's CapBnd, CapPrm, CapEff and CapInh are
// all 0 (gVisor has no ambient set). The code can then not
// signal the supervisor or open its /proc entries, except /proc/1/environ, which gVisor lets
// anyone read and which holds Docker's PATH and HOSTNAME only.
//
// The supervisor needs ctypes for prctl: an image whose python3 lacks it (Debian's
// python3-minimal) fails closed with a guard.ConfigError saying so; python:3.12-slim has it.
//
// What the code can do: anything its uid may do inside the container (its own processes, /work,
// /tmp, /dev/shm), kill or stop every other process of the code, close its own output, print
// anything. What it cannot do: forge or suppress the report, which the supervisor writes on a
// stream the code never holds. Whatever the code does to itself, the run ends as a result: the
// exit status (or 128+signal, with Result.Signal), the output printed up to then, and the limits
// as the worker measured them.
//
// # The protocol
//
// Worker and supervisor exchange frames on the container's stdin and stdout (protocol.go): a
// 4-byte big-endian payload length, a type byte, a 4-byte big-endian channel, the payload. The
// worker sends one request frame (JSON; every string base64 or a plain word, so the supervisor
// parses it without the json module) and keeps stdin open. The supervisor runs nothing before
// it has read the whole request; it then sends stdout and stderr frames as the code writes (up to
// the caps, so output printed before a kill is never lost), an exit frame (exit code, signal,
// timed out, bytes seen, cgroup pids and OOM counters, what the writable folders hold), one frame
// per produced file and an end frame; or an error frame (a config error frame for an image that
// cannot host it). After a run's end frame the supervisor waits for stdin to end (at most 10 s), so
// the container and its cgroup outlive the report: the worker reads the cgroup's counters just
// before it sends the request and once the end frame came, and what they added is the run's
// guard.Result.Usage (usage.go, cgroup.go); a cell's are read around the cell the same way.
//
// Channel 0 is the run. Other channels carry the egress tunnel (egress.go), only in runs whose
// request has egress: before the code starts, the supervisor listens on 127.0.0.1:3128
// (Config.Egress.Port) inside the container, and for each connection the code opens it sends a
// tunnel-open frame on a new channel (numbered from 1, never reused), relays the bytes as
// tunnel-data frames both ways (at most 32 KiB each) and ends each direction with tunnel-close.
// The worker feeds these frames into an egress.Mux whose listener a per-run egress.Proxy serves
// (allowlist = the checked request's egress; private prefixes, caps, secrets and CA from
// Config.Egress), and writes the proxy's frames to the container's stdin. The code's environment
// gets egress.SandboxEnv (HTTP_PROXY, HTTPS_PROXY, NO_PROXY and friends); when the run names
// secrets the supervisor writes the egress CA and a bundle (the image's roots, then the CA) to
// egress.SandboxCAFile and egress.SandboxCABundle, readable by the code. The supervisor's
// sockets are non-blocking and close-on-exec, so a connection the code stops reading never
// stalls the run, and the code never holds the listener. When the run ends the supervisor closes
// every tunnel, the worker closes the proxy, and its audit is guard.Result.Egress. Tunnel frames
// do not count against maxResultBytes: the proxy's byte and connection caps bound them. In a run
// without egress nothing listens and a frame on any channel but 0 fails the run.
//
// The worker treats every frame as untrusted: it reads at most maxResultBytes in all (the caps
// and the files plus room for headers), refuses frames over 16 MiB, unknown types, anything
// after the end frame, re-applies every limit with guard.Enforce, and reports a stream it
// cannot read as a guard.IntegrationError with CodeMayHaveStarted set.
//
// The child's environment is the request's env plus LANG=C.UTF-8 (the request may override it),
// and PATH, HOME=/tmp, TMPDIR=/tmp, PYTHONNOUSERSITE=1, PYTHONDONTWRITEBYTECODE=1 and, for
// Python, PYTHONUNBUFFERED=1 (the sandbox's, overriding the request). Nothing of the worker's
// environment reaches the container.
//
// Nothing in /work or the environment runs before the code. Python runs as
// `python3 -E -s -B -u -` with the code on its stdin: -E ignores every PYTHON* variable (the
// guard refuses them too), -s and HOME=/tmp (not /work, where input files land) keep any user
// site, .pth or usercustomize among the input files unread, and site has run before /work
// joins sys.path (as its first entry, so input modules import), so a sitecustomize there is
// never looked at. When an input file lies in a __pycache__ folder, the one place Python reads
// bytecode for a source beside it, the code's Python also gets -X pycache_prefix (and the
// code's own interpreters PYTHONPYCACHEPREFIX) under /tmp, so forged bytecode (unchecked or
// checked hash) never stands in for a module the reviewer read; without such a file the prefix
// is left off, since it would make every standard-library import compile from source (measured
// here: 0.34 s to 1.36 s for json, email, http.client, subprocess, asyncio, decimal and argparse).
// A legacy .pyc beside its .py never wins over the source. A native extension module would
// (mod.so is imported in place of mod.py): /work is noexec, so none can load under runc or a
// current gVisor, but Debian's gVisor maps it executable all the same, so Run refuses an input
// file named *.so, and the env names that make a library load native code from a file they name
// (OPENSSL_CONF, whose provider module an input file of any name can be, loaded on
// `import hashlib`; OPENSSL_MODULES, OPENSSL_ENGINES, GCONV_PATH): a guard.ToolUsageError,
// before any container exists. sh runs the script file
// as a non-interactive, non-login shell, which reads no ENV, rc or profile file.
//
// Produced files are regular files under /work, found without following links (symlinks,
// FIFOs, devices and sockets are dropped and set files_truncated), at most 8 folders deep; an
// input file whose bytes did not change is not reported, a changed one is. Names that are not
// valid UTF-8, or that guard.CheckFileName refuses, or that collide, are dropped and set
// files_truncated; so are files over the size and count limits.
//
// # A run, in steps
//
// Run is acquire (resolve the image, then take a started container from the warm pool or pick a
// uid and create one) → execute → remove. execute is attach → start (both skipped for a warm
// container, which the pool attached and started) → send → await → collect on a small type (run) that owns the one
// fact deciding retries: whether the code may have started. Every failure before the request
// was handed over in full (daemon unreachable, create, attach, start, a write that stopped short)
// is a guard.IntegrationError with CodeMayHaveStarted false, which may be retried. A request
// handed over in full counts as started, even if a deadline fired at the same moment, and is
// never retried. A missing image or network, an image with VOLUMEs or without python3, a
// runtime the daemon does not know are ConfigErrors.
//
// The backend reports what it measured (exit code, signal, timed out, memory or pids limit
// kill, output, files, duration, image ID); outcome (run.go) is the one function that maps the
// measurements to the result fields.
//
// # Time and limits
//
// The supervisor enforces the timeout: it SIGKILLs everything (kill(-1) from init reaches every
// other process, repeated until none is left) and reports the output printed before. The
// worker enforces its own deadline of timeout + Config.DeadlineSlack after the container
// started: it never waits for the container to exit by itself after that, but kills and
// force-removes it and reports a timeout with the output received so far. When the run's
// context ends the container is killed and removed at once.
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
// A run ends when the supervisor's end frame has been read (nothing may follow it), not when the
// container's teardown closes the stream. When the supervisor could read the pids and memory
// cgroup counters itself (runc), the worker does not wait for the container's exit or inspect it;
// nor under runsc when the code exited 0 by itself (gVisor's supervisor cannot read the counters,
// but the host's memory limit kills gVisor's whole sandbox, which then reports no exit at all). The forced removal of a finished
// container happens in the background (its uid is reused only after it); Close and
// WaitRemovals wait for it, and a container that could not be removed is left to the reaper.
//
// # The warm pool
//
// With Config.WarmSandboxes (the worker's --warm-sandboxes, sized to the host) the backend keeps that
// many containers created, attached and started ahead of need (pool.go), built exactly as a cold
// one (the same spec, seccomp profile, limits, a uid of their own), each with its supervisor
// blocked on reading its request: nothing of any run has entered it, and the supervisor runs
// nothing before the whole request has arrived. A run takes the oldest, sends its request and
// goes on as with a cold container; afterwards the container is removed like any other. No
// container serves two runs. The pool refills in the background, replaces a waiting container
// older than Config.WarmMaxAge (default 5 minutes) or from an image the tag no longer names,
// drops one whose output ends while it waits (it died, the daemon restarted) so that no run gets
// a container that cannot answer, backs off when it cannot start one (runs then start cold), and
// is emptied by Close. Runs that ask for the open network always start cold. It starts at most
// as many containers at once as the host has CPUs (at least 2), and a run that finds it empty
// waits for the next one it starts (the pool then starts one more for each waiting run) instead
// of creating its own beside the refill: in a burst every run gets the earliest container.
//
// Docker labels cannot change after create, so a waiting container carries LabelWarm (the pool's
// id, logged when it starts) and no run's labels; its name starts with WarmNamePrefix. The run
// that takes it renames it off the critical path, and the worker logs "run sent to a warm
// sandbox" with the container and the run once the request went out: that line ties the
// container to its run.
//
// # Sessions
//
// OpenSession (session.go) creates one container per session with the same spec as a run's
// (everything of The container above: seccomp profile, a uid of its own for the session's whole
// life, limits, no network unless the session asks for it, labels plus LabelSession), always
// cold, never from the warm pool. The supervisor gets a session request (frameSession: the input
// files, the env, the uid; no code), writes the input files into /work, answers frameReady, and
// runs no code of any kind before the first cell. Every failure of OpenSession is a
// guard.IntegrationError with CodeMayHaveStarted false (or a ConfigError: a missing image, an
// image without ctypes, secrets the worker lacks). A session holds one of
// Config.MaxSandboxes from OpenSession to Close, as a run holds one from the start of Run to its
// return, so open sessions and runs together stay within the worker's --max-sandboxes.
//
// Each cell is a frameCell (index, language, code, timeout and caps), answered on channel 0 by
// stdout and stderr frames, an exit frame (with state_reset), one file frame per file the cell
// created or changed under /work, and a frameCellEnd; then the supervisor waits for the next
// cell. The worker reads each cell into a report of its own, as untrusted as a run's (caps,
// maxResultBytes, guard.Enforce); a frame outside a cell, a garbled stream or a cell end without
// an exit report is a guard.IntegrationError with CodeMayHaveStarted set, and the sandbox is
// killed: every later cell gets a guard.SandboxLost, as does a cell after the container ended
// (Done is closed when its output ends: it exited, was killed or removed). The supervisor stays
// PID 1, non-dumpable, ignoring signals, never sharing its stdin or stdout, across all cells;
// under runsc each process of the code (the interpreter too) drops every capability as a run's.
//
//   - Python cells run in one interpreter that lives across cells, started like a run's
//     (`python3 -E -s -B -u`, the sandbox uid, HOME=/tmp) with our driver as its -c program,
//     which imports its own modules with /work off sys.path and then puts /work first. The driver reads each cell's code from a pipe, runs it in the
//     __main__ module's namespace (variables, imports and open files survive), prints a
//     SyntaxError or an uncaught exception as Python would (exit code 1; SystemExit gives its
//     code) and writes the cell's index and exit status on another pipe. The cell's output is
//     what the interpreter's stdout and stderr pipes carried while the cell was current, read
//     raw by the supervisor; what an interpreter's thread writes between cells is dropped.
//   - sh cells run in a fresh `/bin/sh` each (no ENV, rc or profile, the session's env, cwd
//     /work), whose script comes on a pipe (/proc/self/fd/3), never a file the code's uid could
//     rewrite before sh reads it.
//   - When a cell ends, every process of the code but the interpreter is SIGKILLed (and again
//     before the next cell starts), so a background process (subprocess.Popen, `sleep &`) can
//     neither print into the next cell nor outlive its own. What carries over from cell to cell
//     is /work, /tmp and /dev/shm, and the interpreter with everything in it: its globals, its
//     modules (print replaced in builtins stays replaced), open files, and threads, which keep
//     running between cells and during later ones (their output lands in whichever cell is
//     current, and what they write between cells is dropped; a process they start between cells
//     lives until the next cell starts, which kills it before its code runs; a file they change
//     between cells is reported with the next cell's files; a thread can also reach a later sh
//     cell's processes, as the same uid).
//   - Files are found as a run's (regular files, no links followed, at most 8 folders deep, the
//     cell's caps), and compared with what the supervisor saw after the previous cell (the input
//     files, for the first): only new or changed files are reported. Every regular file within
//     the cell's file cap is read and compared by the SHA-256 of its bytes (a write through a
//     shared mapping changes neither its size nor its times), as long as the walk has read less
//     than /work's tmpfs holds; past that (only sparse files get there) a file whose size and
//     times are what the supervisor saw counts as unchanged. A file over the file cap (a sparse
//     file of a tebibyte takes no room on the tmpfs) is never read, and sets files_truncated when
//     its size or times changed. So a cell's end reads at most the tmpfs's size plus one file
//     cap, whatever the cell left.
//   - The driver lives in the same process as the cells' code, so a cell can tamper with it
//     (replace builtins, close or write on its pipes, steal the next cell's code from its pipe,
//     report a false exit status, keep running after saying it ended, so that its later output
//     lands in the next cell's, or exec another program in the interpreter's process, which the
//     supervisor then keeps as the interpreter: state_reset says only that the supervisor started
//     a fresh one). That hurts only that
//     session's own later cells, which every later reviewer sees: the supervisor trusts nothing
//     of the driver but the exit status it reports, reads the output itself, and ends the cell at
//     its timeout or the interpreter's death whatever the driver says. It cannot reach the
//     supervisor, the report of a cell already ended, or another session (another container and
//     uid).
//   - A Python cell whose interpreter dies (os._exit, a signal, SIGKILL of itself, the memory
//     limit, a broken driver) gets its true result (its exit or 128+signal, its output, the
//     memory_limit outcome); the cell's timeout kills every process of the code, the
//     interpreter too, and reports timed_out. The next Python cell then starts a fresh
//     interpreter, /work kept, and its result says state_reset (guard.Result.StateReset). An
//     sh cell past its timeout kills its own processes only. Under runsc the host's memory limit
//     may end gVisor's whole sandbox instead: that cell's result is memory_limit when the daemon
//     flags the OOM kill, a SandboxLost otherwise (gVisor's exit 137 alone could as well be a
//     `docker kill` from outside), and the session is lost. A container killed or removed
//     from outside during a cell makes that cell a SandboxLost.
//
// RunCell's own deadline is the cell's timeout + Config.DeadlineSlack, as a run's: past it, or
// when RunCell's context ends, the worker kills the container (the session is lost) and reports
// the cell as timed out with the output received so far. Close kills and removes the container
// and frees its uid and slot; it may be called more than once. The backend's own Close closes
// every session still open.
//
// A session's container outlives its worker's process (issue 44): it keeps its stdin open when
// the worker's connection ends (StdinOnce off, unlike a run's, whose supervisor learns from
// stdin's end that its worker is gone), so its supervisor never ends on its own, and the daemon
// keeps its whole output, as a run's. A worker of the same deployment started later takes it
// over with AdoptSession (adopt_session.go): it reads the kept output from the container's first
// byte, never a live stream joined mid-way, into the opening's report and one per cell, and
// collects the cell the dead worker had sent (each ready and cell-end frame carries the cell's
// index and a per-session nonce, LabelSessionNonce, that the code never sees, so a log the
// daemon cut at its bound is refused; each ends in a newline, without which the daemon's log
// copier would hold it back); then it attaches and runs further cells in the same interpreter.
// Its uid (LabelUID) is reserved in the adopting backend's pool. A session with egress is
// adopted too: the pending cell's connections got no answer once its worker's proxy died (its
// tunnel frames in the kept output are dropped, and its result's egress report says Lost), and
// each further cell gets a proxy of the adopting backend's. A session whose pending cell's end
// did not come by its deadline is not taken over (the sandbox returned is lost and killed). A container no worker adopts is
// removed by the reaper once its session's workflow run has ended (Orphans), not by its
// supervisor's end.
//
// A session with egress has the supervisor listen on 127.0.0.1:Config.Egress.Port from its
// start to its end (bound before any cell, the env and CA files set once), and each cell gets an
// egress.Proxy and egress.Mux of its own, as a run does: the cell's connections are tunnelled to
// it, its caps (bytes, connections) are per cell, and its audit is that cell's Result.Egress.
// Every connection ends with its cell (the supervisor closes them, as the processes that opened
// them are killed; a connection of an interpreter's thread too); channel numbers go on across
// cells, and tunnel frames the worker sends after a cell ended are dropped, so none reaches
// another cell's connection. A connection a thread opens between cells waits in the listener's
// backlog and belongs to the next cell.
//
// # Orphans
//
// Containers left behind by a lost worker carry LabelManaged and LabelDeployment. Reap removes
// those of its own deployment (and Config.Labels) created more than a threshold ago;
// The worker runs it at start and on an interval. The threshold must exceed the longest
// run (plus WarmMaxAge with a warm pool: a run's container may have waited that long), so a live
// worker's runs are never taken; deployments that share a daemon must have different
// Config.Deployment names and never reap each other's containers. A container still waiting in a
// pool is an orphan once older than WarmMaxAge + 30 s (a live pool replaces it before), so a lost
// worker's waiting containers go sooner; workers of one deployment should share WarmMaxAge.
// A session's container (LabelSession) lives as long as its session, so no age takes it: Reap
// asks Config.SessionEnded (the worker asks Temporal whether that workflow run has ended) and
// removes it only when the answer is yes; without the hook, only once it is older than
// Config.MaxSessionLifetime plus the threshold. The hook is asked only about containers of
// Config.NamespaceID (and unlabelled ones, made before that label): the worker sets it to its
// Temporal namespace's id, unique per server, so two workers of one deployment name on different
// servers (two dev servers on one machine) do not take each other's live sessions and runs, which
// neither's server knows; a container of another id is reaped by age alone, as without the hook
// (by this worker's threshold and session lifetime, which such workers should share, so a lost
// worker's sandboxes still go in the end).
//
// # What leaks, and known limits
//
// Under runc the code sees the host's kernel version (uname), CPU model and count
// (/proc/cpuinfo) and total memory (/proc/meminfo, sysinfo), but not its boot id (masked), and
// shares the host kernel: for
// hostile code use runsc (gVisor), which has its own kernel and hides most of these, or a VM.
// noexec on /work, /tmp and /dev/shm stops executing files written there, but not code that
// loads a program from memory (memfd) or an interpreter; it is one layer, not a boundary.
//
// Under Debian's runsc (20221219) GNU ls and stat fail with "Invalid argument": that gVisor
// refuses statx with AT_NO_AUTOMOUNT, and no seccomp rule can make glibc fall back (gVisor
// returns EPERM for every seccomp errno). Busybox ls and Python's os.stat work. A current gVisor
// runs them: the tests run every run suite, and the sessions' supervisor, hostile-cell, state and
// isolation suites, under runc, Debian's runsc and gVisor's go branch of 2026-05-27 (registered as
// runsc-current; any runtime named runsc-NAME is run as gVisor); the sessions' timeout, flood,
// file, egress and reaper suites under runc and Debian's runsc.
//
// Uids are distinct per backend; two workers sharing a Docker host should be given ranges that
// do not overlap.
//
// Never give the worker's Docker socket to anything else: access to it is root on the host.
// The worker itself needs it; run the worker on a host (or VM) dedicated to sandboxes.
package docker
