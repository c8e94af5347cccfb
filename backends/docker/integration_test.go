//go:build integration

package docker

// Integration tests against the real Docker daemon, the same suite under runc and runsc. Security
// properties are shown by running hostile code in the real sandbox and checking it was contained.
// They skip (with the reason) when Docker is unavailable, and fail instead when
// SANDBOXFLOW_REQUIRE_DOCKER=1. scripts/setup-docker.sh installs and starts what they need.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

const (
	// suiteLabel marks every container this test binary makes, so that the check after the suite
	// ignores other packages' containers on the same daemon.
	suiteLabel = "sandboxflow-test.suite"
	// workerSecretEnv is set in the worker (this test process) and must never reach a sandbox.
	workerSecretEnv = "SANDBOXFLOW_TEST_WORKER_SECRET"
)

var (
	suiteID      = randomHex(8)
	workerSecret = "worker-secret-" + randomHex(8)

	dockerOnce   sync.Once
	dockerReason string // empty when the daemon answers
	dockerInfo   engineVersion
)

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // test-only: crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

func TestMain(m *testing.M) {
	os.Setenv(workerSecretEnv, workerSecret)
	code := m.Run()
	if probeDocker() == "" {
		if err := checkNoSuiteContainers(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// checkNoSuiteContainers reports (and removes) any container of this suite left after all tests.
func checkNoSuiteContainers() error {
	eng, err := newDockerEngine("")
	if err != nil {
		return err
	}
	defer eng.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	left, err := eng.List(ctx, map[string]string{LabelManaged: "true", suiteLabel: suiteID})
	if err != nil {
		return fmt.Errorf("list containers after the suite: %w", err)
	}
	if len(left) == 0 {
		return nil
	}
	var ids []string
	for _, c := range left {
		ids = append(ids, c.ID[:12]+"("+c.State+", "+c.Labels[LabelWorkflowID]+")")
		_ = eng.Remove(ctx, c.ID)
	}
	return fmt.Errorf("%d sandbox containers left after the suite: %s", len(left), strings.Join(ids, " "))
}

func probeDocker() string {
	dockerOnce.Do(func() {
		eng, err := newDockerEngine("")
		if err != nil {
			dockerReason = err.Error()
			return
		}
		defer eng.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Ping(ctx); err != nil {
			dockerReason = fmt.Sprintf("docker daemon unreachable (%v); run scripts/setup-docker.sh", err)
			return
		}
		dockerInfo, err = eng.Version(ctx)
		if err != nil {
			dockerReason = err.Error()
			return
		}
		for _, img := range []string{testPythonImage(), testShellImage()} {
			ok, err := eng.ImagePresent(ctx, img)
			if err != nil || !ok {
				dockerReason = fmt.Sprintf("test image %s is missing (%v); run scripts/setup-docker.sh", img, err)
				return
			}
		}
	})
	return dockerReason
}

func unavailable(t *testing.T, reason string) {
	t.Helper()
	need.Missing(t, need.Docker, errors.New(reason))
}

func needDocker(t *testing.T) {
	t.Helper()
	if reason := probeDocker(); reason != "" {
		unavailable(t, reason)
	}
}

func testPythonImage() string {
	if img := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE"); img != "" {
		return img
	}
	return "sandboxflow-test-python:bookworm-full"
}

func testShellImage() string {
	if img := os.Getenv("SANDBOXFLOW_TEST_SH_IMAGE"); img != "" {
		return img
	}
	return "sandboxflow-test-busybox:latest"
}

// runtimeRunscCurrent is the current gVisor that scripts/setup-docker.sh builds from the Go module
// proxy (the version scripts/gvisor/go.mod pins) and registers next to Debian's runsc (20221219).
const runtimeRunscCurrent = "runsc-current"

// eachRuntime runs f under runc, under Debian's runsc and under runsc-current.
func eachRuntime(t *testing.T, f func(t *testing.T, rt string)) {
	t.Helper()
	needDocker(t)
	for _, rt := range []string{"runc", RuntimeRunsc, runtimeRunscCurrent} {
		t.Run(rt, func(t *testing.T) {
			if !slices.Contains(dockerInfo.Runtimes, rt) {
				unavailable(t, "the docker daemon has no runtime "+rt+"; run scripts/setup-docker.sh")
			}
			f(t, rt)
		})
	}
}

// eachSessionRuntime runs f under runc and Debian's runsc: the session suites that test how
// cells behave (timeouts, floods, files, egress, the reaper) rather than what the code can reach,
// which eachRuntime also runs under runsc-current, keep the cold make test within its time.
func eachSessionRuntime(t *testing.T, f func(t *testing.T, rt string)) {
	t.Helper()
	needDocker(t)
	for _, rt := range []string{"runc", RuntimeRunsc} {
		t.Run(rt, func(t *testing.T) {
			if !slices.Contains(dockerInfo.Runtimes, rt) {
				unavailable(t, "the docker daemon has no runtime "+rt+"; run scripts/setup-docker.sh")
			}
			f(t, rt)
		})
	}
}

// newTestBackend returns a cold backend on the real daemon for runtime rt, closed (removals
// waited for) when the test or benchmark ends.
func newTestBackend(t testing.TB, rt string, mod func(*Config)) *Backend {
	t.Helper()
	cfg := Config{Image: testPythonImage(), Labels: map[string]string{suiteLabel: suiteID}}
	if rt != "runc" {
		cfg.Runtime = rt
	}
	if mod != nil {
		mod(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	return b
}

var testPolicy = guard.Policy{
	Languages:        []string{guard.Python, guard.Shell},
	AllowOpenNetwork: true,
}

// checked applies testPolicy to a request and gives it an owner unique to the test.
func checked(t *testing.T, lang, code string, mod func(*guard.Request)) guard.Checked {
	t.Helper()
	req := guard.Request{Code: code, Language: lang, Settings: guard.Settings{Limits: guard.Limits{Timeout: 20 * time.Second}}}
	if mod != nil {
		mod(&req)
	}
	c, err := testPolicy.Check(req, Name)
	if err != nil {
		t.Fatal(err)
	}
	c.Owner = guard.Owner{WorkflowID: "test-" + randomHex(6), RunID: t.Name(), ActivityID: "1"}
	return c
}

func mustRun(t *testing.T, b *Backend, c guard.Checked) guard.Result {
	t.Helper()
	res, err := b.Run(context.Background(), c)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// keyValues parses "key=value" lines.
func keyValues(out []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// containersOf lists the containers of one run (by its workflow id label).
func containersOf(t *testing.T, workflowID string) []containerSummary {
	t.Helper()
	eng, err := newDockerEngine("")
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	list, err := eng.List(context.Background(), map[string]string{LabelWorkflowID: workflowID, suiteLabel: suiteID})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// hostProcessesWith returns host processes whose command line contains marker. Under runc the
// sandbox's processes are host processes; under runsc they live inside gVisor's kernel, and the
// container's removal is what shows they are gone.
func hostProcessesWith(marker string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			found = append(found, filepath.Base(d)+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// syscallELF returns a static x86-64 Linux program that makes one system call with the given
// arguments and exits with the call's errno (0 on success; a positive return value shows as
// 256 minus it). The sandbox runs it from a memfd (noexec does not apply to memory) to show which
// calls the seccomp profile lets through.
func syscallELF(nr int64, args ...int64) []byte {
	var code []byte
	le := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	code = append(append(code, 0x48, 0xB8), le(nr)...)                                     // mov rax, nr
	regs := [][]byte{{0x48, 0xBF}, {0x48, 0xBE}, {0x48, 0xBA}, {0x49, 0xBA}, {0x49, 0xB8}} // rdi rsi rdx r10 r8
	for i, op := range regs {
		var a int64
		if i < len(args) {
			a = args[i]
		}
		code = append(append(code, op...), le(a)...)
	}
	code = append(code,
		0x0F, 0x05, // syscall
		0x48, 0xF7, 0xD8, // neg rax
		0x48, 0x89, 0xC7, // mov rdi, rax
		0xB8, 0x3C, 0x00, 0x00, 0x00, // mov eax, 60 (exit)
		0x0F, 0x05, // syscall
	)
	const base, hdr = 0x400000, 64 + 56
	var b []byte
	b = append(b, 0x7F, 'E', 'L', 'F', 2, 1, 1, 0)
	b = append(b, make([]byte, 8)...)
	b = binary.LittleEndian.AppendUint16(b, 2)  // ET_EXEC
	b = binary.LittleEndian.AppendUint16(b, 62) // EM_X86_64
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint64(b, base+hdr) // entry
	b = binary.LittleEndian.AppendUint64(b, 64)       // program headers
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint16(b, 64)
	b = binary.LittleEndian.AppendUint16(b, 56)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint16(b, 0)
	size := uint64(hdr + len(code))
	b = binary.LittleEndian.AppendUint32(b, 1) // PT_LOAD
	b = binary.LittleEndian.AppendUint32(b, 5) // R+X
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint64(b, base)
	b = binary.LittleEndian.AppendUint64(b, base)
	b = binary.LittleEndian.AppendUint64(b, size)
	b = binary.LittleEndian.AppendUint64(b, size)
	b = binary.LittleEndian.AppendUint64(b, 0x1000)
	return append(b, code...)
}

// containmentCode runs inside the sandbox and reports what it could do, one key=value a line.
const containmentCode = `import errno, os
def out(k, v):
    print("%s=%s" % (k, v))
def err(e):
    return "no:" + errno.errorcode.get(e.errno, str(e.errno))
out("uid", os.getuid())
out("gid", os.getgid())
out("groups", ",".join(str(g) for g in sorted(set(os.getgroups()))))
status = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    status[k] = v.strip()
for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "Seccomp", "NoNewPrivs"):
    out(k, status.get(k, "?"))
ifaces = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
out("interfaces", ",".join(sorted(ifaces)))
def writable(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return "yes"
    except OSError as e:
        return err(e)
for name, path in (("root", "/probe"), ("etc", "/etc/probe"), ("usr", "/usr/probe"), ("work", "/work/probe"), ("tmp", "/tmp/probe")):
    out(name + "_writable", writable(path))
st = os.stat("/work")
out("work_owner", "%d:%d" % (st.st_uid, st.st_gid))
elf = open("sched_yield.elf", "rb").read()
def run(path_or_fd):
    pid = os.fork()
    if pid == 0:
        try:
            os.execve(path_or_fd, ["probe"], {})
        except OSError as e:
            os._exit(100 + e.errno)
        os._exit(99)
    _, s = os.waitpid(pid, 0)
    return os.WEXITSTATUS(s) if os.WIFEXITED(s) else -os.WTERMSIG(s)
for name, path in (("work", "/work/x.elf"), ("tmp", "/tmp/x.elf")):
    with open(path, "wb") as f:
        f.write(elf)
    os.chmod(path, 0o755)
    out("exec_" + name, run(path))
for name in ("sched_yield", "io_uring_setup", "unshare_user", "unshare_mount", "mount", "ptrace_pid1", "keyctl", "bpf"):
    fd = os.memfd_create(name)
    os.write(fd, open(name + ".elf", "rb").read())
    out("sys_" + name, run(fd))
environ = dict(os.environ)
out("env_greeting", environ.get("GREETING"))
out("env_path", environ.get("PATH"))
out("env_home", environ.get("HOME"))
seen = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            seen.append(open("/proc/%s/environ" % pid, "rb").read().decode("latin-1"))
        except OSError:
            pass
out("environs_read", len(seen))
out("all_environ", "|".join(seen).replace("\0", ";").replace("\n", " "))
out("docker_socket", any(os.path.exists(p) for p in ("/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/containerd")))
out("code_ppid_is_1", os.getppid() == 1)
def probe(path):
    try:
        open(path, "rb").read(1)
        return "yes"
    except OSError as e:
        return err(e)
out("pid1_environ", probe("/proc/1/environ"))
out("resolv", open("/etc/resolv.conf").read().strip().replace("\n", ";"))
out("resolv_writable", writable("/etc/resolv.conf"))
out("oom_score_adj", open("/proc/self/oom_score_adj").read().strip())
out("pid1_mem", probe("/proc/1/mem"))
out("pid1_fd1", probe("/proc/1/fd/1"))
def text(path):
    try:
        return open(path, "rb").read().decode("latin-1").strip()
    except OSError as e:
        return err(e)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
# prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap): 1 when cap (SETGID 6, SETUID 7, SETPCAP 8) is ambient.
def ambient(c):
    v = libc.prctl(47, 1, c, 0, 0)
    return str(v) if v >= 0 else "no:" + errno.errorcode.get(ctypes.get_errno(), "?")
out("ambient", ",".join(ambient(c) for c in (6, 7, 8)))
out("boot_id", text("/proc/sys/kernel/random/boot_id"))
out("timer_list", text("/proc/timer_list")[:40].replace("\n", " "))
`

func TestDockerContainment(t *testing.T) {
	need.Need(t, need.AMD64)
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		files := map[string][]byte{
			"sched_yield.elf":    syscallELF(24),
			"io_uring_setup.elf": syscallELF(425, 1, 0),
			"unshare_user.elf":   syscallELF(272, 0x10000000),
			"unshare_mount.elf":  syscallELF(272, 0x20000),
			"mount.elf":          syscallELF(165),
			"ptrace_pid1.elf":    syscallELF(101, 16, 1),
			"keyctl.elf":         syscallELF(250),
			"bpf.elf":            syscallELF(321),
		}
		c := checked(t, guard.Python, containmentCode, func(r *guard.Request) {
			r.Files = files
			r.Env = map[string]string{"GREETING": "hello"}
		})
		res := mustRun(t, b, c)
		if !res.OK {
			t.Fatalf("probe failed: exit %d, stderr %s", res.ExitCode, res.Stderr)
		}
		got := keyValues(res.Stdout)
		want := map[string]string{
			"gid": got["uid"], "groups": got["uid"],
			"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
			"CapBnd":        "0000000000000000",
			"Seccomp":       "2",
			"interfaces":    "lo",
			"work_writable": "yes", "tmp_writable": "yes",
			"work_owner": got["uid"] + ":" + got["uid"],
			// EACCES (13) from execve: noexec.
			"exec_work": "113", "exec_tmp": "113",
			// The harness works: an allowed call returns 0.
			"sys_sched_yield": "0",
			// EPERM from our profile. Without it io_uring_setup(1, NULL) fails with EFAULT (14) and
			// ptrace attaches to PID 1 and freezes it.
			"sys_io_uring_setup": "1", "sys_unshare_user": "1", "sys_unshare_mount": "1",
			"sys_mount": "1", "sys_ptrace_pid1": "1", "sys_keyctl": "1", "sys_bpf": "1",
			"env_greeting": "hello", "env_path": "/usr/local/bin:/usr/bin:/bin", "env_home": "/tmp",
			"docker_socket": "False", "code_ppid_is_1": "True",
			"ambient": "0,0,0",
		}
		if rt == "runc" {
			want["CapAmb"] = "0000000000000000"
			want["NoNewPrivs"] = "1"
		} else {
			// The supervisor (root inside gVisor with CAP_SETUID, CAP_SETGID and CAP_SETPCAP)
			// emptied the bounding set before it switched to the sandbox uid, which cleared the
			// rest. gVisor has no ambient set: no CapAmb line, and PR_CAP_AMBIENT fails with EINVAL.
			want["ambient"] = "no:EINVAL,no:EINVAL,no:EINVAL"
		}
		// The host's boot id identifies the host (and links runs on it): masked under runc, gVisor's
		// own under runsc. Docker's default masks stay: /proc/timer_list reads as empty.
		if hostBoot, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err != nil {
			t.Errorf("read the host's boot id: %v", err)
		} else if id := strings.TrimSpace(string(hostBoot)); strings.Contains(got["boot_id"], id) {
			t.Errorf("boot_id: the code read the host's boot id %q", got["boot_id"])
		}
		if rt == "runc" && got["timer_list"] != "" {
			t.Errorf("/proc/timer_list: got %q; want it masked (empty), as Docker's defaults mask it", got["timer_list"])
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: got %q; want %q", k, got[k], v)
			}
		}
		if got["resolv"] != "nameserver 127.0.0.1" {
			t.Errorf("resolv.conf: got %q; want only nameserver 127.0.0.1 (nothing of the host's resolver)", got["resolv"])
		}
		if got["oom_score_adj"] != "1000" {
			t.Errorf("oom_score_adj of the code: got %q; want 1000", got["oom_score_adj"])
		}
		for _, k := range []string{"root_writable", "etc_writable", "usr_writable", "resolv_writable"} {
			if !strings.HasPrefix(got[k], "no:") {
				t.Errorf("%s: got %q; want a failure (read-only root)", k, got[k])
			}
		}
		if uid, _ := strconv.Atoi(got["uid"]); uid < DefaultUIDFirst || uid > DefaultUIDLast {
			t.Errorf("uid: got %q; want one of the default range %d-%d", got["uid"], DefaultUIDFirst, DefaultUIDLast)
		}
		if n, _ := strconv.Atoi(got["environs_read"]); n < 1 {
			t.Errorf("environs_read: got %q; want the code to have read at least its own environment", got["environs_read"])
		}
		for _, k := range []string{"pid1_environ", "pid1_mem", "pid1_fd1"} {
			if k == "pid1_environ" && IsGVisor(rt) {
				// gVisor lets any uid read /proc/1/environ; it holds Docker's PATH and HOSTNAME
				// only (the worker's secret is checked below).
				continue
			}
			if !strings.HasPrefix(got[k], "no:") {
				t.Errorf("%s: got %q; want the supervisor's /proc entries out of the code's reach", k, got[k])
			}
		}
		for _, leak := range []string{workerSecret, workerSecretEnv} {
			if bytes.Contains(res.Stdout, []byte(leak)) {
				t.Errorf("the worker's env var %s reached the sandbox", workerSecretEnv)
			}
		}
	})
}

func TestDockerShell(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		c := checked(t, guard.Shell, "echo \"$GREETING\"; [ \"$(id -u)\" -ge 100000 ] && echo uid-in-range; pwd; cat in.txt; printf out > made.txt; exit 3", func(r *guard.Request) {
			r.Env = map[string]string{"GREETING": "hi there"}
			r.Files = map[string][]byte{"in.txt": []byte("input\n")}
		})
		res := mustRun(t, b, c)
		if got, want := string(res.Stdout), "hi there\nuid-in-range\n/work\ninput\n"; got != want {
			t.Errorf("stdout: got %q; want %q", got, want)
		}
		if res.ExitCode != 3 || res.OK {
			t.Errorf("exit: got %d ok=%t; want 3, false", res.ExitCode, res.OK)
		}
		if len(res.Files) != 1 || res.Files[0].Name != "made.txt" || string(res.Files[0].Content) != "out" {
			t.Errorf("files: got %+v; want made.txt only", res.Files)
		}
	})
}

// daemonCode ignores SIGTERM, leaves a double-forked daemon (running `sleep <marker>`) behind, and
// prints before it either exits or sleeps past the timeout.
func daemonCode(marker string, exitAtOnce bool) string {
	tail := "time.sleep(60)"
	if exitAtOnce {
		tail = "sys.exit(0)"
	}
	return fmt.Sprintf(`import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.execv("/bin/sleep", ["sleep", "%s"])
    os._exit(0)
time.sleep(0.3)
print("printed before the end")
%s
`, marker, tail)
}

func TestDockerTimeoutKillsEverything(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		marker := strconv.Itoa(900000 + int(time.Now().UnixNano()%99999))
		c := checked(t, guard.Python, daemonCode(marker, false), func(r *guard.Request) { r.Limits.Timeout = 2 * time.Second })
		// Through the guard wrapper, as the activity runs it.
		g := guard.New(b, testPolicy)
		start := time.Now()
		res, err := g.Run(context.Background(), c)
		elapsed := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.ExitCode != -1 || res.OK {
			t.Errorf("got timed_out=%t exit=%d ok=%t; want true, -1, false", res.TimedOut, res.ExitCode, res.OK)
		}
		if limit := 2*time.Second + guard.DefaultGrace; elapsed > limit {
			t.Errorf("returned after %s; want within timeout + grace (%s)", elapsed, limit)
		}
		if got := string(res.Stdout); got != "printed before the end\n" {
			t.Errorf("stdout: got %q; want the output printed before the timeout", got)
		}
		if procs := hostProcessesWith("sleep\x00" + marker); len(procs) > 0 {
			t.Errorf("the daemon outlived the run: %v", procs)
		}
		if err := b.WaitRemovals(context.Background()); err != nil {
			t.Fatal(err)
		}
		if left := containersOf(t, c.Owner.WorkflowID); len(left) > 0 {
			t.Errorf("container still exists after the run: %+v", left)
		}
	})
}

func TestDockerDaemonDoesNotOutliveRun(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		marker := strconv.Itoa(800000 + int(time.Now().UnixNano()%99999))
		c := checked(t, guard.Python, daemonCode(marker, true), func(r *guard.Request) { r.Limits.Timeout = 30 * time.Second })
		start := time.Now()
		res := mustRun(t, b, c)
		if !res.OK || string(res.Stdout) != "printed before the end\n" {
			t.Errorf("got ok=%t stdout %q stderr %q; want ok and the output", res.OK, res.Stdout, res.Stderr)
		}
		if elapsed := time.Since(start); elapsed > 20*time.Second {
			t.Errorf("the run waited %s for the daemon; want it to end with the code", elapsed)
		}
		if procs := hostProcessesWith("sleep\x00" + marker); len(procs) > 0 {
			t.Errorf("the daemon outlived the run: %v", procs)
		}
	})
}

