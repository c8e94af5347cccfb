//go:build integration

package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

func TestConfigFlagsAndEnvironment(t *testing.T) {
	t.Setenv("SANDBOXFLOW_DOCKER_IMAGE", "from-env:1")
	t.Setenv("SANDBOXFLOW_MAX_SANDBOXES", "7")
	t.Setenv("SANDBOXFLOW_LANGUAGES", "python,sh")
	t.Setenv("TEMPORAL_ADDRESS", "10.0.0.1:7233")
	t.Setenv("TEMPORAL_NAMESPACE", "ns-from-env")
	cfg, _, err := parseConfig("test", []string{"--max-sandboxes", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Docker.Image != "from-env:1" || cfg.MaxSandboxes != 3 || cfg.Conn.Address != "10.0.0.1:7233" || cfg.Conn.Namespace != "ns-from-env" {
		t.Fatalf("got image %q sandboxes %d address %q namespace %q; want from-env:1, 3 (flag wins), 10.0.0.1:7233, ns-from-env",
			cfg.Docker.Image, cfg.MaxSandboxes, cfg.Conn.Address, cfg.Conn.Namespace)
	}
	if p := cfg.Policy(); !p.Offers(guard.Shell) || !p.Offers(guard.Python) {
		t.Fatalf("policy languages %v; want python and sh", p.Languages)
	}
}

func TestConfigRefusesBadSettings(t *testing.T) {
	tests := [][]string{
		{"--role", "everything"},
		{"--role", "sandboxes"}, // without a sandbox task queue
		{"--max-sandboxes", "0"},
		{"--backend", "vm"},
		{"--docker-runtime", "kata"},
		{"--docker-runtime", "runsc-"},
		{"--docker-runtime", "my-runsc"},
		{"--languages", "ruby"},
		{"--max-timeout", "1s", "--default-timeout", "2s"},
		// Caps that could make one result larger than Temporal accepts are refused at start-up.
		{"--max-stdout-bytes", "1000000", "--max-stderr-bytes", "1000000"},
	}
	for _, args := range tests {
		if _, _, err := parseConfig("test", args); guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("parseConfig(%q) = %v; want a ConfigError", args, err)
		}
	}
	if _, _, err := parseConfig("test", []string{"--no-such-flag"}); err == nil {
		t.Errorf("an unknown flag was accepted")
	}
	// A second gVisor installation, named as gVisor's own `runsc install --runtime` names them.
	for _, rt := range []string{"runc", "runsc", "runsc-current", "runsc-debug"} {
		if _, _, err := parseConfig("test", []string{"--docker-runtime", rt}); err != nil {
			t.Errorf("--docker-runtime %s: %v", rt, err)
		}
	}
}

// Finding 5 of issue 17: the worker accepted stray words, empty values and a bogus log level.
func TestConfigStrict(t *testing.T) {
	usage := [][]string{
		{"docter", "--backend", "nosuch"}, // "worker docter": a stray word, not the serve command
		{"--backend", "local", "oops"},
		{"--task-queue", ""},
		{"--docker-image", ""},
	}
	for _, args := range usage {
		var ue *cli.UsageError
		if _, _, err := parseConfig("test", args); !errors.As(err, &ue) {
			t.Errorf("parseConfig(%q) = %v; want a *cli.UsageError", args, err)
		}
	}
	config := [][]string{
		{"--log-level", "bogus"},
		{"--languages", "python,"},
		{"--codec-port", "70000"},
		{"--reap-interval", "0s"},
	}
	for _, args := range config {
		if _, _, err := parseConfig("test", args); guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("parseConfig(%q) = %v; want a ConfigError", args, err)
		}
	}
	t.Setenv("SANDBOXFLOW_LOG_LEVEL", "loud")
	if _, _, err := parseConfig("test", nil); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("SANDBOXFLOW_LOG_LEVEL=loud: %v; want a ConfigError", err)
	}
}

// The codec token on the command line is readable by the code --backend local runs (any uid reads
// /proc/PID/cmdline; backends/local's TestCodeReadsOtherProcessesCommandLines reads one), so the
// worker refuses it there; from SANDBOXFLOW_CODEC_TOKEN (the worker's own environment), or with
// another backend, it is taken.
func TestConfigRefusesCodecTokenFlagWithLocal(t *testing.T) {
	const token = "codec-token-0123456789abcdef"
	for _, args := range [][]string{
		{"--backend", "local", "--allow-unsafe-local", "--codec-token", token},
		{"--codec-token=" + token, "--backend=local", "--allow-unsafe-local"},
	} {
		if _, _, err := parseConfig("test", args); guard.TypeOf(err) != guard.TypeConfigError || !strings.Contains(err.Error(), "SANDBOXFLOW_CODEC_TOKEN") {
			t.Errorf("parseConfig(%q) = %v; want a ConfigError saying to use SANDBOXFLOW_CODEC_TOKEN", args, err)
		}
	}
	t.Setenv("SANDBOXFLOW_BACKEND", "local")
	if _, _, err := parseConfig("test", []string{"--allow-unsafe-local", "--codec-token", token}); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("--codec-token with SANDBOXFLOW_BACKEND=local: %v; want a ConfigError", err)
	}
	t.Setenv("SANDBOXFLOW_CODEC_TOKEN", token)
	if cfg, _, err := parseConfig("test", []string{"--allow-unsafe-local"}); err != nil || cfg.CodecToken != token {
		t.Errorf("SANDBOXFLOW_CODEC_TOKEN with --backend local: %v; want it taken", err)
	}
	t.Setenv("SANDBOXFLOW_BACKEND", "")
	t.Setenv("SANDBOXFLOW_CODEC_TOKEN", "")
	if cfg, _, err := parseConfig("test", []string{"--codec-token", token}); err != nil || cfg.CodecToken != token {
		t.Errorf("--codec-token with the Docker backend: %v; want it taken", err)
	}
}

