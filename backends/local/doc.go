// Package local runs code as a plain child process of the worker. It is for DEVELOPMENT ONLY:
// nothing is isolated. The code can read every file its uid can read, reach the network and use
// as much memory and CPU as it likes.
//
// What it does do: it refuses to start without Config.AllowUnsafeLocal (a guard.ConfigError); it
// logs a WARNING on every run (Backend.RunWarning); it runs the interpreter in a fresh temporary
// folder with a minimal environment (nothing is inherited from the worker: only PATH, HOME, TMPDIR,
// LANG, PYTHONNOUSERSITE, PYTHONDONTWRITEBYTECODE and the request's env); it kills the whole
// process group when the code's main process exits or the timeout passes, so a grandchild that
// ignores SIGTERM does not outlive the run; it drains stdout and stderr to the end while keeping
// only up to the caps; it reads produced files through an os.Root (nothing outside the working
// folder is opened); and it removes the folder afterwards.
//
// # Whose files the code can read
//
// When the worker runs as root and Config.UID is set (the worker sets DefaultUID, 65534), the
// code runs as that uid and gid with no supplementary groups, in folders given to it: it cannot
// read files of root's that others may not read, such as worker --dev's reviewer key
// (DATA_DIR/reviewer/id_ed25519, 0600 in a 0700 folder), nor change the reviewers file, so it
// cannot sign an approval of its own. New checks that the uid can run the interpreter and the
// shell in Config.TempDir (a ConfigError otherwise). Otherwise (the worker is not root, or UID is
// zero) the code runs as the worker's own user and can read and change every file the worker
// can, the reviewer key and the reviewers file included: RunWarning says so (SameUserWarning).
// No folder can keep a file from code of the same uid (it may read, chmod or ptrace whatever the
// worker can), so worker --dev does not pretend to: the key stays where it is, and the warning is
// plain. Use the Docker backend, or a root worker, when that matters.
//
// # Nothing runs before the code
//
// Python reads the code from its stdin, as in the Docker backend, started with
// pysource.Flags (-E -s -B -u): the working folder is sys.path[0], so input modules import,
// while no PYTHON* variable, user site, .pth, sitecustomize or usercustomize among the input
// files runs first; HOME and TMPDIR are empty folders of their own beside the working folder,
// not in it; with an input file in a __pycache__ folder Python gets a pycache prefix outside the
// working folder, so forged bytecode never stands in for a module the reviewer read. sh runs the
// code file as a non-interactive, non-login shell, which reads no ENV, rc or profile file.
//
// # Sessions
//
// OpenSession (guard.SessionBackend, for `worker --dev --backend local`) makes a fresh temporary
// folder for the session (work, HOME and TMPDIR as a run's, given to Config.UID when the code
// runs as it), writes the input files and starts one python3 for the whole session: the driver
// of internal/celldriver, with pysource.Flags and the run's minimal environment, in the
// working folder, reading cells from a pipe (that package's doc says what a cell's code can do
// to its end marker). Python cells run in it, so variables, imports and open files survive;
// a cell that kills it (os._exit, a signal) gets its true exit code, one past its timeout has its
// process group killed and is a timed-out result, and the next python cell starts a fresh python3
// with StateReset. sh cells run as a fresh sh -c each, in a process group killed when the cell
// ends. The working folder persists; a cell's Files are the regular files it created or changed
// (or that a thread an earlier cell left changed since the last cell, as with its output).
// That python3 is the session's sandbox: when it ends while no cell runs (killed from outside,
// or by a thread an earlier cell left), Done is closed and every later cell is a SandboxLost.
// Close kills it and removes the folder. Nothing of this is isolated either: concurrent sessions
// share the uid, so each can reach the others' folders and processes.
//
// What it cannot do: a process that leaves the group (setsid) escapes the kill; memory, CPU,
// process count and the network are not limited; concurrent runs share one uid, so each can reach
// the others' folders and processes. Never give it untrusted code: use the Docker
// backend.
package local
