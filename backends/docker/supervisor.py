# sandboxflow supervisor. The worker embeds this file and runs it as the container's PID 1:
# `python3 -I -S -c <this file>`; it is never given the model's code on a command line.
#
# Before it reads anything it makes itself unreachable for the code: it ignores every signal it
# can (as a PID namespace's init it then receives none from inside the container, SIGKILL and
# SIGSTOP included) and marks itself non-dumpable (prctl PR_SET_DUMPABLE 0, so the code, running
# as the same uid, cannot open /proc/1/mem, environ or fd/*). It then reads one request frame from
# stdin, writes the input files into /work, runs the code as its child with stdin, stdout and
# stderr on pipes, forwards the code's output to the worker as frames while it runs (up to the
# caps), ends everything when the child exits or the time is up, collects the produced files
# (regular files only, links never followed) and writes exit, file and end frames.
#
# The code never holds this process's stdout, so it cannot write a frame. The worker still treats
# every frame as untrusted: it bounds what it reads and re-applies every limit.
#
# Frames (both directions): 4-byte big-endian payload length, 1-byte type, 4-byte big-endian
# channel, payload. See protocol.go for the types.
import binascii
import os
import select
import signal
import stat
import sys
import time

WORK = b"/work"
SH_SCRIPT_DIR = "/tmp/.sandboxflow"
# When an input file lies in a __pycache__ folder (the one place Python reads bytecode for a
# source beside it), bytecode is read only under this prefix, outside /work, so it never stands
# in for a module the reviewer read. Nothing creates it. Without such a file the image's own
# bytecode keeps the standard library's imports fast (the prefix would recompile them all).
PYCACHE_PREFIX = "/tmp/.sandboxflow/pycache"
# Where the runtime's capture (CAPTURE) writes what the code shows, one file per representation,
# outside /work; the supervisor sends them as output frames and removes them (collect_outputs).
OUT_DIR = "/tmp/.sandboxflow/out"
# HOME is not /work, where input files land: no user site, rc or profile file among them counts.
FIXED_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    # For interpreters the code starts itself (the code's own runs -E): no user site, no
    # bytecode written (and, with forged bytecode among the inputs, none read) in /work.
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    # matplotlib draws without a display; the capture turns plt.show() into an output.
    "MPLBACKEND": "Agg",
}
PY_ENV = {"PYTHONUNBUFFERED": "1"}
# How the code's Python starts: -E ignores every PYTHON* variable, -s the user site, -B writes no
# bytecode, -u leaves output unbuffered (and PYCACHE_PREFIX, see above). Not -I: the code is read
# from stdin, so sys.path[0] is the working folder and input modules import; site has run by
# then, so a sitecustomize or .pth in /work is never looked at.
PY_FLAGS = ["-E", "-s", "-B", "-u"]
MAX_DEPTH = 8
READ_CHUNK = 1 << 20
DRAIN_AFTER_EXIT = 2.0
MAX_REQUEST = 1 << 30

# Frame types; keep in step with protocol.go.
F_REQUEST = 1
F_STDOUT = 3
F_STDERR = 4
F_FILE = 5
F_EXIT = 6
F_END = 7
F_ERROR = 8
F_CONFIG_ERROR = 9
F_SESSION = 10
F_CELL = 11
F_CELL_END = 12
F_READY = 13
F_OUTPUT = 14
F_TUNNEL_OPEN = 16
F_TUNNEL_DATA = 17
F_TUNNEL_CLOSE = 18
TUNNEL_CHUNK = 32 * 1024
MAX_WORKER_FRAME = 1 << 20
MAX_TUNNEL_CONNS = 256


class AsUser:
    """Under runsc the supervisor is root inside gVisor (with CAP_SETUID, CAP_SETGID, CAP_SETPCAP) and
    the code runs as the sandbox uid: this switches the effective ids to the sandbox's for work
    on the sandbox's folders and for killing its processes. Under runc (not root) it does
    nothing."""

    uid = -1

    def __enter__(self):
        if AsUser.uid > 0 and os.getuid() == 0:
            os.setegid(AsUser.uid)
            os.seteuid(AsUser.uid)

    def __exit__(self, *exc):
        if AsUser.uid > 0 and os.getuid() == 0:
            os.seteuid(0)
            os.setegid(0)


