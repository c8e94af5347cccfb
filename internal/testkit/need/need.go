// Package need is the one place that decides whether a test may skip here. A test names what it
// needs (need.Need(t, need.Docker, need.Python3)); each requirement has its own check and says
// what provides it. Where something is missing the test skips, saying what and how to get it,
// except under make test (SANDBOXFLOW_REQUIRE_ALL=1), where nothing skips silently: the test
// fails with the same words. SANDBOXFLOW_REQUIRE_DOCKER=1 and SANDBOXFLOW_REQUIRE_POSTGRES=1 make
// Docker's and PostgreSQL's absence fail on their own, as they did before this package.
package need

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// RequireAll is the environment variable under which every missing requirement fails its test.
const RequireAll = "SANDBOXFLOW_REQUIRE_ALL"

// Requirement is one thing a test may need from the machine.
type Requirement int

// The requirements, each with its check (in check) and what provides it (in spec).
const (
	// Docker is a Docker daemon that answers `docker info`.
	Docker Requirement = iota + 1
	// Dockerd is the dockerd binary, for tests that start a daemon of their own.
	Dockerd
	// DockerCompose is the docker-compose binary.
	DockerCompose
	// Root is running as uid 0.
	Root
	// Python3 is python3 on PATH.
	Python3
	// IPv6Loopback is a listening socket on ::1.
	IPv6Loopback
	// AMD64 is an x86-64 machine (for tests whose probes are x86-64 programs).
	AMD64
	// SSHKeygen is OpenSSH's ssh-keygen on PATH.
	SSHKeygen
	// Node is node and npm on PATH.
	Node
	// TemporalCLI is the official temporal CLI: SANDBOXFLOW_TEMPORAL_CLI or temporal on PATH.
	TemporalCLI
	// Chromium is chromium (or chromium-browser) on PATH.
	Chromium
	// Postgres is a PostgreSQL server at SANDBOXFLOW_TEST_POSTGRES (default 127.0.0.1:5433).
	Postgres
	// CC is a C compiler, cc on PATH (for tests that build a native library an attack loads).
	CC
	// Spin is the spin model checker on PATH (the approval protocol's model check).
	Spin
	// Tmux is tmux on PATH, a real terminal for tests of what a terminal shows.
	Tmux
	// Patch is patch(1) on PATH, which applies the unified diffs reviewers are shown.
	Patch
)

// spec is a requirement's name, how to get it, and the variable other than RequireAll that
// makes its absence fail.
type spec struct {
	name, provide, strictEnv string
	check                    func() error
}

func (r Requirement) spec() spec {
	switch r {
	case Docker:
		return spec{"a Docker daemon", "run scripts/setup-docker.sh as root (make setup does)", "SANDBOXFLOW_REQUIRE_DOCKER", checkDocker}
	case Dockerd:
		return spec{"dockerd", "apt-get install -y docker.io (scripts/setup-docker.sh does)", "SANDBOXFLOW_REQUIRE_DOCKER", lookPath("dockerd")}
	case DockerCompose:
		return spec{"docker-compose", "apt-get install -y docker-compose (scripts/setup-docker.sh does)", "SANDBOXFLOW_REQUIRE_DOCKER", lookPath("docker-compose")}
	case Root:
		return spec{"root", "run the tests as root (make test does: its setup needs root too)", "", checkRoot}
	case Python3:
		return spec{"python3", "apt-get install -y python3 (make setup does)", "", lookPath("python3")}
	case IPv6Loopback:
		return spec{"an IPv6 loopback (::1)", "sysctl -w net.ipv6.conf.lo.disable_ipv6=0 as root (make setup does)", "", checkIPv6}
	case AMD64:
		return spec{"an x86-64 machine", "run on x86-64 (these probes are x86-64 programs; there is no other build of them)", "", checkAMD64}
	case SSHKeygen:
		return spec{"ssh-keygen", "apt-get install -y openssh-client (make setup does)", "", lookPath("ssh-keygen")}
	case Node:
		return spec{"node and npm", "apt-get install -y nodejs npm (make setup does)", "", lookPaths("node", "npm")}
	case TemporalCLI:
		return spec{"the official temporal CLI", "make temporal-cli, then set SANDBOXFLOW_TEMPORAL_CLI (make test does)", "", checkTemporalCLI}
	case Chromium:
		return spec{"chromium", "apt-get install -y chromium (make setup does)", "SANDBOXFLOW_REQUIRE_BROWSER", checkChromium}
	case Tmux:
		return spec{"tmux", "apt-get install -y tmux (make setup does)", "", lookPath("tmux")}
	case Patch:
		return spec{"patch(1)", "apt-get install -y patch (make setup does)", "", lookPath("patch")}
	case Postgres:
		return spec{"PostgreSQL", "run scripts/setup-postgres.sh as root (make setup does), or set SANDBOXFLOW_TEST_POSTGRES", "SANDBOXFLOW_REQUIRE_POSTGRES", checkPostgres}
	case CC:
		return spec{"a C compiler (cc)", "apt-get install -y gcc (make setup does)", "", lookPath("cc")}
	case Spin:
		return spec{"the spin model checker", "apt-get install -y spin (make setup does)", "SANDBOXFLOW_REQUIRE_SPIN", lookPath("spin")}
	}
	return spec{name: fmt.Sprintf("requirement %d", int(r)), check: func() error { return errors.New("need: unknown requirement") }}
}

