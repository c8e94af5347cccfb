package need

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records a skip or a failure instead of stopping.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skip(args ...any)                  { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestMissingSkipsOrFailsSayingHow(t *testing.T) {
	t.Setenv(RequireAll, "")
	t.Setenv("SANDBOXFLOW_REQUIRE_DOCKER", "")
	t.Setenv("SANDBOXFLOW_REQUIRE_POSTGRES", "")
	r := &recorder{TB: t}
	Missing(r, Python3, fmt.Errorf("not on PATH"))
	if r.failed != "" || !strings.Contains(r.skipped, "python3") || !strings.Contains(r.skipped, "apt-get install -y python3") {
		t.Errorf("outside make test: skipped %q failed %q; want a skip naming python3 and how to install it", r.skipped, r.failed)
	}

	// Under make test nothing skips.
	t.Setenv(RequireAll, "1")
	for _, req := range []Requirement{Docker, Dockerd, DockerCompose, Root, Python3, IPv6Loopback, AMD64, SSHKeygen, Node, TemporalCLI, Chromium, Postgres, CC, Spin, Tmux, Patch} {
		r := &recorder{TB: t}
		Missing(r, req, fmt.Errorf("absent"))
		if r.skipped != "" || !strings.Contains(r.failed, req.String()) || !strings.Contains(r.failed, "to get it: ") || !strings.Contains(r.failed, "absent") {
			t.Errorf("%s under %s=1: skipped %q failed %q; want a failure saying what is missing and how to get it", req, RequireAll, r.skipped, r.failed)
		}
	}

	// The older variables still make their own requirement strict, and only it.
	t.Setenv(RequireAll, "")
	t.Setenv("SANDBOXFLOW_REQUIRE_DOCKER", "1")
	if !Docker.Strict() || !Dockerd.Strict() || SSHKeygen.Strict() || Node.Strict() || TemporalCLI.Strict() || Postgres.Strict() {
		t.Errorf("SANDBOXFLOW_REQUIRE_DOCKER=1 made strict: docker %t dockerd %t ssh-keygen %t node %t temporal %t postgres %t; want only docker's",
			Docker.Strict(), Dockerd.Strict(), SSHKeygen.Strict(), Node.Strict(), TemporalCLI.Strict(), Postgres.Strict())
	}
	t.Setenv("SANDBOXFLOW_REQUIRE_POSTGRES", "1")
	if !Postgres.Strict() {
		t.Error("SANDBOXFLOW_REQUIRE_POSTGRES=1 did not make PostgreSQL strict")
	}
}

func TestNeedChecksTheMachine(t *testing.T) {
	// A missing requirement is to skip here, whatever make test's variables say.
	for _, env := range []string{RequireAll, "SANDBOXFLOW_REQUIRE_DOCKER", "SANDBOXFLOW_REQUIRE_POSTGRES", "SANDBOXFLOW_REQUIRE_BROWSER", "SANDBOXFLOW_REQUIRE_SPIN"} {
		t.Setenv(env, "")
	}
	t.Setenv("SANDBOXFLOW_TEMPORAL_CLI", "/nonexistent/temporal")
	t.Setenv("SANDBOXFLOW_TEST_POSTGRES", "127.0.0.1:1")
	for _, req := range []Requirement{TemporalCLI, Postgres} {
		r := &recorder{TB: t}
		Need(r, req)
		if r.skipped == "" {
			t.Errorf("%s with nothing there: not reported missing", req)
		}
	}
	// What is there passes: the machine running this test is one.
	r := &recorder{TB: t}
	Need(r, checkFor(t))
	if r.skipped != "" || r.failed != "" {
		t.Errorf("a requirement this machine meets was reported missing: %q%q", r.skipped, r.failed)
	}
	r = &recorder{TB: t}
	Need(r, Requirement(99))
	if r.skipped == "" {
		t.Error("an unknown requirement passed")
	}
}

// checkFor returns a requirement this machine meets, decided without the package's own checks.
func checkFor(t *testing.T) Requirement {
	t.Setenv("SANDBOXFLOW_TEMPORAL_CLI", "/bin/sh")
	return TemporalCLI
}

// TestPatchIsLookedUpOnPath: Patch is met exactly when a patch program is on PATH, and its
// absence says how to get one.
func TestPatchIsLookedUpOnPath(t *testing.T) {
	t.Setenv(RequireAll, "")
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	r := &recorder{TB: t}
	Need(r, Patch)
	if r.skipped == "" || !strings.Contains(r.skipped, "apt-get install -y patch") {
		t.Errorf("no patch on PATH: skipped %q; want a skip saying how to install it", r.skipped)
	}
	if err := os.WriteFile(filepath.Join(dir, "patch"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = &recorder{TB: t}
	Need(r, Patch)
	if r.skipped != "" || r.failed != "" {
		t.Errorf("a patch on PATH: skipped %q failed %q; want it met", r.skipped, r.failed)
	}
}
