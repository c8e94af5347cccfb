package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
)

func testChecked(code string) guard.Checked {
	c := guard.Checked{
		Language: guard.Python,
		Code:     code,
		CheckedSettings: guard.CheckedSettings{
			Backend: Name,
			Limits: guard.Limits{
				Timeout: 2 * time.Second, MaxStdoutBytes: 100, MaxStderrBytes: 200,
				MaxFiles: 4, MaxFileBytes: 64, MaxTotalFileBytes: 128,
			},
		},
		Owner: guard.Owner{WorkflowID: "wf", RunID: "run", ActivityID: "act"},
	}
	c.Digest = guard.Digest(&c)
	return c
}

func fakeBackend(t *testing.T, f *fakeEngine, cfg Config) *Backend {
	t.Helper()
	cfg.DeadlineSlack = 100 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := newBackend(cfg.WithDefaults(), f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

// okResult returns what a supervisor writes for a run that ends as r says: "stdout", "stderr"
// and "files" become output and file frames, "error" an error frame, "files_truncated" goes in
// the end frame and every other key in the exit report (exit_code 0 unless r says otherwise).
func okResult(t *testing.T, r map[string]any) []byte {
	t.Helper()
	var out []byte
	if msg, ok := r["error"].([]byte); ok {
		out = append(out, encodeFrame(frameError, 0, msg)...)
		return append(out, encodeFrame(frameEnd, 0, []byte("{}"))...)
	}
	exit := map[string]any{"exit_code": 0}
	end := map[string]any{}
	for k, v := range r {
		switch k {
		case "stdout":
			out = append(out, encodeFrame(frameStdout, 0, v.([]byte))...)
		case "stderr":
			out = append(out, encodeFrame(frameStderr, 0, v.([]byte))...)
		case "files", "files_truncated":
		default:
			exit[k] = v
		}
	}
	out = append(out, encodeFrame(frameExit, 0, mustJSON(t, exit))...)
	if files, ok := r["files"].([]map[string][]byte); ok {
		for _, f := range files {
			payload := append([]byte{byte(len(f["name"]) >> 8), byte(len(f["name"]))}, f["name"]...)
			out = append(out, encodeFrame(frameFile, 0, append(payload, f["content"]...))...)
		}
	}
	if v, ok := r["files_truncated"]; ok {
		end["files_truncated"] = v
	}
	return append(out, encodeFrame(frameEnd, 0, mustJSON(t, end))...)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRunErrorPaths(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name  string
		setup func(f *fakeEngine)
		// wantType is the guard type name of the error; "" means a result.
		wantType      string
		wantRetryable bool
		wantInMsg     string
		// wantRemoved is how many containers must be removed (0 when none was created).
		wantRemoved int
	}{
		{"daemon unreachable before create", func(f *fakeEngine) { f.createErr = fmt.Errorf("%w: dial unix", errUnreachable) },
			guard.TypeIntegrationError, true, "create container", 0},
		{"create fails", func(f *fakeEngine) { f.createErr = boom },
			guard.TypeIntegrationError, true, "create container", 0},
		{"image missing", func(f *fakeEngine) {
			f.createErr = fmt.Errorf("%w: no such image", errNotFound)
			f.imagePresent = false
		},
			guard.TypeConfigError, false, "docker pull sandboxflow-test-python:bookworm-full", 0},
		{"runtime unknown", func(f *fakeEngine) { f.createErr = fmt.Errorf("%w: unknown runtime", errInvalid) },
			guard.TypeConfigError, false, "refused the container settings", 0},
		{"attach fails", func(f *fakeEngine) { f.attachErr = boom },
			guard.TypeIntegrationError, true, "attach container", 1},
		{"start fails", func(f *fakeEngine) { f.startErr = boom },
			guard.TypeIntegrationError, true, "start container", 1},
		{"request written in part", func(f *fakeEngine) { f.writeN = 10; f.writeErr = boom; f.hang = true },
			guard.TypeIntegrationError, true, "write request", 1},
		{"request written, then the write fails", func(f *fakeEngine) { f.writeErr = boom; f.hang = true },
			guard.TypeIntegrationError, false, "write request", 1},
		{"start succeeded, then wait fails", func(f *fakeEngine) { f.stdout = okResult(t, nil); f.waitErr = boom },
			guard.TypeIntegrationError, false, "wait for container", 1},
		{"inspect fails", func(f *fakeEngine) { f.stdout = okResult(t, nil); f.inspectErr = boom },
			guard.TypeIntegrationError, false, "inspect container", 1},
		{"output connection breaks", func(f *fakeEngine) { f.demuxErr = boom },
			guard.TypeIntegrationError, false, "read output", 1},
		{"unframed output", func(f *fakeEngine) { f.stdout = []byte("hello from the code\n") },
			guard.TypeIntegrationError, false, "frame of", 1},
		{"two results", func(f *fakeEngine) { f.stdout = append(okResult(t, nil), okResult(t, nil)...) },
			guard.TypeIntegrationError, false, "after its end frame", 1},
		{"unknown frame type", func(f *fakeEngine) { f.stdout = encodeFrame(42, 0, nil) },
			guard.TypeIntegrationError, false, "unknown type 42", 1},
		{"frame on a channel no one opened", func(f *fakeEngine) { f.stdout = encodeFrame(frameTunnelData, 7, []byte("x")) },
			guard.TypeIntegrationError, false, "channel 7", 1},
		{"unreadable exit report", func(f *fakeEngine) { f.stdout = encodeFrame(frameExit, 0, []byte("{")) },
			guard.TypeIntegrationError, false, "exit report", 1},
		{"oversized output", func(f *fakeEngine) {
			f.stdout = bytes.Repeat(encodeFrame(frameStdout, 0, make([]byte, 64<<10)), 4)
		}, guard.TypeIntegrationError, false, "over the result bound", 1},
		{"image cannot host the supervisor", func(f *fakeEngine) { f.stdout = encodeFrame(frameConfigError, 0, []byte("no ctypes")) },
			guard.TypeConfigError, false, "no ctypes", 1},
		{"image declares volumes", func(f *fakeEngine) { f.imageVolumes = []string{"/data"} },
			guard.TypeConfigError, false, "VOLUME", 0},
		{"bootstrap reports an error", func(f *fakeEngine) { f.stdout = okResult(t, map[string]any{"error": []byte("bad request: x")}) },
			guard.TypeIntegrationError, false, "bad request: x", 1},
		{"exit 127 without output: no python3", func(f *fakeEngine) { f.exitCode = 127; f.stderr = []byte("exec python3 failed") },
			guard.TypeConfigError, false, "python3", 1},
		{"exit without a result", func(f *fakeEngine) { f.exitCode = 137 },
			guard.TypeIntegrationError, false, "exit code 137", 1},
		{"output, then the supervisor vanishes", func(f *fakeEngine) {
			f.stdout = encodeFrame(frameStdout, 0, []byte("partial"))
			f.exitCode = 137
		}, guard.TypeIntegrationError, false, "without a report", 1},
		{"removal fails after a good run", func(f *fakeEngine) { f.stdout = okResult(t, nil); f.removeErr = boom },
			"", false, "", 0},
		{"counters known: nothing more is asked of the daemon", func(f *fakeEngine) {
			f.stdout = okResult(t, map[string]any{"limits_known": true})
			f.waitErr, f.inspectErr = boom, boom
		}, "", false, "", 1},
		{"container already gone at removal", func(f *fakeEngine) {
			f.stdout = okResult(t, nil)
			f.removeErr = fmt.Errorf("%w: no such container", errNotFound)
		}, "", false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			tt.setup(f)
			b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full"})
			res, err := b.Run(context.Background(), testChecked("print(1)"))
			if err := b.WaitRemovals(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := guard.TypeOf(err); got != tt.wantType {
				t.Fatalf("error type: got %q (%v); want %q", got, err, tt.wantType)
			}
			if err != nil {
				if got := guard.Retryable(err); got != tt.wantRetryable {
					t.Errorf("retryable: got %t; want %t (%v)", got, tt.wantRetryable, err)
				}
				if !strings.Contains(err.Error(), tt.wantInMsg) {
					t.Errorf("error: got %q; want it to contain %q", err, tt.wantInMsg)
				}
			} else if !res.OK {
				t.Errorf("result: got %+v; want OK", res)
			}
			if got := len(f.removedIDs()); got != tt.wantRemoved {
				t.Errorf("removed containers: got %d; want %d", got, tt.wantRemoved)
			}
			if len(f.created) > 0 && tt.wantRemoved == 0 && f.removeErr == nil {
				t.Errorf("a created container was not removed")
			}
		})
	}
}

func TestRunCreateNotFoundNetwork(t *testing.T) {
	f := newFake()
	f.createErr = fmt.Errorf("%w: network sbf not found", errNotFound)
	f.networkPresent = false
	b := fakeBackend(t, f, Config{Network: "sbf"})
	c := testChecked("print(1)")
	c.Network = true
	_, err := b.Run(context.Background(), c)
	var ce *guard.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(ce.Msg, `network "sbf" does not exist`) {
		t.Fatalf("got %v; want a ConfigError naming the network", err)
	}
}

func TestRunResultMapping(t *testing.T) {
	c := testChecked("print(1)")
	tests := []struct {
		name    string
		setup   func(f *fakeEngine)
		runtime string
		check   func(t *testing.T, res guard.Result)
	}{
		{"plain result, limits re-applied", func(f *fakeEngine) {
			f.stdout = okResult(t, map[string]any{
				"exit_code": 3, "stdout": bytes.Repeat([]byte("o"), 500), "stderr": []byte("e"),
				"files": []map[string][]byte{
					{"name": []byte("ok.txt"), "content": []byte("fine")},
					{"name": []byte("\xff.txt"), "content": []byte("bad name")},
					{"name": []byte("../x"), "content": []byte("escape")},
					{"name": []byte("big"), "content": bytes.Repeat([]byte("b"), 65)},
				},
			})
		}, "", func(t *testing.T, res guard.Result) {
			if res.ExitCode != 3 || res.OK || res.TimedOut {
				t.Errorf("exit: got %d ok=%t timed_out=%t; want 3, false, false", res.ExitCode, res.OK, res.TimedOut)
			}
			if len(res.Stdout) != 100 || !res.StdoutTruncated {
				t.Errorf("stdout: got %d bytes truncated=%t; want 100, true", len(res.Stdout), res.StdoutTruncated)
			}
			if len(res.Files) != 1 || res.Files[0].Name != "ok.txt" || string(res.Files[0].Content) != "fine" || res.Files[0].Size != 4 {
				t.Errorf("files: got %+v; want only ok.txt", res.Files)
			}
			if !res.FilesTruncated {
				t.Errorf("files_truncated: got false; want true")
			}
			if res.Backend != Name || res.Digest != c.Digest {
				t.Errorf("backend, digest: got %q %q; want %q %q", res.Backend, res.Digest, Name, c.Digest)
			}
		}},
		{"oom kill reported by the daemon", func(f *fakeEngine) {
			f.stdout = okResult(t, map[string]any{"exit_code": 137, "stderr": bytes.Repeat([]byte("e"), 200)})
			f.state.OOMKilled = true
		}, "", func(t *testing.T, res guard.Result) {
			if res.Outcome != guard.OutcomeMemoryLimit || res.OK {
				t.Errorf("limit: got %q ok=%t; want memory, false", res.Outcome, res.OK)
			}
			if !bytes.Contains(res.Stderr, []byte("memory limit")) || len(res.Stderr) > 200 {
				t.Errorf("stderr: got %q; want the memory note within the cap", res.Stderr)
			}
		}},
		{"oom kill of a helper, code still exited 0", func(f *fakeEngine) {
			f.stdout = okResult(t, map[string]any{"oom_kills": 1})
		}, "", func(t *testing.T, res guard.Result) {
			if res.Outcome.LimitKill() || !res.OK || !bytes.Contains(res.Stderr, []byte("memory limit")) {
				t.Errorf("got limit %q ok=%t stderr %q; want no limit kill, ok, a note", res.Outcome, res.OK, res.Stderr)
			}
		}},
		{"pids limit hit and timed out", func(f *fakeEngine) {
			f.stdout = okResult(t, map[string]any{"exit_code": -1, "timed_out": true, "pids_limit_hit": true})
		}, "", func(t *testing.T, res guard.Result) {
			if res.Outcome != guard.OutcomePidsLimit || res.TimedOut || !bytes.Contains(res.Stderr, []byte("process limit (64)")) {
				t.Errorf("got limit %q timed_out=%t stderr %q; want pids_limit, not timed out, a note", res.Outcome, res.TimedOut, res.Stderr)
			}
		}},
		{"oom kill without a result", func(f *fakeEngine) {
			f.exitCode = 137
			f.state.OOMKilled = true
		}, "", func(t *testing.T, res guard.Result) {
			if res.Outcome != guard.OutcomeMemoryLimit || res.ExitCode != 137 {
				t.Errorf("got limit %q exit %d; want memory, 137", res.Outcome, res.ExitCode)
			}
		}},
		{"runsc sandbox killed (137) without a result, the daemon unaware", func(f *fakeEngine) {
			f.exitCode = 137
		}, RuntimeRunsc, func(t *testing.T, res guard.Result) {
			if res.Outcome != guard.OutcomeMemoryLimit || res.OK || res.ExitCode != 137 || !bytes.Contains(res.Stderr, []byte("memory limit")) {
				t.Errorf("got limit %q ok=%t exit %d stderr %q; want memory, false, 137, a note", res.Outcome, res.OK, res.ExitCode, res.Stderr)
			}
		}},
		{"runsc sandbox exits 2 without a result", func(f *fakeEngine) {
			f.exitCode = 2
		}, RuntimeRunsc, func(t *testing.T, res guard.Result) {
			if res.Outcome != guard.OutcomePidsLimit || res.OK || !bytes.Contains(res.Stderr, []byte("process limit (512)")) {
				t.Errorf("got limit %q ok=%t stderr %q; want pids, false, a note", res.Outcome, res.OK, res.Stderr)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			tt.setup(f)
			b := fakeBackend(t, f, Config{Runtime: tt.runtime})
			res, err := b.Run(context.Background(), c)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			tt.check(t, res)
		})
	}
}

func TestRunSendsRequestOnStdinOnly(t *testing.T) {
	f := newFake()
	f.stdout = okResult(t, nil)
	b := fakeBackend(t, f, Config{Labels: map[string]string{"team": "a"}})
	c := testChecked("print('the secret code')")
	c.Files = []guard.InputFile{{Name: "in.txt", Content: []byte("data")}}
	c.Env = []guard.EnvVar{{Name: "TOKEN", Value: "v"}}
	c.Digest = guard.Digest(&c)
	if _, err := b.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	spec := f.created[0]
	for _, arg := range append(append([]string{}, spec.Cmd...), spec.Env...) {
		if strings.Contains(arg, "the secret code") || strings.Contains(arg, "TOKEN") {
			t.Errorf("container command or env carries the request: %q", arg)
		}
	}
	var req supRequest
	if len(f.stdin) < frameHeaderBytes || frameType(f.stdin[4]) != frameRequest {
		t.Fatalf("stdin does not start with a request frame: %q", f.stdin)
	}
	if err := json.Unmarshal(f.stdin[frameHeaderBytes:], &req); err != nil {
		t.Fatalf("stdin is not the request document: %v", err)
	}
	if string(req.Code) != c.Code || len(req.Files) != 1 || string(req.Files[0].Content) != "data" || string(req.Env[0].Value) != "v" || req.TimeoutMS != 2000 {
		t.Errorf("request: got %+v; want the code, file, env and timeout", req)
	}
	if bytes.ContainsAny(f.stdin, "\\") {
		t.Errorf("request has escapes the bootstrap's parser refuses: %s", f.stdin)
	}
	want := map[string]string{
		LabelManaged: "true", LabelWorkflowID: "wf", LabelRunID: "run", LabelActivityID: "act",
		LabelRuntime: "runc", LabelDigest: c.Digest, "team": "a",
	}
	for k, v := range want {
		if spec.Labels[k] != v {
			t.Errorf("label %s: got %q; want %q", k, spec.Labels[k], v)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, spec.Labels[LabelCreated]); err != nil {
		t.Errorf("label %s: %v", LabelCreated, err)
	}
}

// An input file Python would import as a native extension module, or an env name that makes a
// library load native code from a file, is refused before any container exists (Debian's gVisor
// maps such files executable despite noexec); other names pass.
func TestNativeModulesRefused(t *testing.T) {
	for _, name := range []string{"mod.so", "mod.cpython-311-x86_64-linux-gnu.so", "pkg/mod.abi3.so", "x-y.so"} {
		f := newFake()
		b := fakeBackend(t, f, Config{})
		c := testChecked("import mod")
		c.Files = []guard.InputFile{{Name: "mod.py", Content: []byte("VALUE = 1\n")}, {Name: name, Content: []byte("\x7fELF")}}
		_, err := b.Run(context.Background(), c)
		var te *guard.ToolUsageError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), name) || len(f.created) != 0 {
			t.Errorf("input %s: got %v and %d containers; want a ToolUsageError naming it and none", name, err, len(f.created))
		}
	}
	for _, name := range []string{"libfoo.so.1", "notes.so.txt", "mod.py"} {
		if err := refuseNativeLoaders(guard.Checked{CheckedSettings: guard.CheckedSettings{Files: []guard.InputFile{{Name: name}}}}); err != nil {
			t.Errorf("input %s: got %v; want it accepted", name, err)
		}
	}
	// OPENSSL_CONF naming an input openssl.cnf whose provider is an input evil.bin ran that
	// file's constructor on `import hashlib` under Debian's runsc.
	for _, name := range nativeLoaderEnv {
		f := newFake()
		b := fakeBackend(t, f, Config{})
		c := testChecked("import hashlib")
		c.Env = []guard.EnvVar{{Name: name, Value: "/work/openssl.cnf"}}
		_, err := b.Run(context.Background(), c)
		var te *guard.ToolUsageError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), name) || len(f.created) != 0 {
			t.Errorf("env %s: got %v and %d containers; want a ToolUsageError naming it and none", name, err, len(f.created))
		}
	}
	if err := refuseNativeLoaders(guard.Checked{CheckedSettings: guard.CheckedSettings{Env: []guard.EnvVar{{Name: "SSL_CERT_FILE", Value: "/work/ca.pem"}}}}); err != nil {
		t.Errorf("SSL_CERT_FILE: got %v; want it accepted (a file of data)", err)
	}
}