// String names the requirement.
func (r Requirement) String() string { return r.spec().name }

// Strict reports whether r's absence fails a test here rather than skipping it.
func (r Requirement) Strict() bool {
	s := r.spec()
	return os.Getenv(RequireAll) == "1" || (s.strictEnv != "" && os.Getenv(s.strictEnv) == "1")
}

// Need checks each requirement in turn and stops the test at the first one missing: it fails
// under Strict, and skips otherwise, saying what is missing and how to get it.
func Need(t testing.TB, reqs ...Requirement) {
	t.Helper()
	for _, r := range reqs {
		if err := r.spec().check(); err != nil {
			Missing(t, r, err)
			return
		}
	}
}

// Missing reports r as missing (err says how the test found out): a failure under Strict, a skip
// otherwise. It is for tests that check a requirement their own way (a Docker engine with the
// test images, say).
func Missing(t testing.TB, r Requirement, err error) {
	t.Helper()
	s := r.spec()
	msg := fmt.Sprintf("this test needs %s: %v; to get it: %s", s.name, err, s.provide)
	if r.Strict() {
		t.Fatalf("%s (%s=1 or %s=1: nothing may skip)", msg, RequireAll, orDefault(s.strictEnv, RequireAll))
		return
	}
	t.Skip(msg)
}

// TemporalCLIPath returns the path of the temporal CLI that TemporalCLI finds, or "" when there is none.
func TemporalCLIPath() string {
	if p := os.Getenv("SANDBOXFLOW_TEMPORAL_CLI"); p != "" {
		return p
	}
	p, _ := exec.LookPath("temporal")
	return p
}

// PostgresAddr is the address Postgres checks: SANDBOXFLOW_TEST_POSTGRES or 127.0.0.1:5433.
func PostgresAddr() string {
	return orDefault(os.Getenv("SANDBOXFLOW_TEST_POSTGRES"), "127.0.0.1:5433")
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func lookPath(name string) func() error { return lookPaths(name) }

func lookPaths(names ...string) func() error {
	return func() error {
		for _, n := range names {
			if _, err := exec.LookPath(n); err != nil {
				return fmt.Errorf("need: %w", err)
			}
		}
		return nil
	}
}

func checkDocker() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("need: %w", err)
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Errorf("need: docker info: %w: %s", err, out)
	}
	return nil
}

func checkRoot() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("need: running as uid %d", uid)
	}
	return nil
}

func checkIPv6() error {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return fmt.Errorf("need: listen on [::1]: %w", err)
	}
	return l.Close()
}

func checkAMD64() error {
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("need: this is %s", runtime.GOARCH)
	}
	return nil
}

func checkTemporalCLI() error {
	p := TemporalCLIPath()
	if p == "" {
		return errors.New("need: SANDBOXFLOW_TEMPORAL_CLI is unset and temporal is not on PATH")
	}
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("need: temporal CLI: %w", err)
	}
	return nil
}

func checkChromium() error {
	if ChromiumPath() == "" {
		return errors.New("need: neither chromium nor chromium-browser is on PATH")
	}
	return nil
}

// ChromiumPath returns the path of chromium or chromium-browser, or "" when there is neither.
func ChromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func checkPostgres() error {
	c, err := net.DialTimeout("tcp", PostgresAddr(), 2*time.Second)
	if err != nil {
		return fmt.Errorf("need: %w", err)
	}
	return c.Close()
}
