//go:build integration

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

func writeSecrets(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigSecretsFile(t *testing.T) {
	path := writeSecrets(t, "# test\ngh api.github.com Authorization: Bearer sekrit\n")
	for _, how := range []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--secrets-file", path}, ""},
		{"environment", nil, path},
	} {
		t.Run(how.name, func(t *testing.T) {
			if how.env != "" {
				t.Setenv("SANDBOXFLOW_SECRETS_FILE", how.env)
			}
			cfg, _, err := parseConfig("test", how.args)
			if err != nil {
				t.Fatal(err)
			}
			p := cfg.Policy()
			if !slices.Equal(p.SecretNames, []string{"gh"}) {
				t.Fatalf("policy secret names: got %v; want [gh]", p.SecretNames)
			}
			if strings.Contains(p.String(), "sekrit") {
				t.Errorf("the policy's description shows the secret value")
			}
		})
	}
	_, _, err := parseConfig("test", []string{"--secrets-file", writeSecrets(t, "gh api.github.com no-header-here\n")})
	if guard.TypeOf(err) != guard.TypeConfigError || !strings.Contains(err.Error(), "--secrets-file") {
		t.Errorf("a malformed secrets file: got %v; want a ConfigError naming --secrets-file", err)
	}
}

// Issue 13: network=true is refused unless the operator set --allow-open-network, and egress
// outside --egress-allow is refused, both as ConfigErrors that say what to change.
func TestConfigNetworkAndEgressPolicy(t *testing.T) {
	cfg, _, err := parseConfig("test", []string{"--egress-allow", "api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policy()
	_, err = p.Check(guard.Request{Code: "x", Language: guard.Python, Settings: guard.Settings{Network: true}}, "docker")
	if guard.TypeOf(err) != guard.TypeConfigError || !strings.Contains(err.Error(), "--allow-open-network") {
		t.Errorf("network=true without --allow-open-network: got %v; want a ConfigError naming the flag", err)
	}
	if _, err := p.Check(guard.Request{Code: "x", Language: guard.Python, Settings: guard.Settings{Egress: []string{"api.example.com"}}}, "docker"); err != nil {
		t.Errorf("egress inside --egress-allow: %v", err)
	}
	if _, err := p.Check(guard.Request{Code: "x", Language: guard.Python, Settings: guard.Settings{Egress: []string{"evil.example"}}}, "docker"); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("egress outside --egress-allow: got %v; want a ConfigError", err)
	}
	open, _, err := parseConfig("test", []string{"--allow-open-network"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.Policy().Check(guard.Request{Code: "x", Language: guard.Python, Settings: guard.Settings{Network: true}}, "docker"); err != nil {
		t.Errorf("network=true with --allow-open-network: %v", err)
	}
}
