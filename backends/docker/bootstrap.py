# sandboxflow bootstrap. The worker embeds this file and runs it inside a fresh container as
# `python3 -I -S -c <this file>`; it is never given the model's code on a command line.
#
# It reads one JSON document from stdin (written by the worker: every string value is base64 or a
# plain word, so a few lines below parse it without the json module, which minimal Pythons lack),
# writes the input files into /work, runs the code as a child in its own session with the timeout,
# drains the child's stdout and stderr to the end while keeping at most the caps, kills every other
# process of the sandbox when the child ends or the time is up, collects the produced files
# (regular files only, links never followed) and prints exactly one JSON line on stdout.
#
# Nothing here is trusted by the worker: the code runs as the same user and could write to this
# process's stdout. The worker bounds what it reads and re-applies every limit.
import binascii
import os
import select
import signal
import stat
import sys
import time

WORK = b"/work"
SH_SCRIPT_DIR = "/tmp/.sandboxflow"
FIXED_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/work",
    "TMPDIR": "/tmp",
}
PY_ENV = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
MAX_DEPTH = 8
READ_CHUNK = 1 << 20
DRAIN_AFTER_EXIT = 2.0


def parse(s):
    """Parses the subset of JSON the worker writes: objects, arrays, strings without escapes,
    integers, true, false and null."""
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


def b64e(b):
    return binascii.b2a_base64(b, newline=False).decode("ascii")


def read_all(fd):
    chunks = []
    while True:
        b = os.read(fd, READ_CHUNK)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def write_all(fd, b):
    while b:
        n = os.write(fd, b)
        b = b[n:]


def emit(fields):
    parts = []
    for k, v in fields.items():
        if isinstance(v, bool):
            parts.append('"%s":%s' % (k, "true" if v else "false"))
        elif isinstance(v, int):
            parts.append('"%s":%d' % (k, v))
        elif isinstance(v, (bytes, bytearray)):
            parts.append('"%s":"%s"' % (k, b64e(bytes(v))))
        elif isinstance(v, list):
            items = []
            for f in v:
                items.append('{"name":"%s","content":"%s"}' % (b64e(f[0]), b64e(f[1])))
            parts.append('"%s":[%s]' % (k, ",".join(items)))
    write_all(1, ("{" + ",".join(parts) + "}\n").encode("ascii"))


def fail(msg):
    emit({"v": 1, "error": msg.encode("utf-8", "replace")})
    sys.exit(0)


def kill_everything(pgid):
    """SIGKILLs the child's process group and then every process this user may signal: in the
    container's PID namespace that is every process but init and this one, so daemons that left
    the group do not outlive the run. Never done as root (a safety belt for running this file
    anywhere but in the sandbox)."""
    for target in (-pgid, -1):
        if target == -1 and os.getuid() == 0:
            continue
        try:
            os.kill(target, signal.SIGKILL)
        except OSError:
            pass


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