func TestDockerCancelKillsAndRemoves(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		c := checked(t, guard.Python, "import time\nprint('running')\ntime.sleep(60)", nil)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel) // after the start, which takes seconds under runsc on a busy host
		start := time.Now()
		_, err := b.Run(ctx, c)
		var ie *guard.IntegrationError
		if !errors.As(err, &ie) || !ie.CodeMayHaveStarted || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v; want an IntegrationError (code may have started) wrapping context.Canceled", err)
		}
		if elapsed := time.Since(start); elapsed > 15*time.Second {
			t.Errorf("returned %s after start; want soon after the cancel", elapsed)
		}
		if left := containersOf(t, c.Owner.WorkflowID); len(left) > 0 {
			t.Errorf("container still exists when Run returned: %+v", left)
		}
	})
}

func TestDockerForkBomb(t *testing.T) {
	const bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
	eachRuntime(t, func(t *testing.T, rt string) {
		limits := []int64{0}
		if IsGVisor(rt) {
			// With runsc's default limit a fork bomb usually reaches the memory limit first; a
			// lower limit shows the sandbox's own exit (code 2) reported as a pids kill.
			limits = append(limits, 128)
		}
		for _, pids := range limits {
			t.Run(fmt.Sprintf("pids=%d", pids), func(t *testing.T) {
				b := newTestBackend(t, rt, func(c *Config) { c.PidsLimit = pids })
				c := checked(t, guard.Python, bomb, func(r *guard.Request) { r.Limits.Timeout = 5 * time.Second })
				start := time.Now()
				res := mustRun(t, b, c)
				if elapsed, limit := time.Since(start), 5*time.Second+guard.DefaultGrace; elapsed > limit {
					t.Errorf("returned after %s; want within %s", elapsed, limit)
				}
				want := []string{"pids_limit"}
				if IsGVisor(rt) && pids == 0 {
					want = []string{"pids_limit", "memory_limit"}
				}
				if !slices.Contains(want, res.Outcome.String()) || res.OK {
					t.Errorf("got limit_killed %q ok=%t exit=%d stderr %q; want one of %v", res.Outcome, res.OK, res.ExitCode, res.Stderr, want)
				}
				if !bytes.Contains(res.Stderr, []byte("limit")) {
					t.Errorf("stderr: got %q; want a note naming the limit", res.Stderr)
				}
			})
		}
	})
}

