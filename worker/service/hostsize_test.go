package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/kinds"
)

const gib = int64(1) << 30

func TestSizeForHost(t *testing.T) {
	for _, tc := range []struct {
		name      string
		host      Host
		cpus      float64
		mem       int64
		max, warm int
	}{
		// byCPU 4, byMemory 72: CPUs bound it, memory leaves room for a pool of four times max.
		{"2 cores 24 GiB", Host{CPUs: 2, MemoryBytes: 24 * gib}, 1, 256 << 20, 4, 16},
		// byCPU 2, byMemory 3: one warm container beside two running.
		{"1 core 1 GiB", Host{CPUs: 1, MemoryBytes: 1 * gib}, 1, 256 << 20, 2, 1},
		// byCPU 128, byMemory 1536: the pool's cap, 64.
		{"64 cores 512 GiB", Host{CPUs: 64, MemoryBytes: 512 * gib}, 1, 256 << 20, 128, 64},
		// 256 cores would give 512: the cap.
		{"256 cores capped", Host{CPUs: 256, MemoryBytes: 1024 * gib}, 1, 256 << 20, 256, 64},
		// byCPU 8, byMemory 12: memory leaves 4 warm beside 8 running, less than 4 × 8.
		{"memory leaves less than the burst", Host{CPUs: 4, MemoryBytes: 4 * gib}, 1, 256 << 20, 8, 4},
		// A sandbox's memory limit above the host's memory: still one, and no warm pool.
		{"memory limit larger than host", Host{CPUs: 8, MemoryBytes: 2 * gib}, 1, 4 * gib, 1, 0},
		// Half a CPU each doubles byCPU; 0 takes the backend's defaults (1 CPU, 256 MiB).
		{"half CPU", Host{CPUs: 2, MemoryBytes: 24 * gib}, 0.5, 256 << 20, 8, 32},
		{"defaults", Host{CPUs: 2, MemoryBytes: 24 * gib}, 0, 0, 4, 16},
		// Memory bounds max; warm gets what is left.
		{"memory bound", Host{CPUs: 16, MemoryBytes: 4 * gib}, 1, 512 << 20, 6, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, w := SizeForHost(tc.host, tc.cpus, tc.mem)
			if m != tc.max || w != tc.warm {
				t.Fatalf("SizeForHost(%+v, %g, %d) = %d, %d; want %d, %d", tc.host, tc.cpus, tc.mem, m, w, tc.max, tc.warm)
			}
		})
	}
}

// fakeHost replaces readHost for one test.
func fakeHost(t *testing.T, h Host, err error) *int {
	t.Helper()
	calls := 0
	old := readHost
	readHost = func(context.Context) (Host, error) { calls++; return h, err }
	t.Cleanup(func() { readHost = old })
	return &calls
}

func sizedOptions(backend string) *Options {
	o := &Options{Backend: backend, Role: RoleAll, MaxSandboxes: 2, MaxSandboxesFromHost: true}
	o.Docker.WarmSandboxes, o.Docker.WarmSandboxesFromHost = 2, true
	return o
}

