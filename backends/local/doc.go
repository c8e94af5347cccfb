// Package local runs code as a plain child process of the worker. It is for DEVELOPMENT ONLY:
// nothing is isolated. The code runs as the worker's user, can read and write the worker's files,
// reach the network and use as much memory and CPU as it likes.
//
// What it does do: it refuses to start without Config.AllowUnsafeLocal (a guard.ConfigError); it
// logs a WARNING on every run; it runs the interpreter in a fresh temporary folder with a minimal
// environment (nothing is inherited from the worker: only PATH, HOME, TMPDIR, LANG and the
// request's env); it kills the whole process group when the code's main process exits or the
// timeout passes, so a grandchild that ignores SIGTERM does not outlive the run; it drains stdout
// and stderr to the end while keeping only up to the caps; and it removes the folder afterwards.
//
// What it cannot do: a process that leaves the group (setsid) escapes the kill; memory, CPU,
// process count and the network are not limited. Never give it untrusted code: use the Docker
// backend.
package local