// The supervisor starts the code's Python with the flags every backend uses.
func TestSupervisorPythonFlags(t *testing.T) {
	var line string
	for _, l := range strings.Split(supervisorSource, "\n") {
		if strings.HasPrefix(l, "PY_FLAGS = ") {
			line = strings.TrimPrefix(l, "PY_FLAGS = ")
		}
	}
	var got []string
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("supervisor.py's PY_FLAGS %q: %v", line, err)
	}
	if want := pysource.Flags(nil, ""); !slices.Equal(got, want) {
		t.Errorf("supervisor.py's PY_FLAGS: got %q; want pysource.Flags %q", got, want)
	}
	prefixed := pysource.Flags([]string{"__pycache__/m.pyc"}, "/p")
	if !slices.Equal(prefixed[len(got):], []string{"-X", "pycache_prefix=/p"}) || !strings.Contains(supervisorSource, `["-X", "pycache_prefix=" + PYCACHE_PREFIX]`) {
		t.Errorf("the pycache prefix flags differ: pysource %q", prefixed)
	}
}

func TestSpecHardening(t *testing.T) {
	f := newFake()
	b := fakeBackend(t, f, Config{Network: "sbf-net", MemoryBytes: 128 << 20, PidsLimit: 50, CPUs: 0.5})
	c := testChecked("print(1)")
	sb := &sandbox{name: "n", uid: 100123, image: imageInfo{ID: "sha256:x"}}
	s := b.spec(&c, sb, engineVersion{})
	checks := []struct {
		name      string
		got, want any
	}{
		{"network", s.NetworkMode, "none"},
		{"read-only root", s.ReadonlyRootfs, true},
		{"cap drop", strings.Join(s.CapDrop, ","), "ALL"},
		{"no-new-privileges", s.SecurityOpt[0], "no-new-privileges"},
		{"seccomp", strings.HasPrefix(s.SecurityOpt[1], "seccomp={"), true},
		{"user", s.User, "100123:100123"},
		{"pids", s.PidsLimit, int64(50)},
		{"memory", s.MemoryBytes, int64(128 << 20)},
		{"cpus", s.NanoCPUs, int64(5e8)},
		{"ipc", s.IPCMode, "none"},
		{"shm", s.Tmpfs["/dev/shm"], "rw,noexec,nosuid,nodev,size=67108864,uid=100123,gid=100123,mode=0700"},
		{"init: the supervisor is PID 1", s.Init, false},
		{"work tmpfs", s.Tmpfs["/work"], "rw,noexec,nosuid,nodev,size=67108864,uid=100123,gid=100123,mode=0700"},
		{"tmp tmpfs", s.Tmpfs["/tmp"], "rw,noexec,nosuid,nodev,size=67108864,uid=100123,gid=100123,mode=0700"},
		{"dns", strings.Join(s.DNS, ","), "127.0.0.1"},
		{"oom score adj", s.OomScoreAdj, oomScoreAdj},
		{"image by ID", s.Image, "sha256:x"},
		{"workdir", s.WorkDir, "/work"},
		{"command", strings.Join(s.Cmd[:4], " "), "python3 -I -S -c"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v; want %v", ch.name, ch.got, ch.want)
		}
	}
	masked := b.spec(&c, sb, engineVersion{NCPU: 2}).MaskedPaths
	for _, p := range append(slices.Clone(dockerMaskedPaths), "/proc/sys/kernel/random/boot_id",
		"/sys/devices/system/cpu/cpu1/thermal_throttle") {
		if !slices.Contains(masked, p) {
			t.Errorf("masked paths: got %q; want %s among them", masked, p)
		}
	}
	if got := b.spec(&c, sb, engineVersion{}).CapAdd; got != nil {
		t.Errorf("cap add under runc: got %q; want none", got)
	}
	gv := fakeBackend(t, f, Config{Runtime: RuntimeRunsc})
	if got := strings.Join(gv.spec(&c, sb, engineVersion{}).CapAdd, ","); got != "SETUID,SETGID,SETPCAP" {
		t.Errorf("cap add under runsc: got %q; want SETUID,SETGID,SETPCAP (the supervisor's, dropped for the code)", got)
	}
	c.Network = true
	if got := b.spec(&c, sb, engineVersion{}).NetworkMode; got != "sbf-net" {
		t.Errorf("network with network=true: got %q; want sbf-net", got)
	}
}

