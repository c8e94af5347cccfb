package service

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// validOptions are options every kind but http accepts, as the worker's flags would fill them.
func validOptions(t *testing.T, backend string, args ...string) *Options {
	t.Helper()
	o := &Options{TaskQueue: "q", Role: RoleAll, MaxSandboxes: 2, Languages: "python", LogLevel: "info", ReapInterval: time.Minute}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	BackendFlags(fs, o)
	if err := fs.Parse(append([]string{"--backend", backend}, args...)); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestBackendTableEntriesAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range backendKinds() {
		if k.name == "" || k.flags == nil || k.build == nil || k.doctor == nil {
			t.Errorf("kind %q lacks a name, flags, build or doctor", k.name)
		}
		if seen[k.name] {
			t.Errorf("kind %q is listed twice", k.name)
		}
		seen[k.name] = true
	}
	for _, name := range []string{kinds.Docker, kinds.E2B, kinds.HTTP, kinds.Local} {
		if !seen[name] {
			t.Errorf("kinds.%s has no entry in backendKinds", name)
		}
	}
}

// The flags and their environment names are what operators, scripts and tests use: the table
// must register exactly the flags the worker had, with their defaults.
func TestBackendFlagsKeepTheirNamesAndDefaults(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var o Options
	emptyOK := BackendFlags(fs, &o)
	var got []string
	fs.VisitAll(func(f *flag.Flag) { got = append(got, f.Name) })
	want := []string{"allow-unsafe-local", "backend", "docker-cpus", "docker-deployment", "docker-image", "docker-ipc",
		"docker-memory-bytes", "docker-network", "docker-pids", "docker-runtime", "docker-uid-range",
		"e2b-api-key-file", "e2b-api-url", "e2b-domain", "e2b-sandbox-url", "e2b-template",
		"http-header-file", "http-url", "warm-max-age", "warm-sandboxes"}
	if !slices.Equal(got, want) {
		t.Fatalf("flags %v; want %v", got, want)
	}
	slices.Sort(emptyOK)
	if !slices.Equal(emptyOK, []string{"docker-ipc", "docker-network"}) {
		t.Errorf("flags that may be empty %v; want docker-ipc, docker-network", emptyOK)
	}
	if o.Backend != kinds.Docker || o.Docker.Image != "python:3.12-slim" || o.Docker.Runtime != "runc" || o.Docker.WarmSandboxes != 2 ||
		o.Docker.WarmMaxAge != docker.DefaultWarmMaxAge {
		t.Errorf("defaults: backend %q image %q runtime %q warm %d/%s; want docker, python:3.12-slim, runc, 2/%s",
			o.Backend, o.Docker.Image, o.Docker.Runtime, o.Docker.WarmSandboxes, o.Docker.WarmMaxAge, docker.DefaultWarmMaxAge)
	}
	if u := fs.Lookup("backend").Usage; !strings.Contains(u, "docker, e2b, http or local (DEVELOPMENT ONLY)") {
		t.Errorf("--backend usage %q does not list every kind", u)
	}
}

func TestBackendKindValidation(t *testing.T) {
	var ce *guard.ConfigError
	o := validOptions(t, kinds.Docker)
	if err := o.Validate(); err != nil {
		t.Fatalf("docker with defaults: %v", err)
	}
	o.Backend = "vm"
	if err := o.Validate(); !errors.As(err, &ce) || !strings.Contains(err.Error(), "docker, e2b, http or local") {
		t.Errorf("--backend vm: %v; want a ConfigError listing the kinds", err)
	}
	// Each kind checks its own settings, and only when it is the one chosen.
	for _, tt := range []struct {
		backend string
		args    []string
		want    string
	}{
		{kinds.Docker, []string{"--docker-runtime", "kata"}, "--docker-runtime"},
		{kinds.Docker, []string{"--warm-sandboxes", "-1"}, "--warm-sandboxes"},
		{kinds.Docker, []string{"--warm-sandboxes", "65"}, "--warm-sandboxes 65: want 0 (no pool) to 64"},
		{kinds.Docker, []string{"--warm-max-age", "10ms"}, "--warm-max-age"},
		{kinds.HTTP, nil, "--http-url"},
	} {
		if err := validOptions(t, tt.backend, tt.args...).Validate(); !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("--backend %s %v: %v; want a ConfigError naming %s", tt.backend, tt.args, err, tt.want)
		}
	}
	if err := validOptions(t, kinds.E2B, "--docker-runtime", "kata").Validate(); err != nil {
		t.Errorf("--backend e2b with a Docker setting it ignores: %v", err)
	}
	// Only a kind with the egress proxy can give a run the egress its reviewer approved.
	for _, backend := range []string{kinds.E2B, kinds.Local} {
		o := validOptions(t, backend)
		o.EgressAllow = "pypi.org"
		if err := o.Validate(); !errors.As(err, &ce) || !strings.Contains(err.Error(), "--backend docker") {
			t.Errorf("--backend %s --egress-allow: %v; want a ConfigError pointing at --backend docker", backend, err)
		}
	}
	o = validOptions(t, kinds.Docker)
	o.EgressAllow = "pypi.org"
	if err := o.Validate(); err != nil {
		t.Errorf("--backend docker --egress-allow: %v", err)
	}
}

