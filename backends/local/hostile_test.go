package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/startuptest"
)

// markerDir is a folder outside the run's where hooks write their markers, writable by the
// code's uid.
func markerDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(enterableTempDir(t), "markers")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStartupHooksDoNotRun plants every start-up hook the tests know of (startuptest) in the
// input files and, past the guard, the env: none runs, before the code or in place of a module
// it imports; what ran is counted by the marker files the hooks write outside the run's folder.
func TestStartupHooksDoNotRun(t *testing.T) {
	b, tmp := newBackend(t)
	marks := markerDir(t)
	probe, err := b.Run(context.Background(), check(t, guard.Request{Code: startuptest.PycProbe(marks)}))
	if err != nil || probe.ExitCode != 0 {
		t.Fatalf("pyc probe: %v exit %d stderr %q", err, probe.ExitCode, probe.Stderr)
	}
	in, err := startuptest.ParseProbe(probe.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range startuptest.Cases(in, marks) {
		t.Run(tc.Name, func(t *testing.T) {
			c := check(t, guard.Request{Code: tc.Code, Language: tc.Language, Settings: guard.Settings{Files: tc.Files}})
			for name, value := range tc.Env {
				c.Env = append(c.Env, guard.EnvVar{Name: name, Value: value})
			}
			res, err := b.Run(context.Background(), c)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			entries, err := os.ReadDir(marks)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if ran := startuptest.Markers(names); len(ran) > 0 {
				t.Errorf("hooks ran: %q", ran)
			}
			if string(res.Stdout) != tc.Stdout || strings.Contains(string(res.Stderr), "HOOK") || res.ExitCode != 0 {
				t.Errorf("got exit %d stdout %q stderr %q; want exit 0 and stdout %q", res.ExitCode, res.Stdout, res.Stderr, tc.Stdout)
			}
		})
	}
	assertEmpty(t, tmp)
}

// hostileKeyCode tries everything a local run could do to the development reviewer key and the
// reviewers file, one key=value a line.
const hostileKeyCode = `import os, sys
key, signers, control = sys.stdin.readline().strip(), sys.stdin.readline().strip(), sys.stdin.readline().strip()
def attempt(name, f):
    try:
        print(name + "=" + str(f()))
    except OSError as e:
        print(name + "=no:" + str(e.errno))
attempt("read_control", lambda: len(open(control, "rb").read()))
attempt("read_key", lambda: len(open(key, "rb").read()))
attempt("list_dir", lambda: len(os.listdir(os.path.dirname(key))))
attempt("append_signers", lambda: open(signers, "a").write("mallory ssh-ed25519 AAAA\n"))
attempt("chmod_key", lambda: os.chmod(key, 0o644))
attempt("uid", lambda: os.getuid())
attempt("groups", lambda: len(os.getgroups()))
`

// TestCannotReadReviewerKey: code run by a root worker's local backend cannot read, list,
// loosen or add to the development reviewer key of worker --dev (approval.EnsureDevKeys, as the
// worker makes it), so it cannot sign an approval of its own. A worker that is not root cannot
// keep it out of the code's reach, and its warning says so.
func TestCannotReadReviewerKey(t *testing.T) {
	b, _ := newBackend(t)
	if os.Geteuid() != 0 {
		if w := b.RunWarning(); !strings.Contains(w, SameUserWarning) || !strings.Contains(w, "reviewer key") {
			t.Fatalf("worker not root: warning %q; want it to say the code can read the reviewer key", w)
		}
		return
	}
	// A data dir others may enter, so what protects the key is the reviewer folder (0700) and
	// the key (0600) as worker --dev makes them; a file others may read is the control.
	data := enterableTempDir(t)
	keys, err := approval.EnsureDevKeys(data, "dev")
	if err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(data, "visible.txt")
	if err := os.WriteFile(control, []byte("public"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(keys.AllowedSigners)
	if err != nil {
		t.Fatal(err)
	}
	c := check(t, guard.Request{Code: strings.Replace(hostileKeyCode, "sys.stdin.readline().strip(), sys.stdin.readline().strip(), sys.stdin.readline().strip()",
		pyString(keys.PrivateKey)+", "+pyString(keys.AllowedSigners)+", "+pyString(control), 1)})
	res, err := b.Run(context.Background(), c)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %v exit %d stderr %q", err, res.ExitCode, res.Stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	for _, k := range []string{"read_key", "list_dir", "append_signers", "chmod_key"} {
		if !strings.HasPrefix(got[k], "no:") {
			t.Errorf("%s: got %q; want a failure (stdout %q)", k, got[k], res.Stdout)
		}
	}
	if got["read_control"] != "6" {
		t.Errorf("read_control: got %q; want 6 (the code reaches the data dir, so the key's own modes keep it out)", got["read_control"])
	}
	if got["uid"] != "65534" || got["groups"] != "0" {
		t.Errorf("uid %q groups %q; want 65534 and no supplementary groups", got["uid"], got["groups"])
	}
	if after, err := os.ReadFile(keys.AllowedSigners); err != nil || string(after) != string(before) {
		t.Errorf("allowed_signers changed: %q (%v)", after, err)
	}
	if st, err := os.Stat(keys.PrivateKey); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode: %v %v; want 0600", st.Mode(), err)
	}
	if w := b.RunWarning(); strings.Contains(w, SameUserWarning) {
		t.Errorf("root worker: warning %q; want no same-user warning", w)
	}
}

func pyString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// TestSameUserWarning: a backend that runs the code as the worker's own user says, on every run,
// that the code can read the reviewer key; a negative uid is refused.
func TestSameUserWarning(t *testing.T) {
	requirePython(t)
	b, err := New(Config{AllowUnsafeLocal: true, TempDir: enterableTempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if w := b.RunWarning(); !strings.Contains(w, SameUserWarning) || !strings.Contains(w, "reviewer key") || !strings.HasPrefix(w, Warning) {
		t.Errorf("UID zero: warning %q; want Warning and that the code can read the reviewer key", w)
	}
	res, err := b.Run(context.Background(), check(t, guard.Request{Code: "import os; print(os.getuid() == os.geteuid() == " + strconv.Itoa(os.Geteuid()) + ")"}))
	if err != nil || string(res.Stdout) != "True\n" {
		t.Errorf("UID zero: got %q %v; want the code to run as the worker's user", res.Stdout, err)
	}
	var ce *guard.ConfigError
	if _, err := New(Config{AllowUnsafeLocal: true, UID: -1}); !errors.As(err, &ce) {
		t.Errorf("UID -1: got %v; want a ConfigError", err)
	}
}

// TestRefusedAttacksAreReal runs the attacks only the guard can stop (startuptest.RefusedCases:
// a program the shown code starts on purpose runs a hidden file): past the guard the hook runs
// (its marker is written outside the run's folder), so the attack is real; the guard refuses the
// request with a ToolUsageError naming the env name or input file, before approval.
func TestRefusedAttacksAreReal(t *testing.T) {
	b, tmp := newBackend(t)
	for i := range startuptest.RefusedCases("") {
		marks := markerDir(t) // one for each case, so each counts only its own hook
		tc := startuptest.RefusedCases(marks)[i]
		t.Run(tc.Name, func(t *testing.T) {
			req := guard.Request{Code: tc.Code, Language: tc.Language, Settings: guard.Settings{Files: tc.Files, Env: tc.Env}}
			_, err := guard.Policy{Languages: []string{guard.Python, guard.Shell}}.Check(req, Name)
			var te *guard.ToolUsageError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), tc.Naming) {
				t.Errorf("Check: got %v; want a ToolUsageError naming %s", err, tc.Naming)
			}
			c := check(t, guard.Request{Code: tc.Code, Language: tc.Language})
			c.Files, c.Env = startuptest.PastTheGuard(tc.Files, tc.Env)
			res, err := b.Run(context.Background(), c)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			entries, err := os.ReadDir(marks)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if ran := startuptest.Markers(names); !slices.Equal(ran, []string{tc.Hook}) {
				t.Errorf("past the guard: hooks %q ran (exit %d stdout %q stderr %q); want %s: the attack is not what the test says",
					ran, res.ExitCode, res.Stdout, res.Stderr, tc.Hook)
			}
		})
	}
	assertEmpty(t, tmp)
}

// TestNativeLoaderEnvRefused: OPENSSL_CONF naming an input openssl.cnf whose provider module is
// an input evil.bin (OPENSSL_MODULES=.) runs that file's constructor when the shown code imports
// hashlib; the Docker backend refused these names and its /work is noexec, but the local backend
// ran it (the attack past the guard shows it still would). The guard refuses the names for every
// backend, before approval.
func TestNativeLoaderEnvRefused(t *testing.T) {
	need.Need(t, need.CC)
	b, tmp := newBackend(t)
	marks := markerDir(t)
	src := filepath.Join(t.TempDir(), "evil.c")
	lib := filepath.Join(filepath.Dir(src), "evil.bin")
	c := fmt.Sprintf("#include <stdio.h>\n__attribute__((constructor)) static void hook(void) { FILE *f = fopen(%q, \"w\"); if (f) { fputs(\"ran\", f); fclose(f); } }\n",
		filepath.Join(marks, startuptest.MarkerPrefix+"openssl-provider"))
	if err := os.WriteFile(src, []byte(c), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v: %s", err, out)
	}
	evil, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"openssl.cnf": []byte("openssl_conf = openssl_init\n[openssl_init]\nproviders = provider_sect\n[provider_sect]\nevil = evil_sect\n[evil_sect]\nmodule = evil.bin\nactivate = 1\n"),
		"evil.bin":    evil,
	}
	env := map[string]string{"OPENSSL_CONF": "openssl.cnf", "OPENSSL_MODULES": "."}
	code := "import hashlib\nprint(hashlib.sha256(b'').hexdigest()[:8])\n"

	_, err = guard.Policy{}.Check(guard.Request{Code: code, Settings: guard.Settings{Files: files, Env: env}}, Name)
	var te *guard.ToolUsageError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "OPENSSL_CONF") {
		t.Errorf("Check: got %v; want a ToolUsageError naming OPENSSL_CONF", err)
	}
	past := check(t, guard.Request{Code: code})
	past.Files, past.Env = startuptest.PastTheGuard(files, env)
	res, err := b.Run(context.Background(), past)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(marks, startuptest.MarkerPrefix+"openssl-provider")); err != nil {
		t.Errorf("past the guard the provider's constructor did not run (%v; exit %d stdout %q stderr %q): the attack is not what the test says",
			err, res.ExitCode, res.Stdout, res.Stderr)
	}
	assertEmpty(t, tmp)
}

