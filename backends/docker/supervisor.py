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
# HOME is not /work, where input files land: no user site, rc or profile file among them counts.
FIXED_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    # For interpreters the code starts itself (the code's own runs -E): no user site, no
    # bytecode written (and, with forged bytecode among the inputs, none read) in /work.
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
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


def read_request():
    head = read_exact(0, 9)
    n, ftype = int.from_bytes(head[:4], "big"), head[4]
    if ftype != F_REQUEST or n > MAX_REQUEST:
        raise ValueError("first frame has type %d and %d bytes, want a request" % (ftype, n))
    return parse(read_exact(0, n).decode("ascii"))


def json_fields(fields):
    parts = []
    for k, v in fields.items():
        if isinstance(v, bool):
            parts.append('"%s":%s' % (k, "true" if v else "false"))
        else:
            parts.append('"%s":%d' % (k, v))
    return ("{" + ",".join(parts) + "}").encode("ascii")


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
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = b""
        while len(data) <= max_file:
            b = os.read(fd, max_file + 1 - len(data))
            if not b:
                break
            data += b
        return data
    finally:
        os.close(fd)


def collect(inputs, max_files, max_file, max_total):
    """Sends a file frame for each produced file and returns whether any was left out. Walks
    /work without following links; keeps regular files only; leaves out input files whose bytes
    did not change; leaves out anything over the limits."""
    state = {"truncated": False, "total": 0, "count": 0}

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
            if not stat.S_ISREG(st.st_mode) or (st.st_size > max_file and rel not in inputs):
                state["truncated"] = True
                continue
            if st.st_size > max_file:
                continue
            try:
                data = read_regular(dir_fd, name, max_file)
            except OSError:
                data = None
            if data is None:
                state["truncated"] = True
                continue
            if inputs.get(rel) == data:
                continue
            if len(data) > max_file or state["count"] >= max_files or state["total"] + len(data) > max_total:
                state["truncated"] = True
                continue
            state["total"] += len(data)
            state["count"] += 1
            frame(F_FILE, len(rel).to_bytes(2, "big") + rel + data)

    try:
        root = os.open(WORK, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return True
    try:
        walk(root, b"", 1)
    finally:
        os.close(root)
    return state["truncated"]


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
        return [sys.executable or "/usr/bin/python3"] + flags + ["-"], code
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


def spawn(libc, argv, env, pipes):
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
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
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


class Streams:
    """The code's stdin, stdout and stderr pipes, seen from the supervisor."""

    def __init__(self, caps, stdin_data, wake_r):
        self.out_r, self.out_w = os.pipe2(os.O_CLOEXEC)
        self.err_r, self.err_w = os.pipe2(os.O_CLOEXEC)
        self.in_r, self.in_w = os.pipe2(os.O_CLOEXEC)
        for fd in (self.out_r, self.err_r):
            try:
                import fcntl

                fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), READ_CHUNK)
            except (ImportError, OSError):
                pass
        self.kind = {self.out_r: F_STDOUT, self.err_r: F_STDERR}
        self.room = {self.out_r: caps[0], self.err_r: caps[1]}
        self.seen = {self.out_r: 0, self.err_r: 0}
        self.stdin_data = stdin_data
        self.wake_r = wake_r
        self.poller = select.poll()
        self.poller.register(self.out_r, select.POLLIN)
        self.poller.register(self.err_r, select.POLLIN)
        self.poller.register(wake_r, select.POLLIN)
        self.open = {self.out_r, self.err_r}
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
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            elif fd == self.in_w:
                self.feed()
            else:
                self.forward(fd)

    def feed(self):
        try:
            n = os.write(self.in_w, self.stdin_data[:65536])
            self.stdin_data = self.stdin_data[n:]
        except BlockingIOError:
            return
        except OSError:
            self.stdin_data = b""
        if not self.stdin_data:
            self.poller.unregister(self.in_w)
            os.close(self.in_w)
            self.in_w = -1

    def forward(self, fd):
        b = os.read(fd, READ_CHUNK)
        if not b:
            self.poller.unregister(fd)
            self.open.discard(fd)
            return
        self.seen[fd] += len(b)
        keep = b[: max(self.room[fd], 0)]
        self.room[fd] -= len(keep)
        if keep:
            frame(self.kind[fd], keep)

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
        if on == self.paused:
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
    signal.set_wakeup_fd(wake_w)
    streams = Streams([req["max_stdout_bytes"], req["max_stderr_bytes"]], stdin_data, wake_r)
    if tunnel is not None:
        streams.tunnel = tunnel
        tunnel.register(streams.poller)
    counters = (cgroup_counter(PIDS_EVENTS, "max"), cgroup_counter(MEMORY_EVENTS, "oom_kill"))
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


def main():
    libc = harden()
    try:
        req = read_request()
        if req.get("v") != 2:
            raise ValueError("unknown request version %r" % req.get("v"))
        status, timed_out, elapsed_ms, streams, before = run(libc, req)
    except (ValueError, KeyError, TypeError, IndexError, binascii.Error, UnicodeDecodeError) as e:
        fail("bad request: %s" % e)
    except OSError as e:
        fail("preparing the run: %s" % e)

    sig = 0
    if timed_out:
        exit_code = -1
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        exit_code = 128 + sig
    else:
        exit_code = os.WEXITSTATUS(status)
    pids_after = cgroup_counter(PIDS_EVENTS, "max")
    oom_after = cgroup_counter(MEMORY_EVENTS, "oom_kill")
    frame(F_EXIT, json_fields({
        "exit_code": exit_code,
        "signal": sig,
        "timed_out": timed_out,
        "duration_ms": elapsed_ms,
        "stdout_bytes": streams.seen[streams.out_r],
        "stderr_bytes": streams.seen[streams.err_r],
        "pids_limit_hit": pids_after > max(before[0], 0),
        "oom_kills": max(oom_after - max(before[1], 0), 0),
        "limits_known": min(before[0], before[1], pids_after, oom_after) >= 0,
    }))
    inputs = {b64d(f["name"]): b64d(f.get("content")) for f in req.get("files") or []}
    with AsUser():
        truncated = collect(inputs, req["max_files"], req["max_file_bytes"], req["max_total_file_bytes"])
    frame(F_END, json_fields({"files_truncated": truncated}))


main()
