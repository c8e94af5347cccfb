"""Runs one sandboxflow request inside a Modal Sandbox (see app.py), or anywhere with python3.

Reads the HTTP recipe's request (a guard.Checked as JSON) on stdin, writes the input files into
the working folder, runs the code with its timeout in a process group of its own, keeps stdout
and stderr up to their caps while draining the rest, collects the files the code produced
(regular files only, links not followed, unchanged inputs left out, within the file limits) and
prints one result (a guard.Result as JSON) on stdout. Standard library only.

sandboxflow re-applies every limit to what comes back; these limits only keep the answer small.
"""

import base64
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

MAX_DEPTH = 8
# How the code's Python starts, as in every sandboxflow backend (pysource.Flags): -E ignores
# every PYTHON* variable, -s the user site, -B writes no bytecode, -u leaves output unbuffered;
# the code is read from stdin, so the working folder is sys.path[0] and input modules import.
PY_FLAGS = ["-E", "-s", "-B", "-u"]
UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds(value):
    """A Go duration in JSON: nanoseconds as a number, or a string such as "30s" or "1m30s"."""
    if isinstance(value, (int, float)):
        return value / 1e9
    parts = re.findall(r"([0-9.]+)(ns|us|\u00b5s|ms|s|m|h)", value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ValueError("bad duration %r" % value)
    return sum(float(n) * UNITS[u] for n, u in parts)


def drain(stream, cap, out):
    """Reads stream to the end, keeping the first cap bytes in out["data"]."""
    kept = bytearray()
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        room = cap - len(kept)
        if len(chunk) > room:
            out["truncated"] = True
        kept += chunk[: max(room, 0)]
    out["data"] = bytes(kept)


def collect(workdir, inputs, limits):
    """Returns (files, truncated) for the regular files under workdir."""
    files, total, truncated = [], 0, False
    for root, dirs, names in os.walk(workdir, followlinks=False):
        depth = os.path.relpath(root, workdir).count(os.sep) + 1
        if depth >= MAX_DEPTH:
            dirs[:] = []
        for name in sorted(names):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, workdir).replace(os.sep, "/")
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                continue
            if st.st_size > limits["max_file_bytes"] or len(files) >= limits["max_files"] \
                    or total + st.st_size > limits["max_total_file_bytes"]:
                truncated = True
                continue
            with open(path, "rb") as f:
                data = f.read(limits["max_file_bytes"] + 1)
            if inputs.get(rel) == data:
                continue
            total += len(data)
            files.append({"name": rel, "size": len(data), "content": base64.b64encode(data).decode()})
    return files, truncated


def run(req, workdir):
    limits = req["limits"]
    inputs = {}
    for f in req.get("files") or []:
        data = base64.b64decode(f.get("content") or "")
        path = os.path.join(workdir, f["name"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(data)
        inputs[f["name"]] = data
    private = tempfile.mkdtemp(prefix="sandboxflow-")  # the code file, HOME, the pycache prefix
    code_path = os.path.join(private, "main")
    with open(code_path, "w") as f:
        f.write(req["code"])
    home, pycache = os.path.join(private, "home"), os.path.join(private, "pycache")
    os.mkdir(home)
    flags = PY_FLAGS
    # HOME is not the working folder, where input files land; the PYTHON* names are for
    # interpreters the code starts (its own Python ignores them). With an input file in a
    # __pycache__ folder, bytecode is read only under a prefix outside the working folder, so
    # forged bytecode never stands in for a module the reviewer read.
    env = {"LANG": "C.UTF-8"}
    env.update({e["name"]: e["value"] for e in req.get("env") or []})
    env.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    if any("__pycache__" in f["name"].split("/") for f in req.get("files") or []):
        flags = flags + ["-X", "pycache_prefix=" + pycache]
        env["PYTHONPYCACHEPREFIX"] = pycache
    python = req.get("language") or "python"
    argv = {"python": ["python3"] + flags + ["-"], "sh": ["/bin/sh", code_path]}[python]
    start = time.monotonic()
    with open(code_path, "rb") as code:
        proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=code if python == "python" else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    out, err = {"truncated": False}, {"truncated": False}
    readers = [threading.Thread(target=drain, args=(proc.stdout, limits["max_stdout_bytes"], out)),
               threading.Thread(target=drain, args=(proc.stderr, limits["max_stderr_bytes"], err))]
    for t in readers:
        t.start()
    timed_out = False
    try:
        proc.wait(timeout=seconds(limits["timeout"]))
    except subprocess.TimeoutExpired:
        timed_out = True
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the code's own children too
    except ProcessLookupError:
        pass
    proc.wait()
    for t in readers:
        t.join()
    files, files_truncated = ([], False) if timed_out else collect(workdir, inputs, limits)
    exit_code = -1 if timed_out else proc.returncode
    return {
        "ok": exit_code == 0 and not timed_out,
        "exit_code": exit_code,
        "timed_out": timed_out,
        "stdout": base64.b64encode(out["data"]).decode(),
        "stderr": base64.b64encode(err["data"]).decode(),
        "stdout_truncated": out["truncated"],
        "stderr_truncated": err["truncated"],
        "files": files,
        "files_truncated": files_truncated,
        "duration": int((time.monotonic() - start) * 1e9),
    }


def main():
    req = json.load(sys.stdin)
    workdir = tempfile.mkdtemp(prefix="work-")
    json.dump(run(req, workdir), sys.stdout)


if __name__ == "__main__":
    main()