// TestRefusesWorkerFilesInReach: a payload key file the operator left readable by others (0644,
// as `openssl rand -base64 32 > keys` under the usual umask makes it) is read by code a root
// worker runs as uid 65534, which with the Temporal server on the host's network could read every
// run's code, input and output; a reviewers file in a folder others may write could be replaced.
// New now refuses both, naming the file, and accepts them once out of reach.
func TestRefusesWorkerFilesInReach(t *testing.T) {
	need.Need(t, need.Root)
	b, tmp := newBackend(t)
	dir := enterableTempDir(t)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := b.Run(context.Background(), check(t, guard.Request{Code: "print(len(open(" + pyString(keys) + ").read()))"}))
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "48" {
		t.Fatalf("the attack: got %v stdout %q stderr %q; want the code to read the 48-byte key file", err, res.Stdout, res.Stderr)
	}
	cfg := Config{AllowUnsafeLocal: true, TempDir: tmp, UID: DefaultUID, Unreadable: []string{keys}}
	_, err = New(cfg)
	var ce *guard.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), keys) {
		t.Errorf("New with a key file others may read: got %v; want a ConfigError naming it", err)
	}
	if err := os.Chmod(keys, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err != nil {
		t.Errorf("New with the key file 0600: %v", err)
	}

	reviewers := filepath.Join(dir, "shared", "allowed_signers")
	if err := os.Mkdir(filepath.Dir(reviewers), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(reviewers, []byte("dev ssh-ed25519 AAAA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = Config{AllowUnsafeLocal: true, TempDir: tmp, UID: DefaultUID, Unchangeable: []string{reviewers}}
	if _, err := New(cfg); err != nil {
		t.Errorf("New with the reviewers file 0644 in a folder of 0755: %v", err)
	}
	for _, loosen := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Dir(reviewers), 0o777}, {reviewers, 0o666}} {
		if err := os.Chmod(loosen.path, loosen.mode); err != nil {
			t.Fatal(err)
		}
		_, err := New(cfg)
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), loosen.path) {
			t.Errorf("New with %s of mode %v: got %v; want a ConfigError naming it", loosen.path, loosen.mode, err)
		}
		if err := os.Chmod(filepath.Dir(reviewers), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A sticky folder others may write (as /tmp) cannot have root's file replaced.
	if err := os.Chmod(reviewers, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(reviewers), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err != nil {
		t.Errorf("New with the reviewers file in a sticky folder: %v", err)
	}
}

// TestCodeReadsOtherProcessesCommandLines: code a root worker runs as uid 65534 reads the
// command line of every process on the host (/proc/PID/cmdline is readable by any uid), a worker
// started with --codec-token TOKEN included (the codec server on the host's loopback decrypts any
// payload for that token), but not their environment (/proc/PID/environ is the owner's): so the
// worker refuses --codec-token on its command line with --backend local, and takes it from
// SANDBOXFLOW_CODEC_TOKEN (see worker's TestConfigRefusesCodecTokenFlagWithLocal).
func TestCodeReadsOtherProcessesCommandLines(t *testing.T) {
	need.Need(t, need.Root)
	b, _ := newBackend(t)
	const token = "cmdline-token-5c2e9a0b7d"
	worker := exec.Command("/bin/sh", "-c", "sleep 60; :", "worker", "--codec-token", token)
	worker.Env = []string{"SANDBOXFLOW_CODEC_TOKEN=env-token-8f1d3c"}
	worker.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-worker.Process.Pid, syscall.SIGKILL); _ = worker.Wait() })
	code := fmt.Sprintf(`pid = %d
cmd = open("/proc/%%d/cmdline" %% pid, "rb").read().split(b"\0")
print("cmdline=" + cmd[cmd.index(b"--codec-token") + 1].decode())
try:
    open("/proc/%%d/environ" %% pid, "rb").read()
    print("environ=read")
except OSError as e:
    print("environ=no:%%d" %% e.errno)
`, worker.Process.Pid)
	res, err := b.Run(context.Background(), check(t, guard.Request{Code: code}))
	if err != nil {
		t.Fatal(err)
	}
	if want := "cmdline=" + token + "\nenviron=no:13\n"; string(res.Stdout) != want {
		t.Errorf("got stdout %q stderr %q; want %q", res.Stdout, res.Stderr, want)
	}
}