func TestRunDeadlineKillsAndRemoves(t *testing.T) {
	f := newFake()
	f.hang = true
	f.state.Running = true // the code outran its supervisor's timeout: the container still runs
	b := fakeBackend(t, f, Config{})
	c := testChecked("import time; time.sleep(60)")
	c.Limits.Timeout = 200 * time.Millisecond
	start := time.Now()
	res, err := b.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != -1 || !bytes.Contains(res.Stderr, []byte("did not report")) {
		t.Errorf("got %+v; want a timeout with a note", res)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("returned after %s; want about timeout + slack (300ms)", elapsed)
	}
	if len(f.killed) != 1 || len(f.removedIDs()) != 1 {
		t.Errorf("killed %v removed %v; want the container killed and removed before Run returned", f.killed, f.removedIDs())
	}
}

func TestRunCancelKillsAndRemoves(t *testing.T) {
	for _, tt := range []struct {
		name     string
		cancel   func() (context.Context, context.CancelFunc)
		wantErr  bool
		timedOut bool
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, true, false},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Hour)
		}, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.hang = true
			b := fakeBackend(t, f, Config{})
			c := testChecked("import time; time.sleep(60)")
			c.Limits.Timeout = time.Minute
			ctx, cancel := tt.cancel()
			defer cancel()
			if tt.timedOut {
				ctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
			} else {
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			res, err := b.Run(ctx, c)
			if tt.wantErr {
				var ie *guard.IntegrationError
				if !errors.As(err, &ie) || !ie.CodeMayHaveStarted || !errors.Is(err, context.Canceled) {
					t.Fatalf("got %v; want an IntegrationError (code may have started) wrapping context.Canceled", err)
				}
			} else if err != nil || !res.TimedOut {
				t.Fatalf("got %+v, %v; want a timed-out result", res, err)
			}
			if len(f.removedIDs()) != 1 {
				t.Errorf("removed %v; want the container removed before Run returned", f.removedIDs())
			}
		})
	}
}

