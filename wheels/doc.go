// Package wheels fetches, verifies and unpacks the wheels a request's lock names, on the sandbox
// host and never in the sandbox: for each locked distribution it reads the operator's PEP 503
// simple index, downloads the wheels the sandbox's Python (CPython 3.11, linux x86_64) can
// install, keeps the first whose computed hash the lock names, checks its metadata and its
// requirements against the lock, and unpacks regular files only into an environment that a
// sandbox mounts read-only. Verified wheels are cached by hash and environments by lock, so a
// second run of the same lock opens no connection. Nothing of a wheel runs here: no build, no
// install script, no .pth file. Failures are *guard.PackageError.
package wheels