func TestReapAgeAndMetricsLabelPerKind(t *testing.T) {
	d := validOptions(t, kinds.Docker, "--warm-max-age", "7m", "--docker-runtime", "runsc")
	e := validOptions(t, kinds.E2B)
	p := e.Policy()
	base := p.MaxTimeout + p.Grace + time.Minute
	if got := reapAge(e); got != base {
		t.Errorf("e2b reap age %s; want %s", got, base)
	}
	if got := reapAge(d); got != base+7*time.Minute {
		t.Errorf("docker reap age with a warm pool %s; want %s (the pool's longest wait added)", got, base+7*time.Minute)
	}
	d.Docker.WarmSandboxes = 0
	if got := reapAge(d); got != base {
		t.Errorf("docker reap age without a warm pool %s; want %s", got, base)
	}
	if got := metricsLabel(d); got != "runsc" {
		t.Errorf("docker metrics label %q; want the runtime runsc", got)
	}
	if got := metricsLabel(e); got != kinds.E2B {
		t.Errorf("e2b metrics label %q; want e2b", got)
	}
}

func TestLocalKindBuildsOnlyWhenAllowed(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ce *guard.ConfigError
	if _, _, err := NewBackend(context.Background(), validOptions(t, kinds.Local), logger); !errors.As(err, &ce) {
		t.Fatalf("--backend local without --allow-unsafe-local: %v; want a ConfigError", err)
	}
	b, closeBackend, err := NewBackend(context.Background(), validOptions(t, kinds.Local, "--allow-unsafe-local"), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer closeBackend()
	if b.Name() != kinds.Local {
		t.Errorf("built backend %q; want %q", b.Name(), kinds.Local)
	}
	if _, _, err := NewBackend(context.Background(), &Options{Backend: "vm"}, logger); !errors.As(err, &ce) {
		t.Errorf("an unknown kind: %v; want a ConfigError", err)
	}
}

// The local kind hands the backend the worker's files its code must not reach: a payload key
// file others may read (code run as uid 65534 read it before) keeps a root worker from building
// it, naming the file; under --dev, so does a database others may read. A 0600 key file builds.
func TestLocalKindKeepsWorkerFilesOutOfReach(t *testing.T) {
	need.Need(t, need.Root) // as the worker's user the code can read everything, and its warning says so
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, err := os.MkdirTemp("", "sandboxflow-kind-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := validOptions(t, kinds.Local, "--allow-unsafe-local")
	o.KeyFile = keys
	var ce *guard.ConfigError
	if _, _, err := NewBackend(context.Background(), o, logger); !errors.As(err, &ce) || !strings.Contains(err.Error(), keys) {
		t.Errorf("key file of mode 0644: got %v; want a ConfigError naming it", err)
	}
	if err := os.Chmod(keys, 0o600); err != nil {
		t.Fatal(err)
	}
	b, closeBackend, err := NewBackend(context.Background(), o, logger)
	if err != nil {
		t.Fatalf("key file of mode 0600: %v", err)
	}
	closeBackend()
	if b.Name() != kinds.Local {
		t.Errorf("built %q", b.Name())
	}
	o.Dev, o.DataDir = true, dir
	db := filepath.Join(dir, "temporal.db")
	if err := os.WriteFile(db, []byte("history"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := NewBackend(context.Background(), o, logger); !errors.As(err, &ce) || !strings.Contains(err.Error(), db) {
		t.Errorf("--dev database of mode 0644 in a folder others may enter: got %v; want a ConfigError naming it", err)
	}
}

// The table's sessions column: the Docker, E2B and local backends keep a sandbox for a session,
// the HTTP recipe does not; the doctor says which backend does and with what caps.
func TestSessionsColumn(t *testing.T) {
	if got := sessionKinds(); got != "docker, e2b, local" {
		t.Errorf("kinds with sessions: %q; want docker, e2b, local", got)
	}
	for _, tc := range []struct{ backend, want string }{
		{"docker", "offered by the docker backend: lifetime up to 1h0m0s, idle up to 10m0s, at most 100 cells"},
		{"http", "not offered by the http backend"},
		{"e2b", "offered by the e2b backend"},
		{"local", "offered by the local backend"},
	} {
		if got := sessionsLine(&Options{Backend: tc.backend}); !strings.Contains(got, tc.want) {
			t.Errorf("%s: sessions line %q; want %q", tc.backend, got, tc.want)
		}
	}
}

// Each start gets a host queue of its own, named after the queue its sessions open on.
func TestHostTaskQueueIsNewAtEachStart(t *testing.T) {
	cfg := &Options{TaskQueue: "sandboxflow", SandboxTaskQueue: "sandboxes"}
	a, b := hostTaskQueue(cfg), hostTaskQueue(cfg)
	if a == b || !strings.HasPrefix(a, "sandboxes-host-") || len(a) != len("sandboxes-host-")+12 {
		t.Errorf("host queues %q and %q; want two different sandboxes-host-<12 hex>", a, b)
	}
	if q := hostTaskQueue(&Options{TaskQueue: "sandboxflow"}); !strings.HasPrefix(q, "sandboxflow-host-") {
		t.Errorf("host queue %q without a sandbox queue; want it named after the workflow queue", q)
	}
}