def collect(inputs, max_files, max_file, max_total):
    """Returns (files, truncated). Walks /work without following links; keeps regular files only;
    leaves out input files whose bytes did not change; drops anything over the limits."""
    files = []
    state = {"truncated": False, "total": 0}

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
            if not stat.S_ISREG(st.st_mode):
                state["truncated"] = True
                continue
            if st.st_size > max_file:
                if rel not in inputs:
                    state["truncated"] = True
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
            except OSError:
                state["truncated"] = True
                continue
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    state["truncated"] = True
                    continue
                data = b""
                while len(data) <= max_file:
                    b = os.read(fd, max_file + 1 - len(data))
                    if not b:
                        break
                    data += b
            finally:
                os.close(fd)
            if inputs.get(rel) == data:
                continue
            if len(data) > max_file or len(files) >= max_files or state["total"] + len(data) > max_total:
                state["truncated"] = True
                continue
            state["total"] += len(data)
            files.append((rel, data))

    try:
        root = os.open(WORK, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return [], True
    try:
        walk(root, b"", 1)
    finally:
        os.close(root)
    return files, state["truncated"]


def main():
    try:
        req = parse(read_all(0).decode("ascii"))
        if req.get("v") != 1:
            raise ValueError("unknown request version %r" % req.get("v"))
        language = req["language"]
        code = b64d(req["code"])
        files = req.get("files") or []
        env_list = req.get("env") or []
        timeout = req["timeout_ms"] / 1000.0
        caps = [req["max_stdout_bytes"], req["max_stderr_bytes"]]
        max_files, max_file, max_total = req["max_files"], req["max_file_bytes"], req["max_total_file_bytes"]
    except (ValueError, KeyError, TypeError, IndexError, binascii.Error, UnicodeDecodeError) as e:
        fail("bad request: %s" % e)

    try:
        write_inputs(files)
    except OSError as e:
        fail("writing input files: %s" % e)
    inputs = {b64d(f["name"]): b64d(f.get("content")) for f in files}

    env = {"LANG": "C.UTF-8"}
    for e in env_list:
        env[b64d(e["name"]).decode("utf-8")] = b64d(e.get("value")).decode("utf-8")
    env.update(FIXED_ENV)
    stdin_data = b""
    if language == "python":
        env.update(PY_ENV)
        argv = [sys.executable or "/usr/bin/python3", "-u", "-"]
        stdin_data = code
    elif language == "sh":
        try:
            os.makedirs(SH_SCRIPT_DIR, mode=0o700, exist_ok=True)
            script = os.path.join(SH_SCRIPT_DIR, "main.sh")
            fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o400)
            try:
                write_all(fd, code)
            finally:
                os.close(fd)
        except OSError as e:
            fail("writing the shell script: %s" % e)
        argv = ["/bin/sh", script]
    else:
        fail("unknown language %r" % language)

    pids_before = cgroup_counter(PIDS_EVENTS, "max")
    oom_before = cgroup_counter(MEMORY_EVENTS, "oom_kill")

    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    in_r, in_w = os.pipe2(os.O_CLOEXEC)
    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    for fd in (out_r, err_r):
        try:
            import fcntl

            fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), READ_CHUNK)
        except (ImportError, OSError):
            pass
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)

    started = time.monotonic()
    try:
        pid = os.fork()
    except OSError as e:
        fail("could not start the code: %s" % e)
    if pid == 0:
        try:
            os.setsid()
            for s in ("SIGPIPE", "SIGXFSZ", "SIGXFZ"):
                if hasattr(signal, s):
                    signal.signal(getattr(signal, s), signal.SIG_DFL)
            os.dup2(in_r, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.chdir(WORK)
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
    for fd in (in_r, out_w, err_w):
        os.close(fd)

    deadline = started + timeout
    kept = {out_r: bytearray(), err_r: bytearray()}
    cap = {out_r: caps[0], err_r: caps[1]}
    truncated = {out_r: False, err_r: False}
    poller = select.poll()
    poller.register(out_r, select.POLLIN)
    poller.register(err_r, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    open_fds = {out_r, err_r}
    if stdin_data:
        os.set_blocking(in_w, False)
        poller.register(in_w, select.POLLOUT)
    else:
        os.close(in_w)
        in_w = -1
    status = None
    timed_out = False
    ended = None

    while open_fds or status is None:
        if status is None:
            try:
                wpid, wst = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                wpid, wst = pid, 0
            if wpid == pid:
                status, ended = wst, time.monotonic()
                kill_everything(pid)
        now = time.monotonic()
        if status is None and now >= deadline:
            timed_out = True
            kill_everything(pid)
            status, ended = os.waitpid(pid, 0)[1], time.monotonic()
            now = ended
        if status is not None:
            if not open_fds or now >= ended + DRAIN_AFTER_EXIT:
                break
            wait = ended + DRAIN_AFTER_EXIT - now
        else:
            wait = deadline - now
        for fd, ev in poller.poll(max(1, int(wait * 1000) + 1)):
            if fd == wake_r:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            elif fd == in_w:
                try:
                    n = os.write(in_w, stdin_data[:65536])
                    stdin_data = stdin_data[n:]
                except BlockingIOError:
                    continue
                except OSError:
                    stdin_data = b""
                if not stdin_data:
                    poller.unregister(in_w)
                    os.close(in_w)
                    in_w = -1
            else:
                b = os.read(fd, READ_CHUNK)
                if not b:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    continue
                buf = kept[fd]
                room = cap[fd] - len(buf)
                if len(b) > room:
                    truncated[fd] = True
                    b = b[: max(room, 0)]
                if b:
                    buf += b

    signal.set_wakeup_fd(-1)
    elapsed_ms = int(((ended or time.monotonic()) - started) * 1000)
    if in_w >= 0:
        os.close(in_w)

    if timed_out:
        exit_code, sig = -1, 0
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        exit_code = 128 + sig
    else:
        exit_code, sig = os.WEXITSTATUS(status), 0

    pids_after = cgroup_counter(PIDS_EVENTS, "max")
    oom_after = cgroup_counter(MEMORY_EVENTS, "oom_kill")
    files, files_truncated = collect(inputs, max_files, max_file, max_total)
    emit({
        "v": 1,
        "exit_code": exit_code,
        "signal": sig,
        "timed_out": timed_out,
        "duration_ms": elapsed_ms,
        "stdout": kept[out_r],
        "stderr": kept[err_r],
        "stdout_truncated": truncated[out_r],
        "stderr_truncated": truncated[err_r],
        "files": files,
        "files_truncated": files_truncated,
        "pids_limit_hit": pids_after > max(pids_before, 0),
        "oom_kills": max(oom_after - max(oom_before, 0), 0),
        "limits_known": min(pids_before, pids_after, oom_before, oom_after) >= 0,
    })


main()
