// Package e2b runs code in E2B sandboxes (e2b.dev): each run gets a fresh Firecracker microVM
// from E2B's hosted service (or a self-hosted E2B), created through E2B's public REST API and
// driven through envd, the daemon inside every sandbox. E2B has no Go SDK; this package speaks
// the published protocol itself (spec/openapi.yml and spec/envd in github.com/e2b-dev/E2B, envd's
// server in github.com/e2b-dev/infra) with the standard library only.
//
// # What a run does
//
//  1. POST /sandboxes (X-API-Key) with the template, a time to live of the run's timeout plus
//     Config.TTLSlack, secure true (envd then requires the returned access token),
//     allow_internet_access false and network.denyOut ["0.0.0.0/0"] unless the request asked
//     for network, and metadata that names the owner (sandboxflow.managed, workflow, run and
//     activity ids, digest) so the reaper can find orphans. The sandbox id is logged and passed to
//     Config.Created.
//  2. envd: MakeDir the working folder (default /home/user/work) and the code's HOME, upload the code to
//     /tmp/.sandboxflow and the input files into the working folder (POST /files, multipart).
//  3. envd: process.Process/Start, a Connect server-streaming call with the JSON codec, runs
//     python3 with pysource.Flags (-E -s -B -u, and a pycache prefix outside the working
//     folder when an input file lies in a __pycache__ folder), or /bin/sh, on the code file with
//     the request's env, HOME=/tmp/.sandboxflow/home (never the working folder, which may not
//     hold or lie in /tmp/.sandboxflow), PYTHONNOUSERSITE=1 and PYTHONDONTWRITEBYTECODE=1, so
//     nothing among the input files or in the env runs before the code, as the sandbox user, with
//     Connect-Timeout-Ms set to the timeout (envd kills the process when it passes). Start, data
//     (stdout, stderr) and end (exit code) events are read; output is kept up to the caps and the
//     rest drained.
//  4. envd: ListDir the working folder (depth 8) and download regular files (not links), within
//     the file limits; input files whose bytes did not change are left out.
//  5. DELETE /sandboxes/{id}, always: after a result, an error, a timeout or a cancel (with a
//     context of its own). A kill that fails is logged with the sandbox id; the sandbox's time to
//     live ends it anyway, and Reap (run by the worker at start and on an interval) kills managed sandboxes older than a threshold,
//     which covers a lost worker too.
//
// # Sessions
//
// A session (guard.SessionBackend) keeps one sandbox for its whole life. OpenSession creates it as
// a run's (metadata with the session's settings digest and MetaSessionEnd, its end), makes the
// working folder and HOME and writes the input files; nothing else runs. Its time to live is
// Config.SessionTTL (5 min), extended by a keeper every Config.SessionKeepAlive (30 s) with POST
// /sandboxes/{id}/timeout, never past the session's lifetime plus TTLSlack: a worker that is gone
// leaves it at most SessionTTL, and the reaper spares it until its session's end. Close kills it.
//
// Python cells run in one interpreter started by the first python cell: python3 with
// pysource.Flags and -c the driver of internal/celldriver, through process.Process/Start with
// stdin kept open (the stream stays open for the session); each cell goes to it with
// process.Process/SendInput with a fresh nonce, and its result is what the process wrote up to
// the cell's end marker (that package's doc says exactly what a cell's code can do to that).
// A cell whose interpreter dies (os._exit, a memory kill) gets its true exit code; one past its
// timeout is killed with process.Process/SendSignal (SIGKILL) and is a timed-out result; the next
// python cell starts a fresh interpreter, with StateReset. sh cells run as a fresh /bin/sh -c
// each, with envd's timeout. The working folder persists; a cell's Files are the regular files
// it created or changed (a file whose size and modifiedTime are as the last cell left them is not
// read again; one read is compared by its bytes); a file a process an earlier cell left changed
// between cells counts for the next cell, as its output does. When an envd call fails, or the keeper's
// extension answers 404, the backend asks GET /sandboxes/{id}: a 404 closes Done and the cell's
// error is a guard.SandboxLost.
//
// # Errors
//
// Before the code could start (create, upload, a start request that was not written in full or
// that envd refused), failures are retryable guard.IntegrationErrors: a 429 wraps RateLimitError
// with the server's Retry-After, bounded. A refused key (401, 403) or a request E2B will never
// accept (400, 404: a wrong template) is a guard.ConfigError. Once the start request was sent, a
// failure (the stream cut, an error end of stream, unreadable produced files) is an
// IntegrationError whose outcome is unknown (CodeMayHaveStarted), never retried. A timeout is a
// result (TimedOut, exit code -1), and the sandbox is killed.
//
// The API key is sent only to the API as X-API-Key, never to envd, never logged, and removed
// from any server message quoted in an error.
//
// # What it isolates, and what it cannot check
//
// E2B isolates each run in its own microVM: host files, processes, memory and CPU of the worker
// are out of reach, and the sandbox is gone after the run. With network off, E2B denies all IPv4
// egress (0.0.0.0/0) from the sandbox; EgressNetwork maps an allowlist to allowOut/denyOut.
// What the backend cannot check from outside: that E2B really enforces the egress rules and the
// time to live, what else runs in the template (the code runs as the template's user, "user",
// who may have sudo in E2B's base template, so root inside the VM is not excluded), the VM's
// memory and CPU size (set by the template, not per run), and that the sandbox is really gone
// after the kill. Files the code writes are read back after the code exited, but background
// processes the code started keep running until the kill, so a produced file can change between
// the listing and the download; whatever it holds is data from inside the sandbox, and guard
// re-applies every limit to it. guard.Guarded enforces checks, limits and the backstop around
// the backend as for any other.
//
// # What was tested, and against what
//
// Nothing in this repository's tests reaches E2B: every test runs against a fake E2B server
// (internal/testkit/e2bfake, its types written from the spec, not shared with this package) that follows
// the published API and envd protocol (paths, headers, status codes, JSON shapes, unknown fields
// refused, Connect envelope framing) and runs the code with the local python3 and sh. The
// fake's failure modes cover a bad key (401), a rate limit (429 with Retry-After), sandbox
// creation timing out (client timeout and 504), the process stream cut mid-run, and the kill
// call failing. Against the real service, run `worker doctor --backend e2b` with a key: it checks
// the API and makes a probe run.
package e2b
