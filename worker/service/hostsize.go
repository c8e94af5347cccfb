package service

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/backends/kinds"
)

// Host is what the sandboxes of a worker share: its CPUs and memory, and where they were read.
type Host struct {
	CPUs        int
	MemoryBytes int64
	Source      string
}

// The sizing formula's constants (docs/operating.md, "Sandbox counts sized to the host").
const (
	// sizeCPUOversubscribe is how many sandboxes may share one CPU's worth of --docker-cpus: a
	// sandbox spends much of its life being started, waiting for its request or its I/O, and its
	// CPU limit is a cap, not a reservation.
	sizeCPUOversubscribe = 2
	// sizeMemoryShare is the share of the host's memory sandboxes may take, running and warm
	// together; the rest is the host's, dockerd's, Temporal's and this worker's.
	sizeMemoryShare = 0.75
	// sizeMax bounds the derived --max-sandboxes.
	sizeMax = 256
	// sizeWarmBurst is how many times max the derived --warm-sandboxes may be: a burst of that
	// many runs approved at once finds their containers started. Containers are started in the
	// pool's own time, a few at once (about 0.3 s of the host's CPU each on two cores); a run
	// that finds the pool empty waits for the next one the pool starts.
	sizeWarmBurst = 4
)

// SizeForHost is the formula that sizes --max-sandboxes and --warm-sandboxes when they are not
// given: with byCPU = floor(2 × CPUs / per-sandbox CPUs) and byMemory = floor(0.75 × memory /
// per-sandbox memory), max = byCPU and byMemory's smaller, at least 1 and at most 256, and warm
// = what memory leaves beside max running sandboxes (byMemory − max), at most 4 × max and
// docker.MaxWarmSandboxes (64), at least 0. Running and warm containers together then fit in
// three quarters of the memory, and a burst of four times max runs finds its containers started.
func SizeForHost(h Host, sandboxCPUs float64, sandboxMemory int64) (maxSandboxes, warm int) {
	if sandboxCPUs <= 0 {
		sandboxCPUs = docker.DefaultCPUs
	}
	if sandboxMemory <= 0 {
		sandboxMemory = docker.DefaultMemoryBytes
	}
	byCPU := int(float64(sizeCPUOversubscribe*h.CPUs) / sandboxCPUs)
	byMemory := sizeFromMemory(h, sandboxMemory)
	maxSandboxes = min(byCPU, byMemory, sizeMax)
	maxSandboxes = max(maxSandboxes, 1)
	return maxSandboxes, warmForHost(byMemory, maxSandboxes)
}

// warmForHost is SizeForHost's warm: byMemory − max, at most sizeWarmBurst × max and
// docker.MaxWarmSandboxes, at least 0.
func warmForHost(byMemory, maxSandboxes int) int {
	return max(min(byMemory-maxSandboxes, sizeWarmBurst*maxSandboxes, docker.MaxWarmSandboxes), 0)
}

// readHost reads the host the sandboxes share: the Docker daemon's (what its containers get),
// else this machine's (runtime.NumCPU and /proc/meminfo). Tests replace it.
var readHost = func(ctx context.Context) (Host, error) {
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cpus, mem, derr := docker.DaemonHost(ictx, "")
	if derr == nil && cpus > 0 && mem > 0 {
		return Host{CPUs: cpus, MemoryBytes: mem, Source: "the Docker daemon's info"}, nil
	}
	mem, err := memTotal("/proc/meminfo")
	if err != nil {
		return Host{}, fmt.Errorf("host size: docker daemon: %v; %w", derr, err)
	}
	return Host{CPUs: runtime.NumCPU(), MemoryBytes: mem, Source: "runtime.NumCPU and /proc/meminfo"}, nil
}

// memTotal reads MemTotal from a /proc/meminfo file.
func memTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("host size: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("host size: %s MemTotal: %w", path, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("host size: %s: %w", path, err)
	}
	return 0, fmt.Errorf("host size: %s has no MemTotal", path)
}

// sizeToHost fills in --max-sandboxes and --warm-sandboxes where they were not given and the
// docker kind runs sandboxes here, and says how each was chosen. Flags given (or their
// environment fallbacks) always win; other backends keep --max-sandboxes' default of 2.
func (o *Options) sizeToHost(ctx context.Context) (string, error) {
	given := fmt.Sprintf("--max-sandboxes %d", o.MaxSandboxes)
	if o.Backend == kinds.Docker {
		given += fmt.Sprintf(", --warm-sandboxes %d", o.Docker.WarmSandboxes)
	}
	if o.Backend != kinds.Docker || o.Role == RoleWorkflows {
		return given + " (given, or the default; only --backend docker sizes them to the host)", nil
	}
	if !o.MaxSandboxesFromHost && !o.Docker.WarmSandboxesFromHost {
		return given + " (as given)", nil
	}
	h, err := readHost(ctx)
	if err != nil {
		return "", err
	}
	d := &o.Docker
	cpus, mem := d.CPUs, d.MemoryBytes
	if cpus <= 0 {
		cpus = docker.DefaultCPUs
	}
	if mem <= 0 {
		mem = docker.DefaultMemoryBytes
	}
	m, w := SizeForHost(h, cpus, mem)
	if o.MaxSandboxesFromHost {
		o.MaxSandboxes = m
	} else {
		w = warmForHost(sizeFromMemory(h, mem), o.MaxSandboxes)
	}
	if d.WarmSandboxesFromHost {
		d.WarmSandboxes = w
	}
	o.MaxSandboxesFromHost, d.WarmSandboxesFromHost = false, false
	return fmt.Sprintf("--max-sandboxes %d, --warm-sandboxes %d, from %d CPUs and %d MiB (%s) against %g CPUs and %d MiB a sandbox: "+
		"max = min(2×CPUs/sandbox CPUs, 0.75×memory/sandbox memory, 256), warm = min(4×max, 0.75×memory/sandbox memory − max, 64); a flag given wins",
		o.MaxSandboxes, d.WarmSandboxes, h.CPUs, h.MemoryBytes>>20, h.Source, cpus, mem>>20), nil
}

// sizeFromMemory is how many sandboxes of sandboxMemory fit, running and warm together, in the
// share of the host's memory the formula gives them.
func sizeFromMemory(h Host, sandboxMemory int64) int {
	return int(sizeMemoryShare * float64(h.MemoryBytes) / float64(sandboxMemory))
}

// logSizing logs how the sandbox counts were chosen, once at start.
func logSizing(logger *slog.Logger, how string) {
	logger.Info("sandbox counts", "sizing", how)
}