func TestSizeToHostDerivesUnsetCounts(t *testing.T) {
	fakeHost(t, Host{CPUs: 2, MemoryBytes: 24 * gib, Source: "test host"}, nil)
	o := sizedOptions(kinds.Docker)
	how, err := o.sizeToHost(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o.MaxSandboxes != 4 || o.Docker.WarmSandboxes != 16 {
		t.Fatalf("max %d warm %d, want 4 and 16", o.MaxSandboxes, o.Docker.WarmSandboxes)
	}
	for _, want := range []string{"--max-sandboxes 4", "--warm-sandboxes 16", "2 CPUs", "24576 MiB", "test host", "1 CPUs and 256 MiB a sandbox"} {
		if !strings.Contains(how, want) {
			t.Errorf("sizing %q lacks %q", how, want)
		}
	}
}

func TestSizeToHostFlagsWin(t *testing.T) {
	fakeHost(t, Host{CPUs: 2, MemoryBytes: 24 * gib, Source: "test host"}, nil)
	// --max-sandboxes 3 given: it stays; warm comes from memory beside it (72 − 3, at most 4 × 3).
	o := sizedOptions(kinds.Docker)
	o.MaxSandboxes, o.MaxSandboxesFromHost = 3, false
	if _, err := o.sizeToHost(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o.MaxSandboxes != 3 || o.Docker.WarmSandboxes != 12 {
		t.Fatalf("max %d warm %d, want 3 and 12", o.MaxSandboxes, o.Docker.WarmSandboxes)
	}
	// --warm-sandboxes 0 given keeps its meaning, no pool; max still from the host.
	o = sizedOptions(kinds.Docker)
	o.Docker.WarmSandboxes, o.Docker.WarmSandboxesFromHost = 0, false
	if _, err := o.sizeToHost(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o.MaxSandboxes != 4 || o.Docker.WarmSandboxes != 0 {
		t.Fatalf("max %d warm %d, want 4 and 0", o.MaxSandboxes, o.Docker.WarmSandboxes)
	}
	// Both given: the host is not read at all.
	calls := fakeHost(t, Host{}, errors.New("must not be read"))
	o = sizedOptions(kinds.Docker)
	o.MaxSandboxes, o.MaxSandboxesFromHost, o.Docker.WarmSandboxes, o.Docker.WarmSandboxesFromHost = 5, false, 1, false
	how, err := o.sizeToHost(context.Background())
	if err != nil || *calls != 0 || o.MaxSandboxes != 5 || o.Docker.WarmSandboxes != 1 || !strings.Contains(how, "as given") {
		t.Fatalf("both given: %q, %v, %d reads, max %d warm %d", how, err, *calls, o.MaxSandboxes, o.Docker.WarmSandboxes)
	}
}

func TestSizeToHostOtherKindsKeepDefault(t *testing.T) {
	calls := fakeHost(t, Host{CPUs: 64, MemoryBytes: 512 * gib}, nil)
	o := sizedOptions(kinds.Local)
	if _, err := o.sizeToHost(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o.MaxSandboxes != 2 || *calls != 0 {
		t.Fatalf("local backend: max %d after %d host reads, want 2 and none", o.MaxSandboxes, *calls)
	}
}

func TestSizeToHostReadError(t *testing.T) {
	boom := errors.New("no host")
	fakeHost(t, Host{}, boom)
	o := sizedOptions(kinds.Docker)
	if _, err := o.sizeToHost(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the host read's", err)
	}
}

func TestMemTotal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(p, []byte("MemFree:   100 kB\nMemTotal:       2048 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := memTotal(p); err != nil || n != 2048<<10 {
		t.Fatalf("memTotal = %d, %v; want %d", n, err, 2048<<10)
	}
	if err := os.WriteFile(p, []byte("MemFree: 1 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := memTotal(p); err == nil {
		t.Fatal("no MemTotal line: want an error")
	}
}

// worker doctor shows the sizing as a PASS line naming the numbers and where they came from.
func TestDoctorShowsSizing(t *testing.T) {
	fakeHost(t, Host{CPUs: 1, MemoryBytes: 1 * gib, Source: "test host"}, nil)
	o := validOptions(t, kinds.Docker)
	o.Conn.Address = "127.0.0.1:1" // nothing listens: the Temporal line fails, the rest still runs
	o.MaxSandboxesFromHost, o.Docker.WarmSandboxesFromHost = true, true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	doctor(ctx, o, &out)
	want := "PASS sandboxes: --max-sandboxes 2, --warm-sandboxes 1, from 1 CPUs and 1024 MiB (test host)"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("doctor said:\n%s\nwant a line with %q", out.String(), want)
	}
}

// readHost, not replaced, reads this machine (the Docker daemon here is local, or the fallback is
// this process's view): its CPUs, and memory enough for one default sandbox.
func TestReadHostReadsThisMachine(t *testing.T) {
	h, err := readHost(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.CPUs != runtime.NumCPU() || h.MemoryBytes < 256<<20 || h.Source == "" {
		t.Fatalf("readHost = %+v; want %d CPUs, some memory and a source", h, runtime.NumCPU())
	}
}
