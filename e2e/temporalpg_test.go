//go:build integration

package e2e

// Temporal on PostgreSQL as a process of its own (internal/devserver/pgtemporal's
// temporal-postgres), for the fault test on the production shape (production_faults_test.go).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	tpgOnce sync.Once
	tpgBin  string
	tpgErr  error
)

// temporalPostgresBinary builds internal/devserver/pgtemporal/cmd/temporal-postgres once.
func temporalPostgresBinary(t *testing.T) string {
	t.Helper()
	worker, _ := binaries(t) // shares binDir, removed by TestMain
	tpgOnce.Do(func() {
		tpgBin = filepath.Join(filepath.Dir(worker), "temporal-postgres")
		out, err := exec.Command("go", "build", "-o", tpgBin, "github.com/sandboxflow/sandboxflow/internal/devserver/pgtemporal/cmd/temporal-postgres").CombinedOutput()
		if err != nil {
			tpgErr = fmt.Errorf("go build temporal-postgres: %v\n%s", err, out)
		}
	})
	if tpgErr != nil {
		t.Fatal(tpgErr)
	}
	return tpgBin
}

// startProcess starts bin ARGS and waits until its output contains ready; it is stopped with
// SIGTERM when t ends.
func startProcess(t *testing.T, ready string, within time.Duration, env []string, bin string, args ...string) *devWorker {
	t.Helper()
	w := &devWorker{log: &strings.Builder{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	w.cmd = exec.Command(bin, args...)
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stdout = lockedWriter{w.mu, w.log}
	w.cmd.Stderr = lockedWriter{w.mu, w.log}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() { w.stop(t) })
	deadline := time.Now().Add(within)
	for !strings.Contains(w.output(), ready) {
		select {
		case <-w.done:
			t.Fatalf("%s exited before it was ready:\n%s", filepath.Base(bin), w.output())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %s:\n%s", filepath.Base(bin), within, w.output())
		}
	}
	return w
}