// TestSessionStartupHooksDoNotRun: the same attacks against a session: nothing among the input
// files or in the env (past the guard) runs when the session's python3 starts or before a
// cell's code, and the cell prints what the run would.
func TestSessionStartupHooksDoNotRun(t *testing.T) {
	b, tmp := newBackend(t)
	marks := markerDir(t)
	probe, err := b.Run(context.Background(), check(t, guard.Request{Code: startuptest.PycProbe(marks)}))
	if err != nil || probe.ExitCode != 0 {
		t.Fatalf("pyc probe: %v exit %d stderr %q", err, probe.ExitCode, probe.Stderr)
	}
	in, err := startuptest.ParseProbe(probe.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range startuptest.Cases(in, marks) {
		t.Run(tc.Name, func(t *testing.T) {
			s, err := sessionPolicy.CheckSession(guard.SessionRequest{Settings: guard.Settings{Files: tc.Files}}, Name)
			if err != nil {
				t.Fatal(err)
			}
			for name, value := range tc.Env {
				s.Env = append(s.Env, guard.EnvVar{Name: name, Value: value})
			}
			sb, err := b.OpenSession(context.Background(), s)
			if err != nil {
				t.Fatalf("OpenSession: %v", err)
			}
			defer sb.Close(context.Background())
			c := guard.Cell{Index: 1, Language: tc.Language, Code: tc.Code, CodeDigest: guard.CellCodeDigest(tc.Language, tc.Code)}
			res, err := sb.RunCell(context.Background(), c, s.Limits)
			if err != nil {
				t.Fatalf("RunCell: %v", err)
			}
			entries, err := os.ReadDir(marks)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
				os.Remove(filepath.Join(marks, e.Name()))
			}
			if ran := startuptest.Markers(names); len(ran) > 0 {
				t.Errorf("hooks ran: %q", ran)
			}
			if string(res.Stdout) != tc.Stdout || strings.Contains(string(res.Stderr), "HOOK") || res.ExitCode != 0 {
				t.Errorf("got exit %d stdout %q stderr %q; want exit 0 and stdout %q", res.ExitCode, res.Stdout, res.Stderr, tc.Stdout)
			}
		})
	}
	assertEmpty(t, tmp)
}