func TestRunRefusesUnknownLanguage(t *testing.T) {
	f := newFake()
	b := fakeBackend(t, f, Config{})
	c := testChecked("print(1)")
	c.Language = "ruby"
	_, err := b.Run(context.Background(), c)
	if guard.TypeOf(err) != guard.TypeConfigError || len(f.created) != 0 {
		t.Fatalf("got %v with %d containers; want a ConfigError and none created", err, len(f.created))
	}
}

func TestReap(t *testing.T) {
	now := time.Now()
	f := newFake()
	f.list = []containerSummary{
		{ID: "old1", Created: now.Add(-2 * time.Hour)},
		{ID: "old2", Created: now.Add(-90 * time.Minute)},
		{ID: "young", Created: now.Add(-time.Minute)},
	}
	b := fakeBackend(t, f, Config{})
	n, err := b.Reap(context.Background(), time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("reap: got %d, %v; want 2, nil", n, err)
	}
	if got := strings.Join(f.removedIDs(), ","); got != "old1,old2" {
		t.Errorf("removed: got %s; want old1,old2", got)
	}

	f.removed = nil
	f.removeErr = fmt.Errorf("%w: gone", errNotFound)
	if n, err := b.Reap(context.Background(), time.Hour); err != nil || n != 0 {
		t.Errorf("reap of containers already gone: got %d, %v; want 0, nil", n, err)
	}
	f.removeErr = errors.New("daemon busy")
	if _, err := b.Reap(context.Background(), time.Hour); err == nil || !strings.Contains(err.Error(), "old1") || !strings.Contains(err.Error(), "old2") {
		t.Errorf("reap with failing removals: got %v; want both failures reported", err)
	}
	f.listErr = errors.New("no list")
	if _, err := b.Reap(context.Background(), time.Hour); err == nil {
		t.Errorf("reap with a failing list: got nil; want an error")
	}
	if _, err := b.Reap(context.Background(), 0); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("reap with threshold 0: got %v; want a ConfigError", err)
	}
}