func TestDockerMemoryBomb(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		c := checked(t, guard.Python, "x = []\nwhile True:\n    x.append(b'x' * (16 << 20))\n", nil)
		res := mustRun(t, b, c)
		if res.Outcome != guard.OutcomeMemoryLimit || res.ExitCode != 137 || res.OK {
			t.Errorf("got limit_killed %q exit %d ok=%t; want memory, 137, false", res.Outcome, res.ExitCode, res.OK)
		}
		if !bytes.Contains(res.Stderr, []byte("memory limit (268435456 bytes) was reached")) {
			t.Errorf("stderr: got %q; want the memory note", res.Stderr)
		}
	})
}

func TestDockerTmpfsSize(t *testing.T) {
	const fill = `import errno, os
total = 0
fd = os.open("%s/fill", os.O_WRONLY | os.O_CREAT, 0o600)
chunk = b"x" * (1 << 20)
try:
    while True:
        total += os.write(fd, chunk)
except OSError as e:
    print("errno=" + errno.errorcode.get(e.errno, str(e.errno)))
print("total=%%d" %% total)
`
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, func(c *Config) { c.TmpTmpfsBytes = 16 << 20; c.WorkTmpfsBytes = 8 << 20 })
		for dir, size := range map[string]int64{"/tmp": 16 << 20, "/work": 8 << 20} {
			res := mustRun(t, b, checked(t, guard.Python, fmt.Sprintf(fill, dir), nil))
			got := keyValues(res.Stdout)
			total, _ := strconv.ParseInt(got["total"], 10, 64)
			if got["errno"] != "ENOSPC" || total > size || total < size-(1<<20) {
				t.Errorf("%s: got errno %q after %d bytes; want ENOSPC at about %d bytes (stderr %q)", dir, got["errno"], total, size, res.Stderr)
			}
		}
	})
}