def drop_capabilities(libc):
    """Under runsc (the supervisor is root inside gVisor) empties the code's bounding, ambient and
    inheritable sets before it switches to the sandbox uid, which clears the permitted and
    effective sets: nothing the code runs can regain a capability. Fails closed."""
    if os.getuid() != 0:
        return
    import ctypes

    # linux/prctl.h and linux/capability.h
    PR_CAPBSET_READ, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, CAP_SETPCAP = 23, 24, 47, 4, 8
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL where there are none
    caps = [c for c in range(64) if libc.prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1]
    for c in sorted(caps, key=lambda c: c == CAP_SETPCAP):  # CAP_SETPCAP, needed to drop, last
        if libc.prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, %d)" % c)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    head, data = Header(0x20080522, 0), (Data * 2)()
    if libc.capget(ctypes.byref(head), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    data[0].inheritable = data[1].inheritable = 0
    if libc.capset(ctypes.byref(head), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    left = [c for c in range(64) if libc.prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1]
    if left:
        raise OSError("the bounding set still holds capabilities %s" % left)


def drop_to_sandbox_user():
    if AsUser.uid > 0 and os.getuid() == 0:
        os.setgroups([AsUser.uid])
        os.setresgid(AsUser.uid, AsUser.uid, AsUser.uid)
        os.setresuid(AsUser.uid, AsUser.uid, AsUser.uid)
    if os.getuid() == 0 or os.geteuid() == 0:
        raise OSError("refusing to run the code as root")


def write_all(fd, b):
    while b:
        n = os.write(fd, b)
        b = b[n:]


def frame(ftype, payload, channel=0):
    head = len(payload).to_bytes(4, "big") + bytes([ftype]) + channel.to_bytes(4, "big")
    write_all(1, head + payload)


def read_exact(fd, n):
    chunks = []
    while n > 0:
        b = os.read(fd, min(n, READ_CHUNK))
        if not b:
            raise ValueError("stdin ended inside a frame")
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def fail(msg, ftype=F_ERROR):
    frame(ftype, msg.encode("utf-8", "replace"))
    frame(F_END, b"{}")
    os._exit(0)


def harden():
    """Ignores every catchable signal (init then gets none from inside its namespace) and makes
    this process non-dumpable. Fails closed: without ctypes there is no prctl, and a dumpable
    supervisor could be written to by the code."""
    for s in range(1, signal.NSIG):
        if s in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
            continue
        try:
            signal.signal(s, signal.SIG_IGN)
        except (OSError, ValueError, RuntimeError):
            pass
    try:
        import ctypes
    except ImportError:
        fail("this image's python3 has no ctypes module, so the sandbox supervisor cannot make itself "
             "non-dumpable (prctl PR_SET_DUMPABLE); use an image with the full Python standard library", F_CONFIG_ERROR)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0 or libc.prctl(3, 0, 0, 0, 0) != 0:
        fail("prctl(PR_SET_DUMPABLE, 0) failed: errno %d" % ctypes.get_errno())
    return libc


def parse(s):
    """Parses the subset of JSON the worker writes: objects, arrays, strings without escapes,
    integers, true, false and null (minimal Pythons lack the json module)."""
    pos = [0]

    def value():
        i = pos[0]
        c = s[i]
        if c == "{" or c == "[":
            close = "}" if c == "{" else "]"
            out = {} if c == "{" else []
            i += 1
            if s[i] == close:
                pos[0] = i + 1
                return out
            while True:
                pos[0] = i
                if c == "{":
                    k = value()
                    if s[pos[0]] != ":":
                        raise ValueError("expected : at %d" % pos[0])
                    pos[0] += 1
                    out[k] = value()
                else:
                    out.append(value())
                i = pos[0]
                if s[i] == close:
                    pos[0] = i + 1
                    return out
                if s[i] != ",":
                    raise ValueError("expected , at %d" % i)
                i += 1
        if c == '"':
            j = s.index('"', i + 1)
            r = s[i + 1 : j]
            if "\\" in r:
                raise ValueError("escaped string at %d" % i)
            pos[0] = j + 1
            return r
        for word, v in (("true", True), ("false", False), ("null", None)):
            if s.startswith(word, i):
                pos[0] = i + len(word)
                return v
        j = i
        while j < len(s) and s[j] in "-0123456789":
            j += 1
        pos[0] = j
        return int(s[i:j])

    v = value()
    if pos[0] != len(s):
        raise ValueError("trailing data at %d" % pos[0])
    return v


def b64d(v):
    return binascii.a2b_base64(v) if v else b""


def read_frame(want, first=b""):
    """Reads one frame of a type in want from the worker (first: its bytes read already) and
    returns (type, parsed payload)."""
    head = first + read_exact(0, 9 - len(first))
    n, ftype = int.from_bytes(head[:4], "big"), head[4]
    if ftype not in want or n > MAX_REQUEST:
        raise ValueError("frame has type %d and %d bytes, want one of %s" % (ftype, n, sorted(want)))
    return ftype, parse(read_exact(0, n).decode("ascii"))


def read_request():
    """Reads the first frame: a run's request or a session's (returns its type and document)."""
    head = read_exact(0, 9)
    return read_frame((F_REQUEST, F_SESSION), head)


def json_fields(fields):
    parts = []
    for k, v in fields.items():
        if isinstance(v, bool):
            parts.append('"%s":%s' % (k, "true" if v else "false"))
        elif isinstance(v, str):  # hex digests only: no escaping needed
            parts.append('"%s":"%s"' % (k, v))
        else:
            parts.append('"%s":%d' % (k, v))
    return ("{" + ",".join(parts) + "}").encode("ascii")


def stream_hashes(fds):
    """A SHA-256 per stream, over every byte the code writes to it (kept or not), for the sandbox
    host's receipt; None when the image's Python has no hashlib (the report then carries none)."""
    try:
        import hashlib
    except ImportError:
        return None
    return {fd: hashlib.sha256() for fd in fds}


def hex_of(hashes, fd):
    return hashes[fd].hexdigest() if hashes is not None else ""


def others_alive():
    try:
        return [p for p in os.listdir("/proc") if p.isdigit() and p != "1"]
    except OSError:
        return []


def reap(child):
    """Reaps every exited process (this is init); returns the child's wait status or None."""
    status = None
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == child:
            status = st
        if pid == INTERP[0]:
            EXITED[pid] = st


def kill_everything():
    """SIGKILLs every other process of the container: kill(-1) from init reaches all of them.
    Repeated, because a process forked while the signal goes round can escape one round."""
    for _ in range(50):
        try:
            with AsUser():
                os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        reap(-2)
        if not others_alive():
            return
        time.sleep(0.01)


def cgroup_counter(paths, key):
    for p in paths:
        try:
            with open(p) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == key:
                        return int(parts[1])
        except (OSError, ValueError):
            continue
    return -1


PIDS_EVENTS = ("/sys/fs/cgroup/pids/pids.events", "/sys/fs/cgroup/pids.events")
MEMORY_EVENTS = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")


WRITABLE = ("/work", "/tmp", "/dev/shm")


def files_bytes():
    """What the sandbox's writable folders hold, as their filesystems count it (used blocks, each
    filesystem once), or -1 when none can be read."""
    total, seen = -1, set()
    for path in WRITABLE:
        try:
            dev = os.stat(path).st_dev
            st = os.statvfs(path)
        except OSError:
            continue
        if dev not in seen:
            seen.add(dev)
            total = max(total, 0) + (st.f_blocks - st.f_bfree) * st.f_frsize
    return total


HOLD_AFTER_END = 10.0


def hold_for_worker():
    """Keeps PID 1, and so the container and its cgroup, alive after a run's end frame until the
    worker ends stdin (at most HOLD_AFTER_END seconds): the worker reads the cgroup's counters for
    the run's usage once the report is in. Whatever else arrives on stdin is dropped."""
    deadline = time.monotonic() + HOLD_AFTER_END
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            ready, _, _ = select.select([0], [], [], left)
            if ready and not os.read(0, READ_CHUNK):
                return
        except BlockingIOError:
            continue
        except OSError:
            return


def cgroup_counters():
    """The cgroup's counts of pids-limit hits and memory kills, each -1 when unknown."""
    return (cgroup_counter(PIDS_EVENTS, "max"), cgroup_counter(MEMORY_EVENTS, "oom_kill"))


def exit_of(status):
    """The exit code and signal of a wait status: 128 + the signal for a killed process."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return 128 + sig, sig
    return os.WEXITSTATUS(status), 0


def exit_fields(exit_code, sig, timed_out, duration_ms, streams, before, cancelled=None, state_reset=None, threads_alive=None, reported_by=None):
    """The exit frame of a run or a cell: its exit, its time, its streams as the code wrote them,
    and what the cgroup counted since before (cgroup_counters). A cell's also says whether it was
    cancelled and whether it ran in a fresh interpreter (cancelled and state_reset, not None)."""
    pids_after, oom_after = cgroup_counters()
    fields = {"exit_code": exit_code, "signal": sig, "timed_out": timed_out}
    if cancelled is not None:
        fields["cancelled"] = cancelled
    fields.update({
        "duration_ms": duration_ms,
        "stdout_bytes": streams.seen[streams.out_r],
        "stderr_bytes": streams.seen[streams.err_r],
        "stdout_sha256": hex_of(streams.hashes, streams.out_r),
        "stderr_sha256": hex_of(streams.hashes, streams.err_r),
        "pids_limit_hit": pids_after > max(before[0], 0),
        "oom_kills": max(oom_after - max(before[1], 0), 0),
        "limits_known": min(before[0], before[1], pids_after, oom_after) >= 0,
        "files_bytes": files_bytes(),
    })
    if state_reset is not None:
        fields["state_reset"] = state_reset
    if threads_alive is not None:
        fields["threads_alive"] = threads_alive
    if reported_by is not None:
        fields["exit_reported_by"] = reported_by
    return fields


def threads_besides_driver(pid):
    """How many threads besides its first (the cell driver's) the interpreter pid runs, counted
    from outside it (/proc/PID/task), or None when it cannot be read."""
    try:
        return max(len(os.listdir("/proc/%d/task" % pid)) - 1, 0)
    except OSError:
        return None


def write_inputs(files):
    for f in files:
        name = b64d(f["name"])
        content = b64d(f.get("content"))
        path = os.path.join(WORK, name)
        parent = os.path.dirname(path)
        if parent != WORK:
            os.makedirs(parent, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, content)
        finally:
            os.close(fd)


def read_regular(dir_fd, name, max_file):
    """The bytes of a regular file, read without following a link, up to max_file + 1 (more than
    max_file: it holds more); None when it is not a regular file."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = b""
        while len(data) <= max_file:
            b = os.read(fd, min(READ_CHUNK, max_file + 1 - len(data)))
            if not b:
                break
            data += b
        return data
    finally:
        os.close(fd)


def walk_work(visit, deep):
    """Walks /work in name order without following links, entering folders at most MAX_DEPTH
    deep: calls visit(dir_fd, name, rel, st) for each entry that is not a folder and deep(rel, st)
    for each folder too deep to enter; each returns whether it left something out. Returns None
    when /work cannot be opened, else whether anything was left out (by visit or deep, or an
    entry that could not be listed, stat'ed or opened)."""
    state = {"truncated": False}

    def walk(dir_fd, prefix, depth):
        try:
            entries = sorted(os.listdir(dir_fd))
        except OSError:
            state["truncated"] = True
            return
        for name in entries:
            name = os.fsencode(name)
            rel = prefix + name
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                state["truncated"] = True
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth >= MAX_DEPTH:
                    if deep(rel, st):
                        state["truncated"] = True
                    continue
                try:
                    sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
                except OSError:
                    state["truncated"] = True
                    continue
                try:
                    walk(sub, rel + b"/", depth + 1)
                finally:
                    os.close(sub)
                continue
            if visit(dir_fd, name, rel, st):
                state["truncated"] = True

    try:
        root = os.open(WORK, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        walk(root, b"", 1)
    finally:
        os.close(root)
    return state["truncated"]


def collect(inputs, max_files, max_file, max_total):
    """Sends a file frame for each produced file and returns whether any was left out. Walks
    /work without following links; keeps regular files only; leaves out input files whose bytes
    did not change; leaves out anything over the limits."""
    state = {"total": 0, "count": 0}

    def visit(dir_fd, name, rel, st):
        if not stat.S_ISREG(st.st_mode) or (st.st_size > max_file and rel not in inputs):
            return True
        if st.st_size > max_file:
            return False
        try:
            data = read_regular(dir_fd, name, max_file)
        except OSError:
            data = None
        if data is None:
            return True
        if inputs.get(rel) == data:
            return False
        if len(data) > max_file or state["count"] >= max_files or state["total"] + len(data) > max_total:
            return True
        state["total"] += len(data)
        state["count"] += 1
        frame(F_FILE, len(rel).to_bytes(2, "big") + rel + data)
        return False

    truncated = walk_work(visit, lambda rel, st: True)
    return True if truncated is None else truncated


# What the runtime adds to the code's Python interpreter (docs/outputs.md), before the code, for
# runs and cells alike: display() as a builtin; plt.show() and figures left open become PNG
# outputs; a cell's last expression becomes an output (DRIVER). Each shown thing is written to
# OUT_DIR as one file per representation, richest first: NNNNNN-KK-SOURCE.EXT. It runs in the
# code's own process, so the code can change or forge any of it: outputs are the code's word,
# like its stdout. It imports nothing from /work (safe_import takes the working folder off the
# path) and nothing at all until the code shows something.
# Where the sandbox sees its lock's environment; keep in step with PackagesMount (config.go).
PACKAGES = "/opt/sandboxflow/packages"
CAPTURE = r"""
def _sandboxflow_capture(outdir, at_exit):
    import sys, os, builtins
    # The request's packages, mounted read-only at PACKAGES (empty when its lock names none): on
    # the path after the standard library and before the image's site folders, so the lock's
    # version wins over a Debian-packaged one; never through site.addsitedir (a .pth file there is
    # never run) and after start-up (a sitecustomize there is never imported on its own).
    if os.path.isdir($PACKAGES$) and os.listdir($PACKAGES$):
        at = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(at[0] if at else len(sys.path), $PACKAGES$)
    seq = [0]
    max_rows, max_cols, max_text = 200, 50, 64 << 10

    def safe_import(name):
        saved = sys.path[:]
        sys.path[:] = [p for p in saved if p not in ("", ".", "/work")]
        try:
            __import__(name)
            return sys.modules[name]
        finally:
            sys.path[:] = saved

    def emit(source, reprs):
        if not reprs:
            return
        seq[0] += 1
        for k, (ext, data) in enumerate(reprs):
            try:
                fd = os.open("%s/%06d-%02d-%s.%s" % (outdir, seq[0], k, source, ext),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except OSError:
                return
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)

    def figure(fig):
        # PNG; SVG first when the code asked matplotlib for SVG (rcParams["savefig.format"]).
        mpl = sys.modules.get("matplotlib")
        formats = ["png"]
        if mpl is not None and str(mpl.rcParams.get("savefig.format")) == "svg":
            formats.insert(0, "svg")
        out = []
        for fmt in formats:
            buf = safe_import("io").BytesIO()
            fig.savefig(buf, format=fmt)
            out.append((fmt, buf.getvalue()))
        return out

    def show_figures(*args, **kwargs):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in plt.get_fignums():
            try:
                emit("figure", figure(plt.figure(num)))
            except Exception:
                pass
        plt.close("all")

    def table(obj):
        pd = sys.modules.get("pandas")
        if pd is None or not isinstance(obj, (pd.DataFrame, pd.Series)):
            return None
        df = obj.to_frame() if isinstance(obj, pd.Series) else obj
        part = df.iloc[:max_rows, :max_cols]
        doc = {"columns": [str(c) for c in part.columns], "index": [str(i) for i in part.index],
               "rows": [[str(v) for v in row] for row in part.itertuples(index=False, name=None)],
               "truncated": bool(df.shape[0] > max_rows or df.shape[1] > max_cols)}
        return safe_import("json").dumps(doc).encode("utf-8")

    def reprs(obj):
        if hasattr(obj, "savefig") and type(obj).__module__.startswith("matplotlib"):
            return figure(obj)
        out = []
        t = table(obj)
        if t is not None:
            out.append(("table", t))
        methods = [("_repr_png_", "png"), ("_repr_jpeg_", "jpg"), ("_repr_svg_", "svg")]
        if t is None:
            methods.append(("_repr_html_", "html"))
        for name, ext in methods:
            f = getattr(obj, name, None)
            if not callable(f):
                continue
            try:
                v = f()
            except Exception:
                continue
            if isinstance(v, str):
                v = v.encode("utf-8", "replace")
            if isinstance(v, (bytes, bytearray)):
                out.append((ext, bytes(v)))
        out.append(("txt", repr(obj).encode("utf-8", "replace")[:max_text]))
        return out

    def display(*objs):
        for obj in objs:
            emit("display", reprs(obj))

    def value(v):
        if v is not None:
            emit("value", reprs(v))

    def reset():
        seq[0] = 0

    builtins.display = display
    path_finder = [f for f in sys.meta_path if getattr(f, "__name__", "") == "PathFinder"]

    class ShowHook:
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if name != "matplotlib.pyplot" or not path_finder:
                return None
            spec = path_finder[0].find_spec(name, path, target)
            load = getattr(getattr(spec, "loader", None), "exec_module", None)
            if load is None:
                return spec

            def exec_module(module):
                load(module)
                module.show = show_figures
                if at_exit:
                    # After pyplot's own exit handler, which closes every figure: exit handlers
                    # run last registered first.
                    __import__("atexit").register(show_figures)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, ShowHook)
    return show_figures, value, reset
""".replace("$PACKAGES$", repr(PACKAGES))

# What a run's Python runs first (RUN_BOOT), the code following it on stdin as with `python3 -`:
# the driver takes the working folder off sys.path while it installs CAPTURE, reads
# the code, puts it back, and runs the code as __main__ named <stdin>. An exception's traceback
# starts at the code's frame; figures left open are shown at exit.
RUN_DRIVER = CAPTURE + r"""
def _sandboxflow_run(g, capture):
    import sys
    while sys.path and sys.path[0] in ("", "."):
        sys.path.pop(0)
    capture($OUT_DIR$, True)
    code = sys.stdin.buffer.read()
    sys.argv[0] = "-"
    g["__file__"] = "<stdin>"
    sys.path.insert(0, "")
    try:
        exec(compile(code, "<stdin>", "exec"), g)
    except SystemExit:
        raise
    except BaseException as e:
        tb = e.__traceback__
        tb = tb.tb_next if tb is not None else None
        sys.excepthook(type(e), e.with_traceback(tb), tb)  # it prints the exception's own
        raise SystemExit(1)


(lambda f, c: (globals().pop("_sandboxflow_run"), globals().pop("_sandboxflow_capture"), f(globals(), c)))(_sandboxflow_run, _sandboxflow_capture)
""".replace("$OUT_DIR$", repr(OUT_DIR))


# A run's Python starts with `-c RUN_BOOT N`: it reads RUN_DRIVER, compiled by the supervisor and
# marshalled, from the first N bytes of its stdin and runs it; the code follows. The supervisor
# compiles it while a warm container waits for its request (preload), so a run pays neither for
# compiling the capture nor for any name the boot line would leave in __main__.
RUN_BOOT = "exec(__import__('marshal').loads(__import__('sys').stdin.buffer.read(int(__import__('sys').argv.pop()))))"
RUN_DRIVER_CODE = []


def run_driver():
    """RUN_DRIVER compiled and marshalled, once."""
    if not RUN_DRIVER_CODE:
        import marshal

        RUN_DRIVER_CODE.append(marshal.dumps(compile(RUN_DRIVER, "<sandboxflow run driver>", "exec")))
    return RUN_DRIVER_CODE[0]


OUTPUT_MIMES = {"png": "image/png", "jpg": "image/jpeg", "svg": "image/svg+xml", "html": "text/html",
                "txt": "text/plain", "json": "application/json", "table": "application/vnd.sandboxflow.table+json"}
OUTPUT_SOURCES = ("figure", "display", "value")


def output_entry(name):
    """The (index, source, MIME type) of an output file named NNNNNN-KK-SOURCE.EXT, as CAPTURE
    names them, or None."""
    head, _, ext = name.partition(".")
    parts = head.split("-")
    if (not name.isascii() or len(parts) != 3 or len(parts[0]) != 6 or len(parts[1]) != 2 or not (parts[0] + parts[1]).isdigit()
            or parts[2] not in OUTPUT_SOURCES or ext not in OUTPUT_MIMES):
        return None
    return int(parts[0]), parts[2], OUTPUT_MIMES[ext]


def make_out_dir():
    """Makes OUT_DIR, the code's uid's, empty (call as the sandbox uid)."""
    os.makedirs(OUT_DIR, mode=0o700, exist_ok=True)
    clear_out_dir()


def clear_out_dir():
    """Removes what OUT_DIR holds (call as the sandbox uid)."""
    try:
        dir_fd = os.open(OUT_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        for name in os.listdir(dir_fd):
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError:
                pass
    finally:
        os.close(dir_fd)


def collect_outputs(max_outputs, max_output, max_total):
    """Sends an output frame for each output in OUT_DIR, in name order (the order shown), and
    removes them; returns whether any was dropped (a name CAPTURE does not write, not a regular
    file, past max_outputs) or left out (over max_output or max_total: its frame says its size and
    carries no data). Call as the sandbox uid: the code may have put anything there, read it
    as it could."""
    try:
        dir_fd = os.open(OUT_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    truncated, count, total = False, 0, 0
    try:
        for name in sorted(os.listdir(dir_fd)):
            entry = output_entry(name)
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if entry is None or count >= max_outputs or not stat.S_ISREG(st.st_mode):
                    truncated = True
                    continue
                data, size = None, st.st_size
                if size <= max_output and total + size <= max_total:
                    data = read_regular(dir_fd, name, max_output)
                    if data is not None and (len(data) > max_output or total + len(data) > max_total):
                        size, data = len(data), None
                left_out = data is None
                truncated = truncated or left_out
                data = data or b""
                size = size if left_out else len(data)
                total += len(data)
                count += 1
                head = json_fields({"index": entry[0], "source": entry[1], "mime": entry[2], "size": size, "left_out": left_out})
                frame(F_OUTPUT, len(head).to_bytes(2, "big") + head + data)
            except OSError:
                truncated = True
            finally:
                try:
                    os.unlink(name, dir_fd=dir_fd)
                except OSError:
                    pass
    finally:
        os.close(dir_fd)
    return truncated


def forged_bytecode_possible(req):
    """Whether an input file lies in a __pycache__ folder."""
    return any(b"__pycache__" in b64d(f["name"]).split(b"/") for f in req.get("files") or [])


def child_argv(req, env):
    language = req["language"]
    code = b64d(req["code"])
    flags = PY_FLAGS
    if forged_bytecode_possible(req):
        env["PYTHONPYCACHEPREFIX"] = PYCACHE_PREFIX
        flags = flags + ["-X", "pycache_prefix=" + PYCACHE_PREFIX]
    if language == "python":
        env.update(PY_ENV)
        if req.get("no_capture"):  # the benchmark's reference: the code's Python as before outputs
            return [sys.executable or "/usr/bin/python3"] + flags + ["-"], code
        driver = run_driver()
        return [sys.executable or "/usr/bin/python3"] + flags + ["-c", RUN_BOOT, str(len(driver))], driver + code
    if language == "sh":
        os.makedirs(SH_SCRIPT_DIR, mode=0o700, exist_ok=True)
        script = os.path.join(SH_SCRIPT_DIR, "main.sh")
        fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o400)
        try:
            write_all(fd, code)
        finally:
            os.close(fd)
        return ["/bin/sh", script], b""
    raise ValueError("unknown language %r" % language)


def quiet_wakeup_fd(fd):
    """Makes fd the signal wake-up descriptor, silent when its pipe is full: a full pipe wakes a
    poll as well as one byte does, and Python's default writes a traceback to stderr for every
    signal past a full pipe, a stream that the supervisor, dockerd and the worker would all pay
    for. Defensive: between a session's cells no poll drains the pipe, but the code cannot kill(2)
    PID 1 (another uid), and the SIGCHLDs it can cause (its orphans' exits) stop at the pids limit
    until the next cell reaps them."""
    try:
        signal.set_wakeup_fd(fd, warn_on_full_buffer=False)
    except TypeError:  # Python before 3.7 has no such argument, and no such warning
        signal.set_wakeup_fd(fd)


def spawn(libc, argv, env, pipes, extra=()):
    """Forks the code's process: stdin, stdout and stderr on pipes, and each (fd, target) of extra
    as descriptor target (a session's control pipes); every other descriptor closes on exec."""
    in_r, out_w, err_w = pipes
    pid = os.fork()
    if pid != 0:
        return pid
    try:
        os.setsid()
        for s in range(1, signal.NSIG):
            if s not in (signal.SIGKILL, signal.SIGSTOP):
                try:
                    signal.signal(s, signal.SIG_DFL)
                except (OSError, ValueError, RuntimeError):
                    pass
        if extra:
            import fcntl

            # Out of the way first, so that no target overwrites another's source.
            moved = [(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 256), target) for fd, target in extra]
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd, target in moved if extra else ():
            os.dup2(fd, target)
        drop_capabilities(libc)
        drop_to_sandbox_user()
        os.chdir(WORK)
        # The child is the code's: make it dumpable again so it may set its own oom_score_adj.
        libc.prctl(4, 1, 0, 0, 0)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
        os.execve(argv[0], argv, env)
    except BaseException as e:
        try:
            os.write(2, ("sandboxflow: could not start %s: %s\n" % (argv[0], e)).encode())
        except BaseException:
            pass
    os._exit(127)


def drain_wakeups(fd):
    """Empties a non-blocking wake-up pipe."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def feed_some(fd, data):
    """Writes what a non-blocking pipe takes of data, at most 64 KiB, and returns the rest: all
    of data when the pipe is full, nothing once it is broken."""
    try:
        n = os.write(fd, data[:65536])
    except BlockingIOError:
        return data
    except OSError:
        return b""
    return data[n:]


def set_pipe_size(fd):
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), READ_CHUNK)
    except (ImportError, OSError):
        pass


class Output:
    """The code's output, a run's or one cell's: forwards what it writes on out_r and err_r as
    frames, up to the caps, counting and hashing everything seen."""

    def __init__(self, out_r, err_r, caps):
        self.kind = {out_r: F_STDOUT, err_r: F_STDERR}
        self.room = {out_r: caps[0], err_r: caps[1]}
        self.seen = {out_r: 0, err_r: 0}
        self.hashes = stream_hashes((out_r, err_r))
        self.out_r, self.err_r = out_r, err_r
        self.open = {out_r, err_r}

    def forward(self, fd):
        b = os.read(fd, READ_CHUNK)
        if not b:
            self.open.discard(fd)
            return False
        self.seen[fd] += len(b)
        if self.hashes is not None:
            self.hashes[fd].update(b)
        keep = b[: max(self.room[fd], 0)]
        self.room[fd] -= len(keep)
        if keep:
            frame(self.kind[fd], keep)
        return True

    def drain(self, until_eof, limit):
        """Reads what is left: until both pipes end (until_eof, every writer is gone) or, for a live
        interpreter, until nothing more is waiting; at most limit seconds."""
        end = time.monotonic() + limit
        poller = select.poll()
        for fd in self.open:
            poller.register(fd, select.POLLIN)
        while self.open:
            wait = end - time.monotonic()
            if wait <= 0:
                return
            ready = poller.poll(max(1, int(wait * 1000)) if until_eof else 0)
            if not ready:
                if until_eof:
                    continue
                return
            for fd, _ in ready:
                if not self.forward(fd):
                    poller.unregister(fd)


class Streams(Output):
    """The code's stdin, stdout and stderr pipes, seen from the supervisor."""

    def __init__(self, caps, stdin_data, wake_r):
        self.out_r, self.out_w = os.pipe2(os.O_CLOEXEC)
        self.err_r, self.err_w = os.pipe2(os.O_CLOEXEC)
        self.in_r, self.in_w = os.pipe2(os.O_CLOEXEC)
        for fd in (self.out_r, self.err_r):
            set_pipe_size(fd)
        Output.__init__(self, self.out_r, self.err_r, caps)
        self.stdin_data = stdin_data
        self.wake_r = wake_r
        self.poller = select.poll()
        self.poller.register(self.out_r, select.POLLIN)
        self.poller.register(self.err_r, select.POLLIN)
        self.poller.register(wake_r, select.POLLIN)
        self.tunnel = None

    def child_ends(self):
        return self.in_r, self.out_w, self.err_w

    def started(self):
        for fd in self.child_ends():
            os.close(fd)
        if self.stdin_data:
            os.set_blocking(self.in_w, False)
            self.poller.register(self.in_w, select.POLLOUT)
        else:
            os.close(self.in_w)
            self.in_w = -1

    def pump(self, wait):
        for fd, ev in self.poller.poll(max(1, int(wait * 1000) + 1)):
            if self.tunnel is not None and self.tunnel.owns(fd):
                self.tunnel.event(fd, ev)
            elif fd == self.wake_r:
                drain_wakeups(self.wake_r)
            elif fd == self.in_w:
                self.feed()
            else:
                self.forward(fd)

    def feed(self):
        self.stdin_data = feed_some(self.in_w, self.stdin_data)
        if not self.stdin_data:
            self.poller.unregister(self.in_w)
            os.close(self.in_w)
            self.in_w = -1

    def forward(self, fd):
        if not Output.forward(self, fd):
            self.poller.unregister(fd)

    def close(self):
        if self.in_w >= 0:
            os.close(self.in_w)


class Conn:
    """One connection the code opened to the egress listener, relayed on channel cid."""

    def __init__(self, sock, cid):
        self.sock, self.cid = sock, cid
        self.out = bytearray()
        self.reading = True  # the code may still send; no close frame sent yet
        self.peer_closed = False  # the worker sent its close frame
        self.registered = False

    def mask(self):
        m = select.POLLIN if self.reading else 0
        if self.out:
            m |= select.POLLOUT
        return m


class Tunnel:
    """The egress relay: listens on 127.0.0.1:port inside the container (no other network
    exists), and relays each accepted connection to the worker's filtering proxy as tunnel frames
    on stdout, on a fresh channel; the worker's frames arrive on stdin. Everything is
    non-blocking, so a connection the code stops reading never stalls the run."""

    def __init__(self, port):
        import socket

        self.socket = socket
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", port))
        self.lsock.listen(64)
        self.lsock.setblocking(False)
        self.conns = {}
        self.by_fd = {}
        self.next_id = 1
        self.inbuf = bytearray()
        self.stdin_open = True
        self.poller = None
        self.paused = False
        self.gone = False

    def register(self, poller):
        self.poller = poller
        poller.register(self.lsock.fileno(), select.POLLIN)
        os.set_blocking(0, False)
        poller.register(0, select.POLLIN)

    def owns(self, fd):
        return fd == 0 or fd == self.lsock.fileno() or fd in self.by_fd

    def event(self, fd, ev):
        if fd == self.lsock.fileno():
            self.accept()
        elif fd == 0:
            self.from_worker()
        else:
            c = self.by_fd[fd]
            if ev & (select.POLLOUT | select.POLLERR | select.POLLHUP) and c.out:
                self.flush(c)
            if c.reading and ev & (select.POLLIN | select.POLLERR | select.POLLHUP):
                self.from_code(c)
            self.update(c)

    def accept(self):
        while True:
            if len(self.conns) >= MAX_TUNNEL_CONNS:
                self.pause(True)
                return
            try:
                sock, _ = self.lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                # Out of descriptors: stop accepting until a connection ends, rather than spin.
                self.pause(True)
                return
            sock.setblocking(False)
            c = Conn(sock, self.next_id)
            self.next_id += 1
            self.conns[c.cid] = c
            self.by_fd[sock.fileno()] = c
            frame(F_TUNNEL_OPEN, b"", c.cid)
            self.update(c)

    def from_code(self, c):
        try:
            b = c.sock.recv(TUNNEL_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            b = b""
        if b:
            frame(F_TUNNEL_DATA, b, c.cid)
            return
        c.reading = False
        frame(F_TUNNEL_CLOSE, b"", c.cid)

    def flush(self, c):
        try:
            n = c.sock.send(c.out)
            del c.out[:n]
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            c.out = bytearray()
            c.peer_closed = True
            if c.reading:
                c.reading = False
                frame(F_TUNNEL_CLOSE, b"", c.cid)
            return
        if not c.out and c.peer_closed:
            self.shut_write(c)

    def shut_write(self, c):
        try:
            c.sock.shutdown(self.socket.SHUT_WR)
        except OSError:
            pass

    def update(self, c):
        m = c.mask()
        if not c.reading and c.peer_closed and not c.out:
            self.drop(c)
        elif m and c.registered:
            self.poller.modify(c.sock.fileno(), m)
        elif m:
            self.poller.register(c.sock.fileno(), m)
            c.registered = True
        elif c.registered:
            self.poller.unregister(c.sock.fileno())
            c.registered = False

    def drop(self, c):
        if c.registered:
            self.poller.unregister(c.sock.fileno())
        self.by_fd.pop(c.sock.fileno(), None)
        self.conns.pop(c.cid, None)
        c.sock.close()
        self.pause(False)

    def pause(self, on):
        """Stops (or resumes) accepting: the listener leaves (or rejoins) the poll set, so
        pending connections wait in the backlog instead of waking the loop."""
        if on == self.paused or self.gone:
            return
        self.paused = on
        if on:
            self.poller.unregister(self.lsock.fileno())
        else:
            self.poller.register(self.lsock.fileno(), select.POLLIN)

    def from_worker(self):
        try:
            b = os.read(0, READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            b = b""
        if not b:
            self.poller.unregister(0)
            self.stdin_open = False
            self.worker_gone()
            return
        self.inbuf += b
        while len(self.inbuf) >= 9:
            n = int.from_bytes(self.inbuf[:4], "big")
            if n > MAX_WORKER_FRAME:
                raise ValueError("worker frame of %d bytes" % n)
            if len(self.inbuf) < 9 + n:
                return
            ftype, cid = self.inbuf[4], int.from_bytes(self.inbuf[5:9], "big")
            payload = bytes(self.inbuf[9 : 9 + n])
            del self.inbuf[: 9 + n]
            c = self.conns.get(cid)
            if c is None or c.peer_closed:
                continue
            if ftype == F_TUNNEL_DATA:
                c.out += payload
                self.flush(c)
            elif ftype == F_TUNNEL_CLOSE:
                c.peer_closed = True
                if not c.out:
                    self.shut_write(c)
            self.update(c)

    def worker_gone(self):
        """The worker's end of stdin closed while the tunnel was up: the worker died (it closes
        stdin only once the run is over), and nothing will answer the code's connections. They
        end now, and new ones are refused, rather than hang to the run's timeout."""
        self.gone = True
        for c in list(self.conns.values()):
            self.drop(c)
        if not self.paused:
            self.poller.unregister(self.lsock.fileno())
        self.lsock.close()

    def end_cell(self):
        """Closes every connection of a session's cell without sending frames (the worker ends
        its side with the cell); the listener stays for the next cell, and channel numbers go
        on from where they were, so a late frame of this cell's never reaches the next's."""
        for c in list(self.conns.values()):
            c.sock.close()
        self.conns, self.by_fd = {}, {}
        self.paused = False
        self.poller = None

    def close(self):
        """Closes every connection and the listener without sending frames; the worker ends its
        side when the run ends."""
        for c in list(self.conns.values()):
            c.sock.close()
        self.conns, self.by_fd = {}, {}
        self.lsock.close()


def write_egress_ca(req):
    """Writes the egress CA (and the image's roots followed by it) where the code's environment
    says, readable by the code: the CA certificate is public, its key stays in the worker."""
    ca = b64d(req.get("egress_ca"))
    if not ca:
        return
    bundle = b""
    for name in req.get("egress_image_bundles") or []:
        try:
            with open(b64d(name), "rb") as f:
                bundle = f.read()
            break
        except OSError:
            continue
    if bundle and not bundle.endswith(b"\n"):
        bundle += b"\n"
    with AsUser():
        for path, data in ((b64d(req["egress_ca_file"]), ca), (b64d(req["egress_ca_bundle"]), bundle + ca)):
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                write_all(fd, data)
            finally:
                os.close(fd)


def run(libc, req):
    AsUser.uid = req["uid"]
    env = {"LANG": "C.UTF-8"}
    for e in req.get("env") or []:
        env[b64d(e["name"]).decode("utf-8")] = b64d(e.get("value")).decode("utf-8")
    env.update(FIXED_ENV)
    with AsUser():
        write_inputs(req.get("files") or [])
        if not req.get("no_capture"):
            make_out_dir()
        argv, stdin_data = child_argv(req, env)
    tunnel = None
    if req.get("egress_port"):
        write_egress_ca(req)
        # Bound by the supervisor before the code starts (and, under runsc, as root inside
        # gVisor), so the code can neither take the port nor reach the socket.
        tunnel = Tunnel(req["egress_port"])
    timeout = req["timeout_ms"] / 1000.0

    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    quiet_wakeup_fd(wake_w)
    streams = Streams([req["max_stdout_bytes"], req["max_stderr_bytes"]], stdin_data, wake_r)
    if tunnel is not None:
        streams.tunnel = tunnel
        tunnel.register(streams.poller)
    counters = cgroup_counters()
    started = time.monotonic()
    pid = spawn(libc, argv, env, streams.child_ends())
    streams.started()
    deadline, status, ended, timed_out = started + timeout, None, None, False
    while True:
        if status is None:
            status = reap(pid)
            if status is not None:
                ended = time.monotonic()
                kill_everything()
        now = time.monotonic()
        if status is None and now >= deadline:
            timed_out, ended = True, now
            kill_everything()
            status = 0
        if status is not None and (not streams.open or now >= ended + DRAIN_AFTER_EXIT):
            break
        streams.pump((ended + DRAIN_AFTER_EXIT - now) if status is not None else min(deadline - now, 0.5))
    signal.set_wakeup_fd(-1)
    streams.close()
    kill_everything()
    if tunnel is not None:
        tunnel.close()
    return status, timed_out, int((ended - started) * 1000), streams, counters


# Sessions (issue 28). The first frame is a session request (settings, no code): the supervisor
# writes the input files, answers a ready frame and then runs one cell per cell frame, each
# answered by output frames, an exit frame, file frames (what that cell created or changed under
# /work) and an end-of-cell frame. It stays PID 1, out of the code's reach, across cells.
#
# Python cells run in one interpreter that lives across cells: `python3 -E -s -B -u -c DRIVER`,
# as the sandbox uid, like a run's Python. DRIVER reads each cell from descriptor 3 (4-byte index,
# 4-byte code length, 4-byte path length, the code, the newest cell package folder), runs it in __main__'s namespace and writes the cell's index and exit
# status on descriptor 4. It lives in the same process as the cells' code, so a cell can tamper
# with it: the supervisor trusts nothing of it but that status, reads the interpreter's output raw
# from its pipes, and ends the cell at its timeout or the interpreter's death whatever the driver
# says. A cell whose interpreter dies (its timeout, os._exit, a signal, a memory kill) leaves the
# next Python cell a fresh interpreter, whose exit frame says state_reset.
DRIVER = CAPTURE + r'''
def _sandboxflow_cells(g, capture):
    import sys
    # -c put the working folder ("") first on sys.path. The driver's own modules, and what
    # formatting a traceback imports on first use, come from the standard library with /work off
    # the path: a traceback.py, linecache.py or sourceless textwrap.pyc there (an input file, or
    # one an earlier cell wrote) never runs before a cell, nor after an interpreter reset.
    while sys.path and sys.path[0] in ("", ".", "/work"):
        sys.path.pop(0)
    import os, traceback, _ast
    try:
        raise ValueError
    except ValueError as e:
        traceback.format_exception(type(e), e, e.__traceback__)
    show_figures, show_value, reset = capture($OUT_DIR$, False)
    sys.path.insert(0, "/work")
    ctl, done = os.dup(3), os.dup(4)  # close-on-exec: no process the code starts holds them
    os.close(3)
    os.close(4)

    def read_exact(n):
        b = b""
        while len(b) < n:
            c = os.read(ctl, n - len(b))
            if not c:
                os._exit(0)
            b += c
        return b

    while True:
        head = read_exact(12)
        index, n, m = (int.from_bytes(head[i : i + 4], "big") for i in (0, 4, 8))
        code = read_exact(n)
        # The newest package folder a cell brought (a subfolder of PACKAGES holding the whole
        # set so far), put before the earlier packages entry: it only adds modules, so what
        # was imported from the earlier one stays valid.
        pkgs = read_exact(m).decode("ascii") if m else ""
        if pkgs and pkgs not in sys.path:
            at = [i for i, p in enumerate(sys.path) if p == $PACKAGES$ or p.startswith($PACKAGES$ + "/")]
            if not at:
                at = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
            sys.path.insert(at[0] if at else len(sys.path), pkgs)
            __import__("importlib").invalidate_caches()
        status = 0
        reset()
        try:
            # As a notebook does, the value of a last expression statement is shown.
            name = "<cell %d>" % index
            tree = compile(code, name, "exec", _ast.PyCF_ONLY_AST)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], _ast.Expr) else None
            exec(compile(tree, name, "exec"), g)
            if last is not None:
                show_value(eval(compile(_ast.Expression(body=last.value), name, "eval"), g))
        except SystemExit as e:
            if e.code is None:
                status = 0
            elif isinstance(e.code, int):
                status = e.code & 0xFF
            else:
                try:
                    print(e.code, file=sys.stderr)
                except BaseException:
                    pass
                status = 1
        except BaseException as e:
            try:
                tb = e.__traceback__
                traceback.print_exception(type(e), e, tb.tb_next if tb is not None else None)
            except BaseException:
                pass
            status = 1
        try:
            show_figures()
        except BaseException:
            pass
        for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                f.flush()
            except BaseException:
                pass
        os.write(done, index.to_bytes(4, "big") + status.to_bytes(4, "big"))


(lambda f, c: (globals().pop("_sandboxflow_cells"), globals().pop("_sandboxflow_capture"), f(globals(), c)))(_sandboxflow_cells, _sandboxflow_capture)
'''.replace("$OUT_DIR$", repr(OUT_DIR)).replace("$PACKAGES$", repr(PACKAGES))
# How long the supervisor reads what is left in the interpreter's pipes after its cell said it
# ended (every other process of the code is dead by then; only the interpreter's threads write).
DRAIN_LIVE = 0.2
# What the supervisor reads and drops of the interpreter's output written between cells.
MAX_BETWEEN_CELLS = 64 << 20

EXITED = {}
# The session's live interpreter, whose wait status every reap keeps.
INTERP = [None]
# CANCEL[0] is set by SIGUSR1: the worker asks the running cell to stop.
CANCEL = [False]


def reap_watch(watched):
    """Reaps every exited process (this is init) and keeps the wait status of those in watched
    and of the session's interpreter."""
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in watched or pid == INTERP[0]:
            EXITED[pid] = st


def live_pids(keep):
    """The processes of the code that still run (zombies do not), but keep."""
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for p in names:
        if not p.isdigit() or p == "1" or int(p) == keep:
            continue
        try:
            with open("/proc/%s/stat" % p, "rb") as f:
                st = f.read()
            i = st.rindex(b")")
            state = st[i + 2 : i + 3]
        except (OSError, ValueError):
            continue
        if state not in (b"Z", b"X"):
            out.append(int(p))
    return out


def kill_others(keep, watched=()):
    """SIGKILLs every process of the code but keep (the session's interpreter, or None), again
    until none is left; False when some survive 50 rounds (a fork race: the caller then kills
    everything)."""
    for _ in range(50):
        pids = live_pids(keep)
        if not pids:
            return True
        with AsUser():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        reap_watch(watched)
        time.sleep(0.002)
    return not live_pids(keep)


class Interp:
    """The session's persistent Python interpreter and the supervisor's ends of its pipes."""

    def __init__(self, pid, out_r, err_r, ctl_w, done_r):
        self.pid, self.out_r, self.err_r, self.ctl_w, self.done_r = pid, out_r, err_r, ctl_w, done_r

    def close(self):
        for fd in (self.out_r, self.err_r, self.ctl_w, self.done_r):
            try:
                os.close(fd)
            except OSError:
                pass


# A file whose change time is within this of a walk's start may change again within the same
# tick of the file system's clock without its size or times changing: its meta is not trusted at
# the next walk (see collect_changed).
RACY_NS = 50_000_000


def file_meta(st):
    """What changes whenever a file's bytes do: its size and times (ctime, which the code cannot
    set, moves on every write), with its mode and inode."""
    return (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_digest(dir_fd, name, max_file):
    """The SHA-256 of a regular file's bytes and the bytes, read up to max_file; None when it is no
    longer a regular file or holds more than max_file bytes (it grew since its stat)."""
    import hashlib

    data = read_regular(dir_fd, name, max_file)
    if data is None or len(data) > max_file:
        return None
    return hashlib.sha256(data).digest(), data


def work_bytes():
    """The size of /work's tmpfs: what its files can hold in bytes that take room (a sparse file's
    holes take none)."""
    try:
        st = os.statvfs(WORK)
        if st.f_blocks > 0:
            return st.f_blocks * st.f_frsize
    except OSError:
        pass
    return 64 << 20


def collect_changed(prev, max_files, max_file, max_total, send=True):
    """Walks /work as collect does (walk_work: no links followed, at most MAX_DEPTH folders deep)
    and sends a file frame for each regular file whose bytes differ from prev (name → key, as the
    last walk left it); anything else that is new or changed, and files over the limits, set
    truncated.
    Returns (truncated, the keys of this walk).

    A key is (meta, digest): file_meta (or None), and the SHA-256 of the bytes when they were
    read. Every regular file within max_file is read and compared by its bytes (a write through a
    shared mapping changes neither size nor times), as long as the walk has read less than /work's
    tmpfs holds: only sparse files get past that, and past it a file counts as unchanged when its
    meta is what the last walk saw (one whose times were within RACY_NS of that walk's start
    never does). A file over max_file (a sparse file of a tebibyte takes no room on the tmpfs) is
    never read: when its meta changed it sets truncated. So a walk reads at most max_file more
    than the tmpfs holds, whatever the cell left."""
    seen = {}
    state = {"total": 0, "count": 0, "budget": work_bytes()}
    began = time.time_ns()

    def keep_meta(st):
        return file_meta(st) if st.st_ctime_ns < began - RACY_NS and st.st_mtime_ns < began - RACY_NS else None

    def deep(rel, st):
        key = (("deep", st.st_ino, st.st_mtime_ns, st.st_ctime_ns), None)
        seen[rel] = key
        return prev.get(rel, (None, None))[0] != key[0]

    def visit(dir_fd, name, rel, st):
        old_meta, old_digest = prev.get(rel, (None, None))
        meta = file_meta(st)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_file:
            # Not read: it cannot be reported within the cell's caps. Its meta is kept even
            # when racy: a change within the same tick would only set truncated again.
            seen[rel] = (meta, None)
            return old_meta != meta
        if state["budget"] < st.st_size:
            # Past what the tmpfs holds: sparse files. Unchanged when its meta says so.
            if old_meta is not None and old_meta == meta:
                seen[rel] = (old_meta, old_digest)
                return False
            seen[rel] = (keep_meta(st), None)
            return True
        try:
            got = file_digest(dir_fd, name, max_file)
        except OSError:
            got = None
        state["budget"] -= st.st_size
        if got is None:
            seen[rel] = (None, None)
            return True
        digest, data = got
        seen[rel] = (keep_meta(st), digest)
        if old_digest == digest:
            return False
        if state["count"] >= max_files or state["total"] + len(data) > max_total:
            return True
        state["total"] += len(data)
        state["count"] += 1
        if send:
            frame(F_FILE, len(rel).to_bytes(2, "big") + rel + data)
        return False

    truncated = walk_work(visit, deep)
    if truncated is None:
        return True, prev
    return truncated, seen


def discard_waiting(fds):
    """Reads and drops what waits on fds (the interpreter's output between cells)."""
    dropped = 0
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    while dropped < MAX_BETWEEN_CELLS:
        ready = poller.poll(0)
        if not ready:
            return
        for fd, _ in ready:
            b = os.read(fd, READ_CHUNK)
            if not b:
                poller.unregister(fd)
            dropped += len(b)


class Session:
    def __init__(self, libc, req):
        self.libc = libc
        AsUser.uid = req["uid"]
        self.env = {"LANG": "C.UTF-8"}
        for e in req.get("env") or []:
            self.env[b64d(e["name"]).decode("utf-8")] = b64d(e.get("value")).decode("utf-8")
        self.env.update(FIXED_ENV)
        # The worker's secret for this session, echoed in the ready and cell-end frames: a new
        # worker that reads this container's kept output knows by it that a frame is ours.
        self.nonce = req.get("nonce") or ""
        if any(ch not in "0123456789abcdef" for ch in self.nonce):
            raise ValueError("the session nonce is not lower-case hex")
        self.flags = PY_FLAGS
        if forged_bytecode_possible(req):
            self.env["PYTHONPYCACHEPREFIX"] = PYCACHE_PREFIX
            self.flags = self.flags + ["-X", "pycache_prefix=" + PYCACHE_PREFIX]
        with AsUser():
            write_inputs(req.get("files") or [])
            make_out_dir()
            # What the first cell's files are compared with: the input files.
            _, self.seen = collect_changed({}, MAX_REQUEST, MAX_REQUEST, MAX_REQUEST, send=False)
        # What the worker wrote and no one has read yet: the next cell frame, or the egress
        # tunnel's frames, which the Tunnel reads into the same buffer during a cell.
        self.inbuf = bytearray()
        self.tunnel = None
        if req.get("egress_port"):
            write_egress_ca(req)
            # Bound once, before any cell, by the supervisor (as root inside gVisor under runsc).
            self.tunnel = Tunnel(req["egress_port"])
            self.tunnel.inbuf = self.inbuf
        self.interp = None
        self.had_interp = False
        # The newest package folder a cell brought (under PACKAGES), told to every Python cell's
        # interpreter from then on, a fresh one after a reset too.
        self.packages = ""
        self.wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        # The worker cancels the running cell with SIGUSR1 from outside the container (docker
        # kill --signal): the code cannot send it (PID 1 is another uid). Only a cell running
        # when it comes is stopped; one that came between cells is forgotten at the next.
        signal.signal(signal.SIGUSR1, lambda *_: CANCEL.__setitem__(0, True))
        quiet_wakeup_fd(wake_w)

    def next_cell(self):
        """Reads the worker's frames up to the next cell frame and returns its document, or None
        when the worker ended stdin. Tunnel frames that come late for a cell that ended are
        dropped; anything else is refused."""
        buf = self.inbuf
        poller = select.poll()
        poller.register(0, select.POLLIN)
        while True:
            while len(buf) >= 9:
                n, ftype = int.from_bytes(buf[:4], "big"), buf[4]
                if n > MAX_REQUEST:
                    raise ValueError("worker frame of %d bytes" % n)
                if len(buf) < 9 + n:
                    break
                payload = bytes(buf[9 : 9 + n])
                del buf[: 9 + n]
                if ftype in (F_TUNNEL_DATA, F_TUNNEL_CLOSE) and self.tunnel is not None:
                    continue
                if ftype != F_CELL:
                    raise ValueError("frame has type %d, want a cell" % ftype)
                return parse(payload.decode("ascii"))
            poller.poll()
            try:
                b = os.read(0, READ_CHUNK)
            except BlockingIOError:
                continue
            if not b:
                return None
            buf += b

    def start_interp(self):
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        ctl_r, ctl_w = os.pipe2(os.O_CLOEXEC)
        done_r, done_w = os.pipe2(os.O_CLOEXEC)
        set_pipe_size(out_r)
        set_pipe_size(err_r)
        env = dict(self.env)
        env.update(PY_ENV)
        argv = [sys.executable or "/usr/bin/python3"] + self.flags + ["-c", DRIVER]
        pid = spawn(self.libc, argv, env, (in_r, out_w, err_w), extra=((ctl_r, 3), (done_w, 4)))
        for fd in (in_r, in_w, out_w, err_w, ctl_r, done_w):
            os.close(fd)  # the interpreter's stdin is at its end, as a run's is once the code is read
        os.set_blocking(ctl_w, False)
        self.interp = Interp(pid, out_r, err_r, ctl_w, done_r)
        self.had_interp = True
        INTERP[0] = pid

    def drop_interp(self):
        if self.interp is not None:
            self.interp.close()
            EXITED.pop(self.interp.pid, None)
            self.interp = None
            INTERP[0] = None

    def interp_pid(self):
        return self.interp.pid if self.interp is not None else None

    def cell(self, c):
        lang, index, code = c["language"], c["index"], b64d(c["code"])
        if lang not in ("python", "sh"):
            raise ValueError("unknown language %r" % lang)
        timeout = c["timeout_ms"] / 1000.0
        caps = [c["max_stdout_bytes"], c["max_stderr_bytes"]]
        pkgs = c.get("packages") or ""
        if pkgs:
            if not (pkgs.startswith("cell-") and "/" not in pkgs and ".." not in pkgs and os.path.isdir(PACKAGES + "/" + pkgs)):
                raise ValueError("cell packages folder %r is not one of the package mount's" % pkgs)
            self.packages = PACKAGES + "/" + pkgs
        # An interpreter that died between cells (a thread of it called os._exit) is gone.
        reap_watch({self.interp_pid()})
        if self.interp is not None and self.interp.pid in EXITED:
            self.drop_interp()
        # What the interpreter's threads started between cells is not this cell's.
        if not kill_others(self.interp_pid(), {self.interp_pid()}):
            kill_everything()
            self.drop_interp()
        with AsUser():  # what the interpreter's threads showed between cells is not this cell's
            clear_out_dir()
        state_reset = False
        if lang == "python" and self.interp is None:
            state_reset = self.had_interp
            self.start_interp()
        counters = cgroup_counters()
        poller = select.poll()
        feed = b""
        feed_fd = done_r = -1
        if lang == "python":
            it = self.interp
            discard_waiting([it.out_r, it.err_r, it.done_r])
            out = Output(it.out_r, it.err_r, caps)
            pk = self.packages.encode("ascii")
            head = index.to_bytes(4, "big") + len(code).to_bytes(4, "big") + len(pk).to_bytes(4, "big")
            feed, feed_fd, done_r, pid = head + code + pk, it.ctl_w, it.done_r, it.pid
            started = time.monotonic()
        else:
            out_r, out_w = os.pipe2(os.O_CLOEXEC)
            err_r, err_w = os.pipe2(os.O_CLOEXEC)
            in_r, in_w = os.pipe2(os.O_CLOEXEC)
            with AsUser():  # sh opens it again by /proc/self/fd/3, as the sandbox uid
                script_r, script_w = os.pipe2(os.O_CLOEXEC)
            set_pipe_size(out_r)
            set_pipe_size(err_r)
            out = Output(out_r, err_r, caps)
            # The script comes on a pipe, never a file: under runc every file the supervisor
            # writes is the code's uid's, which a process left from an earlier cell could rewrite
            # between the write and sh's read.
            started = time.monotonic()
            pid = spawn(self.libc, ["/bin/sh", "/proc/self/fd/3"], dict(self.env), (in_r, out_w, err_w), extra=((script_r, 3),))
            for fd in (in_r, in_w, out_w, err_w, script_r):
                os.close(fd)
            os.set_blocking(script_w, False)
            feed, feed_fd = code, script_w
        for fd in (out.out_r, out.err_r, self.wake_r):
            poller.register(fd, select.POLLIN)
        if done_r >= 0:
            poller.register(done_r, select.POLLIN)
        if feed_fd >= 0:
            poller.register(feed_fd, select.POLLOUT)
        if self.tunnel is not None:
            self.tunnel.register(poller)
        deadline = started + timeout
        status, driver_status, timed_out, cancelled, done_buf = None, None, False, False, b""
        CANCEL[0] = False
        while True:
            reap_watch({pid})
            if pid in EXITED:
                status = EXITED.pop(pid)
                break
            if driver_status is not None:
                break
            if CANCEL[0]:
                cancelled = True
                break
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            for fd, ev in poller.poll(max(1, int(min(deadline - now, 0.5) * 1000) + 1)):
                if self.tunnel is not None and self.tunnel.owns(fd):
                    self.tunnel.event(fd, ev)
                elif fd == self.wake_r:
                    drain_wakeups(self.wake_r)
                elif fd == feed_fd:
                    feed = feed_some(feed_fd, feed)
                    if not feed:
                        poller.unregister(feed_fd)
                        if lang == "sh":
                            os.close(feed_fd)
                        feed_fd = -1
                elif fd == done_r:
                    b = os.read(done_r, 4096)
                    if not b:
                        poller.unregister(done_r)
                        continue
                    done_buf += b
                    while len(done_buf) >= 8 and driver_status is None:
                        if int.from_bytes(done_buf[:4], "big") == index:
                            driver_status = int.from_bytes(done_buf[4:8], "big") & 0xFF
                        done_buf = done_buf[8:]
                elif not out.forward(fd):
                    poller.unregister(fd)
        ended = time.monotonic()
        if lang == "sh" and feed_fd >= 0:
            os.close(feed_fd)
        # Every process of the code but the session's interpreter ends with the cell, so nothing
        # it left behind prints into the next cell or outlives it. The interpreter survives a
        # Python cell its driver ended, and an sh cell (even one past its timeout) that left it.
        keep = self.interp_pid() if (driver_status is not None or lang == "sh") else None
        if keep is None or not kill_others(keep, {keep}):
            kill_everything()
            keep = None
        reap_watch({keep})
        if keep is not None and keep in EXITED:  # an sh cell killed it
            keep = None
        if self.tunnel is not None:
            self.tunnel.end_cell()
        if keep is not None and lang == "python":
            out.drain(False, DRAIN_LIVE)  # what the cell wrote before its end waits in the pipes
        else:
            out.drain(True, DRAIN_AFTER_EXIT)  # every writer of these pipes is dead
        if lang == "sh":
            os.close(out.out_r)
            os.close(out.err_r)
        if keep is None:
            self.drop_interp()
        # Counted here, from outside the interpreter: its own report (the driver's end) could be
        # a thread's forgery, this count cannot.
        threads_alive = threads_besides_driver(keep) if keep is not None else None
        reported_by = None
        if timed_out or cancelled:
            exit_code, sig = -1, 0
        elif driver_status is not None:
            # The driver said the cell ended, and with what status: any thread of the
            # interpreter can write that, so the result says who said it.
            exit_code, sig, reported_by = driver_status, 0, "interpreter"
        else:
            exit_code, sig = exit_of(status)
        frame(F_EXIT, json_fields(exit_fields(exit_code, sig, timed_out, int((ended - started) * 1000), out, counters,
                                              cancelled=cancelled, state_reset=state_reset, threads_alive=threads_alive,
                                              reported_by=reported_by)))
        with AsUser():
            outputs_truncated = collect_outputs(c["max_outputs"], c["max_output_bytes"], c["max_total_output_bytes"])
            truncated, self.seen = collect_changed(self.seen, c["max_files"], c["max_file_bytes"], c["max_total_file_bytes"])
        # The payload ends with a newline: the daemon's log copier holds a line back until its
        # newline comes, so without it the cell's end would not reach the kept log (AdoptSession)
        # while the supervisor waits for the next cell.
        frame(F_CELL_END, json_fields({"files_truncated": truncated, "outputs_truncated": outputs_truncated,
                                       "cell": index, "nonce": self.nonce}) + b"\n")


def session_main(libc, req):
    s = Session(libc, req)
    frame(F_READY, json_fields({"nonce": s.nonce}) + b"\n")  # a newline, as F_CELL_END's
    while True:
        c = s.next_cell()
        if c is None:  # the worker ended the session
            break
        s.cell(c)
    kill_everything()
    frame(F_END, b"{}")


def preload():
    """Imports what a run needs before its request comes, so that a warm container spends the
    time while it waits: hashlib alone (OpenSSL's libcrypto) takes about 4 ms."""
    try:
        import fcntl, hashlib  # noqa: F401
    except ImportError:
        pass
    run_driver()


def main():
    libc = harden()
    preload()
    try:
        ftype, req = read_request()
        if req.get("v") != 2:
            raise ValueError("unknown request version %r" % req.get("v"))
        if ftype == F_SESSION:
            session_main(libc, req)
            return
        status, timed_out, elapsed_ms, streams, before = run(libc, req)
    except (ValueError, KeyError, TypeError, IndexError, binascii.Error, UnicodeDecodeError) as e:
        fail("bad request: %s" % e)
    except OSError as e:
        fail("preparing the run: %s" % e)

    exit_code, sig = (-1, 0) if timed_out else exit_of(status)
    frame(F_EXIT, json_fields(exit_fields(exit_code, sig, timed_out, elapsed_ms, streams, before)))
    inputs = {b64d(f["name"]): b64d(f.get("content")) for f in req.get("files") or []}
    with AsUser():
        outputs_truncated = False if req.get("no_capture") else collect_outputs(req["max_outputs"], req["max_output_bytes"], req["max_total_output_bytes"])
        truncated = collect(inputs, req["max_files"], req["max_file_bytes"], req["max_total_file_bytes"])
    frame(F_END, json_fields({"files_truncated": truncated, "outputs_truncated": outputs_truncated}))
    hold_for_worker()


main()