// Sandbox counts not given are left to the host sizing at start; a flag or its environment
// fallback wins over it.
func TestConfigSandboxCountsFromHostUnlessGiven(t *testing.T) {
	for _, tc := range []struct {
		name           string
		env            map[string]string
		args           []string
		maxHost, wHost bool
		max, warm      int
	}{
		{"unset", nil, nil, true, true, 2, 2},
		{"max flag", nil, []string{"--max-sandboxes", "3"}, false, true, 3, 2},
		{"warm flag 0", nil, []string{"--warm-sandboxes", "0"}, true, false, 2, 0},
		{"environment", map[string]string{"SANDBOXFLOW_MAX_SANDBOXES": "5", "SANDBOXFLOW_WARM_SANDBOXES": "1"}, nil, false, false, 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, _, err := parseConfig("test", append([]string{"--backend", "docker"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MaxSandboxesFromHost != tc.maxHost || cfg.Docker.WarmSandboxesFromHost != tc.wHost || cfg.MaxSandboxes != tc.max || cfg.Docker.WarmSandboxes != tc.warm {
				t.Fatalf("from host %v/%v, max %d warm %d; want %v/%v, %d, %d", cfg.MaxSandboxesFromHost, cfg.Docker.WarmSandboxesFromHost,
					cfg.MaxSandboxes, cfg.Docker.WarmSandboxes, tc.maxHost, tc.wHost, tc.max, tc.warm)
			}
		})
	}
}

// The session caps (issue 28) come from their flags or SANDBOXFLOW_ variables, default to 1 h,
// 10 min and 100 cells, and a negative one is refused at start-up.
func TestConfigSessionCaps(t *testing.T) {
	cfg, _, err := parseConfig("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Policy(); p.MaxSessionLifetime != guard.DefaultMaxSessionLifetime || p.MaxSessionIdle != guard.DefaultMaxSessionIdle || p.MaxSessionCells != guard.DefaultMaxSessionCells {
		t.Errorf("defaults %s, %s, %d; want 1h, 10m, 100", p.MaxSessionLifetime, p.MaxSessionIdle, p.MaxSessionCells)
	}
	t.Setenv("SANDBOXFLOW_MAX_SESSION_CELLS", "7")
	t.Setenv("SANDBOXFLOW_MAX_SESSION_IDLE", "2m")
	cfg, _, err = parseConfig("test", []string{"--max-session-lifetime", "30m", "--max-session-cells", "9"})
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Policy(); p.MaxSessionLifetime != 30*time.Minute || p.MaxSessionIdle != 2*time.Minute || p.MaxSessionCells != 9 {
		t.Errorf("caps %s, %s, %d; want 30m (flag), 2m (environment), 9 (flag wins)", p.MaxSessionLifetime, p.MaxSessionIdle, p.MaxSessionCells)
	}
	for _, args := range [][]string{{"--max-session-lifetime", "-1s"}, {"--max-session-cells", "-3"}} {
		if _, _, err := parseConfig("test", args); guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("parseConfig(%q) = %v; want a ConfigError", args, err)
		}
	}
}

// --quorum and --risky-quorum reach the policy (flag or environment), and a quorum out of range
// is refused at start-up.
func TestConfigQuorum(t *testing.T) {
	cfg, _, err := parseConfig("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Policy(); p.QuorumFor(&guard.Checked{CheckedSettings: guard.CheckedSettings{Network: true}}) != 1 {
		t.Errorf("default quorum %d/%d; want 1", p.Quorum, p.RiskyQuorum)
	}
	t.Setenv("SANDBOXFLOW_RISKY_QUORUM", "3")
	cfg, _, err = parseConfig("test", []string{"--quorum", "2"})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policy()
	if p.QuorumFor(&guard.Checked{}) != 2 || p.QuorumFor(&guard.Checked{CheckedSettings: guard.CheckedSettings{Secrets: []string{"TOKEN"}}}) != 3 {
		t.Errorf("quorum %d, risky %d; want 2 (flag) and 3 (environment)", p.Quorum, p.RiskyQuorum)
	}
	for _, args := range [][]string{{"--quorum", "-1"}, {"--quorum", "17"}, {"--risky-quorum", "99"}} {
		if _, _, err := parseConfig("test", args); guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("parseConfig(%q) = %v; want a ConfigError", args, err)
		}
	}
}

// --late-result-wait defaults to activities' default and is read from the flag or the
// environment.
func TestConfigLateResultWait(t *testing.T) {
	cfg, _, err := parseConfig("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LateResultWait != activities.DefaultLateResultWait {
		t.Errorf("default late result wait %s; want %s", cfg.LateResultWait, activities.DefaultLateResultWait)
	}
	t.Setenv("SANDBOXFLOW_LATE_RESULT_WAIT", "5m")
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{{nil, 5 * time.Minute}, {[]string{"--late-result-wait", "30s"}, 30 * time.Second}} {
		cfg, _, err := parseConfig("test", tc.args)
		if err != nil {
			t.Fatalf("parseConfig(%q): %v", tc.args, err)
		}
		if cfg.LateResultWait != tc.want {
			t.Errorf("parseConfig(%q): late result wait %s; want %s", tc.args, cfg.LateResultWait, tc.want)
		}
	}
}