// TestRemoveRetriesAConflict: a force-remove that meets the container still exiting (Docker's
// 409 "Could not kill running container ..., is not running", seen under gVisor) is tried again
// instead of leaving the container to the reaper; a conflict that does not clear is reported
// after a bounded number of tries.
func TestRemoveRetriesAConflict(t *testing.T) {
	f := newFake()
	b := fakeBackend(t, f, Config{RemoveRetryWait: time.Millisecond})
	f.removeConflicts = 2
	if err := b.remove(context.Background(), "exiting", true); err != nil || f.removeCalls != 3 {
		t.Fatalf("remove after two conflicts: got %v after %d calls; want nil after 3", err, f.removeCalls)
	}
	if got := strings.Join(f.removedIDs(), ","); got != "exiting" {
		t.Errorf("removed: got %q; want exiting", got)
	}
	f.removeConflicts, f.removeCalls = 1000, 0
	err := b.remove(context.Background(), "stuck", true)
	if !errors.Is(err, errConflict) || f.removeCalls != removeConflictRetries+1 {
		t.Errorf("remove of a container that stays in conflict: got %v after %d calls; want the conflict after %d", err, f.removeCalls, removeConflictRetries+1)
	}
	f.removeConflicts, f.removeCalls, f.removeErr = 0, 0, errors.New("daemon busy")
	if err := b.remove(context.Background(), "busy", true); err == nil || f.removeCalls != 1 {
		t.Errorf("remove failing otherwise: got %v after %d calls; want the error after 1 (no retry)", err, f.removeCalls)
	}
}