func TestDockerLargeOutput(t *testing.T) {
	const code = `import sys
out, err = sys.stdout.buffer, sys.stderr.buffer
chunk = b"x" * (1 << 20)
for i in range(1024):
    out.write(chunk)
    if i % 64 == 0:
        err.write(b"e" * (1 << 20))
out.flush()
print("done", file=sys.stderr)
`
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		c := checked(t, guard.Python, code, func(r *guard.Request) { r.Limits.Timeout = 120 * time.Second })

		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		done := make(chan struct{})
		peakCh := make(chan uint64, 1)
		go func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			var m runtime.MemStats
			var peak uint64
			for {
				select {
				case <-done:
					peakCh <- peak
					return
				case <-tick.C:
					runtime.ReadMemStats(&m)
					peak = max(peak, m.HeapAlloc)
				}
			}
		}()
		start := time.Now()
		res := mustRun(t, b, c)
		close(done)
		peak := <-peakCh
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		t.Logf("1 GiB through the sandbox in %s; heap %d → peak %d; %d bytes allocated during the run",
			time.Since(start), before.HeapAlloc, peak, after.TotalAlloc-before.TotalAlloc)

		if res.ExitCode != 0 || res.TimedOut {
			t.Fatalf("got exit %d timed_out=%t stderr %q; want exit 0", res.ExitCode, res.TimedOut, res.Stderr)
		}
		if int64(len(res.Stdout)) != c.Limits.MaxStdoutBytes || !res.StdoutTruncated || bytes.Count(res.Stdout, []byte("x")) != len(res.Stdout) {
			t.Errorf("stdout: got %d bytes truncated=%t; want exactly the cap (%d) and truncated", len(res.Stdout), res.StdoutTruncated, c.Limits.MaxStdoutBytes)
		}
		if !res.StderrTruncated {
			t.Errorf("stderr: got truncated=false; want true")
		}
		const few = 8 << 20
		if peak > before.HeapAlloc+few {
			t.Errorf("heap grew from %d to %d during the run; want at most %d more", before.HeapAlloc, peak, few)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*few {
			t.Errorf("the worker allocated %d bytes during the run; want far less than the output's 1 GiB", alloc)
		}
	})
}

