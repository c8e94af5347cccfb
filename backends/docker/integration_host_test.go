//go:build integration

package docker

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// DaemonHost reads the real daemon's CPUs and memory, which the worker sizes its sandbox counts
// to; on this machine the daemon is local, so its CPUs are this process's.
func TestDaemonHostReadsTheDaemon(t *testing.T) {
	needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cpus, mem, err := DaemonHost(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if cpus != runtime.NumCPU() || mem < 64<<20 {
		t.Fatalf("DaemonHost = %d CPUs, %d bytes; want %d CPUs and some memory", cpus, mem, runtime.NumCPU())
	}
	if _, _, err := DaemonHost(ctx, "unix:///nonexistent/docker.sock"); err == nil || !errors.Is(err, errUnreachable) {
		t.Fatalf("DaemonHost of no daemon: %v, want unreachable", err)
	}
}
