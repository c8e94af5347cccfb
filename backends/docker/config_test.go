package docker

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.Image != "python:3.12-slim" || c.CPUs != 1 || c.MemoryBytes != 256<<20 || c.PidsLimit != 64 ||
		c.WorkTmpfsBytes != 64<<20 || c.TmpTmpfsBytes != 64<<20 || c.Network != "bridge" || c.IPC != "private" ||
		c.UIDs != (UIDRange{100000, 100999}) || c.Deployment != "default" || c.ShmBytes != 64<<20 || string(c.SeccompProfile) != string(defaultSeccompProfile) ||
		c.RemoveRetryWait != 100*time.Millisecond {
		t.Errorf("defaults: got %+v", c)
	}
	if got := (Config{Runtime: RuntimeRunsc}).WithDefaults().PidsLimit; got != DefaultRunscPidsLimit {
		t.Errorf("runsc pids default: got %d; want %d", got, DefaultRunscPidsLimit)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: got %v; want valid", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // "" means valid
	}{
		{"uid range from root", Config{UIDs: UIDRange{0, 10}}, "root"},
		{"uid range backwards", Config{UIDs: UIDRange{2000, 1000}}, "ascending"},
		{"uid range of one", Config{UIDs: UIDRange{5000, 5000}}, ""},
		{"deployment with a space", Config{Deployment: "a b"}, "deployment"},
		{"deployment ns/queue", Config{Deployment: "default/sandbox-queue"}, ""},
		{"pinned image", Config{Image: "python@sha256:" + strings.Repeat("0a", 32)}, ""},
		{"pinned image, short digest", Config{Image: "python@sha256:abc"}, "64"},
		{"pinned image, other algorithm", Config{Image: "python@md5:" + strings.Repeat("0a", 32)}, "sha256"},
		{"shm as large as memory", Config{MemoryBytes: 64 << 20, ShmBytes: 64 << 20}, "shm"},
		{"unconfined seccomp", Config{SeccompProfile: []byte("unconfined")}, "unconfined"},
		{"allow-all seccomp", Config{SeccompProfile: []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`)}, "deny by default"},
		{"seccomp not JSON", Config{SeccompProfile: []byte(`{`)}, "not valid JSON"},
		{"host network", Config{Network: "host"}, "host"},
		{"none network", Config{Network: "none"}, "none"},
		{"container network", Config{Network: "container:abc"}, "plain"},
		{"ipc host", Config{IPC: "host"}, "ipc"},
		{"ipc private", Config{IPC: "private"}, ""},
		{"ipc none", Config{IPC: "none"}, ""},
		{"reserved label", Config{Labels: map[string]string{LabelManaged: "false"}}, "reserved"},
		{"low memory", Config{MemoryBytes: 1 << 20}, "memory"},
		{"negative cpus", Config{CPUs: -1}, "cpus"},
		{"negative remove retry wait", Config{RemoveRetryWait: -time.Second}, "remove retry wait"},
		{"low pids", Config{PidsLimit: 2}, "pids"},
		{"tiny tmpfs", Config{WorkTmpfsBytes: 10}, "tmpfs"},
		{"runtime with a slash", Config{Runtime: "../runc"}, "runtime"},
		{"image with a space", Config{Image: "python 3"}, "image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v; want valid", err)
				}
				return
			}
			if guard.TypeOf(err) != guard.TypeConfigError || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want a ConfigError mentioning %q", err, tt.want)
			}
			if _, nerr := New(tt.cfg); nerr == nil {
				t.Errorf("New accepted a config Validate refuses")
			}
		})
	}
}

type seccompProfile struct {
	DefaultAction   string `json:"defaultAction"`
	DefaultErrnoRet int    `json:"defaultErrnoRet"`
	Syscalls        []struct {
		Names    []string `json:"names"`
		Action   string   `json:"action"`
		ErrnoRet int      `json:"errnoRet"`
		Args     []struct {
			Index    int    `json:"index"`
			Value    uint64 `json:"value"`
			ValueTwo uint64 `json:"valueTwo"`
			Op       string `json:"op"`
		} `json:"args"`
	} `json:"syscalls"`
}

func TestSeccompProfile(t *testing.T) {
	var p seccompProfile
	if err := json.Unmarshal(DefaultSeccompProfile(), &p); err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" || p.DefaultErrnoRet != 38 {
		t.Errorf("default: got %s/%d; want SCMP_ACT_ERRNO/ENOSYS", p.DefaultAction, p.DefaultErrnoRet)
	}
	allowed := map[string]bool{}
	eperm := map[string]bool{}
	seen := map[string]int{}
	for _, s := range p.Syscalls {
		for _, n := range s.Names {
			seen[n]++
			switch {
			case s.Action == "SCMP_ACT_ALLOW" && len(s.Args) == 0:
				allowed[n] = true
			case s.Action == "SCMP_ACT_ERRNO" && s.ErrnoRet == 1:
				eperm[n] = true
			}
		}
	}
	for n, count := range seen {
		if count > 1 {
			t.Errorf("%s is listed %d times", n, count)
		}
	}
	for _, n := range []string{
		"io_uring_setup", "io_uring_enter", "io_uring_register", "unshare", "setns", "mount", "umount2",
		"open_tree", "move_mount", "fsopen", "ptrace", "process_vm_readv", "process_vm_writev", "keyctl",
		"add_key", "bpf", "userfaultfd", "perf_event_open", "kexec_load", "init_module", "open_by_handle_at",
		"pidfd_getfd", "kcmp", "personality",
	} {
		if !eperm[n] || allowed[n] {
			t.Errorf("%s: denied with EPERM %t, allowed %t; want denied only", n, eperm[n], allowed[n])
		}
	}
	// Calls that reach another process of the uid without ptrace's checks are allowed only with
	// arguments that spare PID 1, the supervisor (see TestDockerSessionSupervisorKnobs).
	for _, n := range []string{"prlimit64", "setpriority", "ioprio_set", "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler"} {
		if allowed[n] || seen[n] != 1 {
			t.Errorf("%s: allowed without arguments %t, listed %d times; want one rule with arguments", n, allowed[n], seen[n])
		}
	}
	for _, n := range []string{"read", "write", "openat", "execve", "wait4", "pipe2", "mmap", "socket", "getrandom", "memfd_create"} {
		if !allowed[n] {
			t.Errorf("%s: not allowed; python and sh need it", n)
		}
	}
	if allowed["clone"] || allowed["clone3"] {
		t.Errorf("clone or clone3 allowed without conditions")
	}
	var cloneRule bool
	for _, s := range p.Syscalls {
		if slices.Equal(s.Names, []string{"clone"}) && s.Action == "SCMP_ACT_ALLOW" && len(s.Args) == 1 &&
			s.Args[0].Op == "SCMP_CMP_MASKED_EQ" && s.Args[0].Value == 0x7E020000 && s.Args[0].ValueTwo == 0 {
			cloneRule = true
		}
	}
	if !cloneRule {
		t.Errorf("clone: no rule allowing it only without namespace flags")
	}
}

func TestIsGVisor(t *testing.T) {
	for rt, want := range map[string]bool{
		"runsc": true, "runsc-current": true, "runsc-debug": true,
		"": false, "runc": false, "runsc-": false, "runscx": false, "crun": false, "my-runsc": false,
	} {
		if got := IsGVisor(rt); got != want {
			t.Errorf("IsGVisor(%q) = %t; want %t", rt, got, want)
		}
	}
	// A second gVisor gets gVisor's settings: the higher pids limit and a seccomp profile in
	// which clone3 is allowed (gVisor answers a refused one with EPERM, which breaks glibc).
	if got := (Config{Runtime: "runsc-current"}).WithDefaults().PidsLimit; got != DefaultRunscPidsLimit {
		t.Errorf("pids limit under runsc-current = %d; want %d", got, DefaultRunscPidsLimit)
	}
	runc, err := seccompOpt(DefaultSeccompProfile(), "runc")
	if err != nil {
		t.Fatal(err)
	}
	gv, err := seccompOpt(DefaultSeccompProfile(), "runsc-current")
	if err != nil {
		t.Fatal(err)
	}
	if runc == gv {
		t.Error("the seccomp option under runsc-current is runc's")
	}
}