func TestDockerFiles(t *testing.T) {
	const code = `import hashlib, os
import helper
for name in ("data.bin", "dir/sub/x.txt", "helper.py"):
    print(name + "=" + hashlib.sha256(open(name, "rb").read()).hexdigest())
print("helper=" + helper.VALUE)
open("out.txt", "w").write("produced")
os.makedirs("nested/deep")
open("nested/deep/ok.bin", "wb").write(bytes(range(256)))
open("dir/sub/x.txt", "a").write(" changed")
os.symlink("/etc/passwd", "passwd")
os.symlink("/etc", "etc")
os.mkfifo("fifo")
for name in ("Dup.txt", "dup.txt", "a\\b", "a\nb", "CON", "-rf", "trailing."):
    open(name, "w").write("hostile")
open(b"\xff.txt", "wb").write(b"not utf-8")
open("big.bin", "wb").write(b"b" * 2000)
try:
    open("../x", "w").write("escape")
    print("escape=written")
except OSError as e:
    print("escape=" + str(e.errno))
`
	data := make([]byte, 0, 1024)
	for i := 0; i < 4; i++ {
		for j := 0; j < 256; j++ {
			data = append(data, byte(j))
		}
	}
	inputs := map[string][]byte{
		"data.bin":      data,
		"dir/sub/x.txt": []byte("x"),
		"helper.py":     []byte("VALUE = 'imported from /work'\n"),
	}
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		c := checked(t, guard.Python, code, func(r *guard.Request) {
			r.Files = inputs
			r.Limits.MaxFileBytes = 1000
		})
		res := mustRun(t, b, c)
		if !res.OK {
			t.Fatalf("code failed: exit %d stderr %s", res.ExitCode, res.Stderr)
		}
		got := keyValues(res.Stdout)
		for name, content := range inputs {
			sum := sha256.Sum256(content)
			if got[name] != hex.EncodeToString(sum[:]) {
				t.Errorf("input %s did not arrive byte for byte: sha256 %s", name, got[name])
			}
		}
		if got["helper"] != "imported from /work" {
			t.Errorf("import of an input file: got %q", got["helper"])
		}
		if got["escape"] == "written" {
			t.Errorf("code wrote ../x")
		}
		var names []string
		files := map[string]string{}
		for _, f := range res.Files {
			names = append(names, f.Name)
			files[f.Name] = string(f.Content)
			if f.Size != int64(len(f.Content)) {
				t.Errorf("%s: size %d for %d bytes", f.Name, f.Size, len(f.Content))
			}
		}
		sort.Strings(names)
		if want := []string{"dir/sub/x.txt", "nested/deep/ok.bin", "out.txt"}; !slices.Equal(names, want) {
			t.Errorf("produced files: got %q; want %q (links, fifos, unsafe, colliding, oversized and unchanged input files dropped)", names, want)
		}
		if files["out.txt"] != "produced" || files["dir/sub/x.txt"] != "x changed" || files["nested/deep/ok.bin"] != string(data[:256]) {
			t.Errorf("produced contents: got %q", files)
		}
		if !res.FilesTruncated {
			t.Errorf("files_truncated: got false; want true")
		}
	})
}