func TestDoctorWithFake(t *testing.T) {
	f := newFake()
	f.version = engineVersion{ServerVersion: "20.10.24", APIVersion: "1.41", ClientAPI: "1.41", Runtimes: []string{"runc"},
		CgroupVersion: "2", SecurityOptions: []string{"name=seccomp,profile=default", "name=apparmor"}}
	f.imagePresent = false
	b := fakeBackend(t, f, Config{Runtime: RuntimeRunsc})
	got := map[string]bool{}
	for _, c := range b.doctor(context.Background()) {
		got[c.Name] = c.OK
	}
	want := map[string]bool{
		"docker daemon reachable": true, "docker API version": true, "docker image present": false,
		"docker runtime present": false, "docker probe run": false,
		"docker user namespaces": true, "docker AppArmor": true, "docker cgroup version": true,
	}
	for k, v := range want {
		if ok, found := got[k]; !found || ok != v {
			t.Errorf("check %q: got %t (present %t); want %t", k, ok, found, v)
		}
	}

	details := map[string]string{}
	for _, c := range b.doctor(context.Background()) {
		details[c.Name] = c.Detail
	}
	for name, want := range map[string]string{"docker user namespaces": "not remapped", "docker AppArmor": "enabled", "docker cgroup version": "cgroup v2"} {
		if !strings.Contains(details[name], want) {
			t.Errorf("%s: got %q; want it to say %q", name, details[name], want)
		}
	}

	f2 := newFake()
	f2.pingErr = fmt.Errorf("%w: dial", errUnreachable)
	b2 := fakeBackend(t, f2, Config{})
	checks := b2.doctor(context.Background())
	if len(checks) != 1 || checks[0].OK {
		t.Errorf("doctor with an unreachable daemon: got %+v; want one failed check", checks)
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tt := range []struct {
		v, min string
		want   bool
	}{
		{"1.41", "1.32", true}, {"1.32", "1.32", true}, {"1.31", "1.32", false}, {"2.0", "1.32", true}, {"1.9", "1.32", false},
	} {
		if got := versionAtLeast(tt.v, tt.min); got != tt.want {
			t.Errorf("versionAtLeast(%s, %s): got %t; want %t", tt.v, tt.min, got, tt.want)
		}
	}
}

// TestUnreachableDaemon uses the real client against a socket where no daemon listens.
func TestUnreachableDaemon(t *testing.T) {
	host := "unix://" + t.TempDir() + "/no-daemon.sock"
	b, err := New(Config{DockerHost: host})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	_, err = b.Run(context.Background(), testChecked("print(1)"))
	var ie *guard.IntegrationError
	if !errors.As(err, &ie) || ie.CodeMayHaveStarted || !guard.Retryable(err) || !errors.Is(err, errUnreachable) {
		t.Fatalf("got %v; want a retryable IntegrationError for an unreachable daemon", err)
	}
	checks := Doctor(context.Background(), Config{DockerHost: host})
	if last := checks[len(checks)-1]; last.Name != "docker daemon reachable" || last.OK {
		t.Errorf("doctor: got %+v; want the daemon check to fail last", checks)
	}
}

func TestReapIsScopedToTheDeployment(t *testing.T) {
	f := newFake()
	b := fakeBackend(t, f, Config{Deployment: "ns/queue-a"})
	var asked map[string]string
	f.listHook = func(labels map[string]string) { asked = labels }
	if _, err := b.Reap(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if asked[LabelDeployment] != "ns/queue-a" || asked[LabelManaged] != "true" {
		t.Errorf("reaper's label filter: got %v; want managed and deployment ns/queue-a", asked)
	}
	if _, err := b.Run(context.Background(), testChecked("print(1)")); err == nil {
		t.Fatal("run without output: got no error")
	}
	if got := f.created[0].Labels[LabelDeployment]; got != "ns/queue-a" {
		t.Errorf("container's deployment label: got %q; want ns/queue-a", got)
	}
	if got := f.created[0].Labels[LabelImageID]; !strings.HasPrefix(got, "sha256:") {
		t.Errorf("container's image id label: got %q; want sha256:...", got)
	}
}

func TestRunRecordsImageIDAndUIDs(t *testing.T) {
	f := newFake()
	f.stdout = okResult(t, map[string]any{"signal": 9, "exit_code": 137})
	b := fakeBackend(t, f, Config{UIDs: UIDRange{First: 200000, Last: 200000}})
	res, err := b.Run(context.Background(), testChecked("print(1)"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.ImageID, "sha256:") || res.Signal != 9 || res.ExitCode != 137 {
		t.Errorf("got image %q signal %d exit %d; want sha256:..., 9, 137", res.ImageID, res.Signal, res.ExitCode)
	}
	if u := f.created[0].User; u != "200000:200000" {
		t.Errorf("user: got %q; want 200000:200000", u)
	}
}

func TestUIDPoolGivesDistinctUIDs(t *testing.T) {
	p := newUIDPool(UIDRange{First: 10, Last: 12})
	seen := map[int]bool{}
	var releases []func()
	for range 3 {
		uid, release, err := p.acquire()
		if err != nil || seen[uid] || uid < 10 || uid > 12 {
			t.Fatalf("acquire: got %d, %v (seen %v); want a new uid of 10-12", uid, err, seen)
		}
		seen[uid] = true
		releases = append(releases, release)
	}
	if _, _, err := p.acquire(); !errors.Is(err, errNoFreeUID) {
		t.Fatalf("acquire from a full pool: got %v; want errNoFreeUID", err)
	}
	releases[1]()
	releases[1]()
	if _, _, err := p.acquire(); err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
}

func TestSeccompUnderRunscAllowsClone3(t *testing.T) {
	opt, err := seccompOpt(DefaultSeccompProfile(), RuntimeRunsc)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Syscalls []struct {
			Names  []string `json:"names"`
			Action string   `json:"action"`
		} `json:"syscalls"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(opt, "seccomp=")), &p); err != nil {
		t.Fatal(err)
	}
	actions := map[string][]string{}
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			actions[n] = append(actions[n], r.Action)
		}
	}
	if got := actions["clone3"]; len(got) != 1 || got[0] != "SCMP_ACT_ALLOW" {
		t.Errorf("clone3 under runsc: got %v; want one allow rule", got)
	}
	if got := actions["io_uring_setup"]; len(got) != 1 || got[0] != "SCMP_ACT_ERRNO" {
		t.Errorf("io_uring_setup under runsc: got %v; want still refused", got)
	}
	runc, _ := seccompOpt(DefaultSeccompProfile(), "")
	if !strings.Contains(runc, `"names":["clone3"],"action":"SCMP_ACT_ERRNO","errnoRet":38`) {
		t.Errorf("clone3 under runc: want ENOSYS (glibc falls back to clone): %.200s", runc)
	}
}

func TestReportParsesFramesSplitAnywhere(t *testing.T) {
	l := testChecked("").Limits
	stream := okResult(t, map[string]any{
		"exit_code": 3, "stdout": []byte("out"), "stderr": []byte("err"), "files_truncated": true,
		"files": []map[string][]byte{{"name": []byte("a.txt"), "content": []byte("A")}},
	})
	rep := newReport(l, nil)
	for i := range stream {
		if _, err := rep.Write(stream[i : i+1]); err != nil {
			t.Fatalf("byte %d: %v", i, err)
		}
	}
	res := rep.output()
	if rep.exit == nil || rep.exit.ExitCode != 3 || rep.end == nil || string(res.Stdout) != "out" || string(res.Stderr) != "err" ||
		len(res.Files) != 1 || res.Files[0].Name != "a.txt" || !res.FilesTruncated {
		t.Errorf("got exit %+v end %+v result %+v; want every frame read", rep.exit, rep.end, res)
	}
}

func TestCheckImage(t *testing.T) {
	f := newFake()
	b := fakeBackend(t, f, Config{Image: "img@sha256:" + strings.Repeat("ab", 32)})
	if id, err := b.CheckImage(context.Background()); err != nil || id != "sha256:"+strings.Repeat("ab", 32) {
		t.Errorf("pinned to its image ID: got %q, %v; want the ID", id, err)
	}
	b2 := fakeBackend(t, f, Config{Image: "img@sha256:" + strings.Repeat("cd", 32)})
	if _, err := b2.CheckImage(context.Background()); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("pinned to another digest: got %v; want a ConfigError", err)
	}
}

func TestRunRequestHandedOverAsTheDeadlineFires(t *testing.T) {
	t.Run("worker deadline: a timeout result, never a retry", func(t *testing.T) {
		f := newFake()
		f.writeBlocks, f.hang = true, true
		f.state.Running = true
		b := fakeBackend(t, f, Config{})
		c := testChecked("print(1)")
		c.Limits.Timeout = 200 * time.Millisecond
		res, err := b.Run(context.Background(), c)
		if err != nil || !res.TimedOut || res.ExitCode != -1 {
			t.Fatalf("got %+v, %v; want a timed-out result", res, err)
		}
	})
	t.Run("cancelled: may have started", func(t *testing.T) {
		f := newFake()
		f.writeBlocks, f.hang = true, true
		b := fakeBackend(t, f, Config{})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := b.Run(ctx, testChecked("print(1)"))
		var ie *guard.IntegrationError
		if !errors.As(err, &ie) || !ie.CodeMayHaveStarted || guard.Retryable(err) {
			t.Fatalf("got %v; want a non-retryable IntegrationError whose code may have started", err)
		}
	})
}

// An image the runtime cannot start the supervisor in is refused from then on without a
// container (under Docker 20.10 with gVisor each failed start leaves a containerd shim behind),
// until the image is replaced.
func TestImageThatCannotStartTheSupervisorIsRememberedUntilReplaced(t *testing.T) {
	for _, warm := range []int{0, 1} {
		t.Run(fmt.Sprintf("warm=%d", warm), func(t *testing.T) {
			f := newFake()
			f.startErr = fmt.Errorf("%w: exec: \"python3\": executable file not found in $PATH", errInvalid)
			f.stdout = okResult(t, nil) // what a started container would write
			b := fakeBackend(t, f, Config{WarmSandboxes: warm})
			c := testChecked("print(1)")
			attempts := func() int {
				f.mu.Lock()
				defer f.mu.Unlock()
				return f.startAttempts
			}
			var ce *guard.ConfigError
			run := func(i int) {
				if _, err := b.Run(context.Background(), c); !errors.As(err, &ce) || !strings.Contains(ce.Msg, "python3") {
					t.Fatalf("run %d: got %v; want a ConfigError naming python3", i, err)
				}
			}
			settle := func() {
				if warm > 0 {
					time.Sleep(1500 * time.Millisecond) // past the pool's first back-off
				}
			}
			run(0)
			settle()
			// The first run's start and, with a pool, the pool's starts that raced it (one for
			// its target, one for the run that waited for it: begun before the first failure was
			// known, they may land after that run returned).
			first := attempts()
			if first < 1 || first > 1+2*warm {
				t.Errorf("%d starts tried for the first run; want 1 to %d", first, 1+2*warm)
			}
			run(1)
			run(2)
			settle()
			if n := attempts(); n != first {
				t.Errorf("%d starts tried after the first failure was known (%d before); want none", n-first, first)
			}
			// The operator replaces the image: runs create containers again.
			f.mu.Lock()
			f.startErr, f.imageID = nil, "sha256:"+strings.Repeat("cd", 32)
			f.mu.Unlock()
			if res, err := b.Run(context.Background(), c); err != nil || !res.OK {
				t.Fatalf("run after the image was replaced: %+v, %v", res, err)
			}
		})
	}
}

// A container the daemon took from under the run (a dockerd restart kills it and leaves the
// attach stream open) is not the code's timeout: at the worker's deadline the container has
// stopped with no report, or the daemon no longer knows it, and the run's outcome is unknown.
func TestRunDeadlineOfALostContainerIsNotATimeout(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*fakeEngine)
	}{
		{"stopped with no report", func(f *fakeEngine) { f.state = containerState{Running: false, ExitCode: 137} }},
		{"gone", func(f *fakeEngine) { f.inspectErr = fmt.Errorf("%w: no such container", errNotFound) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.hang = true
			tt.set(f)
			b := fakeBackend(t, f, Config{})
			c := testChecked("import time; time.sleep(60)")
			c.Limits.Timeout = 200 * time.Millisecond
			res, err := b.Run(context.Background(), c)
			var ie *guard.IntegrationError
			if !errors.As(err, &ie) || !ie.CodeMayHaveStarted || guard.Retryable(err) || !strings.Contains(err.Error(), "lost while the code ran") {
				t.Fatalf("got %+v, %v; want a non-retryable IntegrationError: the container was lost, the code may have started", res, err)
			}
			if len(f.removedIDs()) != 1 {
				t.Errorf("removed %v; want the container removed before Run returned", f.removedIDs())
			}
		})
	}
}

// A session's container that has exited is reaped while its session still runs (its supervisor
// is gone: no cell can run in it again); one that runs is kept for its live session.
func TestReapTakesAnExitedContainerOfALiveSession(t *testing.T) {
	f := newFake()
	now := time.Now()
	labels := func() map[string]string {
		return map[string]string{LabelManaged: "true", LabelDeployment: "default/sandboxflow", LabelSession: "s1", LabelWorkflowID: "s1", LabelRunID: "r1"}
	}
	f.list = []containerSummary{
		{ID: "exited", Name: "sandboxflow-a", Created: now, Labels: labels(), State: "exited"},
		{ID: "running", Name: "sandboxflow-b", Created: now, Labels: labels(), State: "running"},
	}
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full", Deployment: "default/sandboxflow",
		SessionEnded: func(context.Context, string, string) (bool, error) { return false, nil }})
	if _, err := b.Reap(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := f.removedIDs(); !slices.Equal(got, []string{"exited"}) {
		t.Fatalf("reaped %v; want only the exited container of the live session", got)
	}
}