func TestDockerNetwork(t *testing.T) {
	const code = `print("interfaces=" + ",".join(sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])))`
	eachRuntime(t, func(t *testing.T, rt string) {
		// A network of the test's own, internal: no route anywhere; only the interface is checked.
		name := "sbf-test-" + suiteID + "-" + rt
		if out, err := exec.Command("docker", "network", "create", "--internal", name).CombinedOutput(); err != nil {
			t.Fatalf("docker network create: %v: %s", err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("docker", "network", "rm", name).CombinedOutput(); err != nil {
				t.Errorf("docker network rm: %v: %s", err, out)
			}
		})
		b := newTestBackend(t, rt, func(c *Config) { c.Network = name })
		want := map[bool]string{false: "lo", true: "eth0,lo"}
		if IsGVisor(rt) {
			want[true] = "lo" // runsc registered with --network=none has no network at all
		}
		for _, network := range []bool{false, true} {
			res := mustRun(t, b, checked(t, guard.Python, code, func(r *guard.Request) { r.Network = network }))
			if got := keyValues(res.Stdout)["interfaces"]; got != want[network] {
				t.Errorf("network=%t: got interfaces %q; want %q", network, got, want[network])
			}
		}
		// Before Close removes the containers the network cannot be removed.
		if err := b.WaitRemovals(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDockerIPC(t *testing.T) {
	const code = `import os
try:
    fd = os.open("/dev/shm/probe", os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"x" * 4096)
    print("shm=yes")
except OSError as e:
    print("shm=no")
`
	eachRuntime(t, func(t *testing.T, rt string) {
		for ipc, want := range map[string]string{"none": "no", "private": "yes"} {
			b := newTestBackend(t, rt, func(c *Config) { c.IPC = ipc })
			res := mustRun(t, b, checked(t, guard.Python, code, nil))
			if got := keyValues(res.Stdout)["shm"]; got != want {
				t.Errorf("ipc %s: got /dev/shm writable %q; want %q", ipc, got, want)
			}
		}
	})
}

func TestDockerImageErrors(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		for _, tt := range []struct {
			image, want string
		}{
			{"sandboxflow-test-missing:" + suiteID, "docker pull sandboxflow-test-missing:" + suiteID},
			{testShellImage(), "python3"},
		} {
			b := newTestBackend(t, rt, func(c *Config) { c.Image = tt.image })
			c := checked(t, guard.Python, "print(1)", nil)
			_, err := b.Run(context.Background(), c)
			var ce *guard.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(ce.Msg, tt.want) || !strings.Contains(ce.Msg, tt.image) {
				t.Errorf("image %s: got %v; want a ConfigError naming the image and %q", tt.image, err, tt.want)
			}
		}
	})
}

func TestDockerReap(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		// A deployment of its own: the suite's other backends share the default one, and a
		// container one of them could not remove is, rightly, an orphan this reap would take too.
		b := newTestBackend(t, rt, func(c *Config) { c.Deployment = "reap-test-" + rt + "-" + suiteID })
		c := checked(t, guard.Python, "print(1)", nil)
		for i := 0; i < 2; i++ {
			if _, _, err := b.acquire(context.Background(), c, ""); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := b.Reap(context.Background(), time.Hour); err != nil || n != 0 {
			t.Errorf("reap of young containers: got %d, %v; want 0, nil", n, err)
		}
		if err := b.WaitRemovals(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // Docker records creation times in whole seconds
		if n, err := b.Reap(context.Background(), time.Nanosecond); err != nil || n != 2 {
			t.Errorf("reap of orphans: got %d, %v; want 2, nil", n, err)
		}
		if left := containersOf(t, c.Owner.WorkflowID); len(left) > 0 {
			t.Errorf("containers left after the reap: %+v", left)
		}
	})
}

func TestDockerDoctor(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		cfg := Config{Image: testPythonImage(), Labels: map[string]string{suiteLabel: suiteID}}
		if rt != "runc" {
			cfg.Runtime = rt
		}
		for _, c := range Doctor(context.Background(), cfg) {
			t.Logf("%s: %t: %s", c.Name, c.OK, c.Detail)
			if !c.OK {
				t.Errorf("check %q failed: %s", c.Name, c.Detail)
			}
		}
		cfg.Image = testShellImage()
		checks := Doctor(context.Background(), cfg)
		last := checks[len(checks)-1]
		if last.Name != "docker probe run" || last.OK || !strings.Contains(last.Detail, "python3") {
			t.Errorf("doctor with an image without python3: got %+v; want a failed probe naming python3", last)
		}
	})
}
