package main

import (
	"slices"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

// TestConfigSourcePolicy: mixed indentation is refused unless --allow-mixed-indentation is
// given, and --sensitive-env reaches the policy.
func TestConfigSourcePolicy(t *testing.T) {
	mixed := guard.Request{Code: "if True:\n    \tprint(1)\n"}
	cfg, _, err := parseConfig("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Policy().Check(mixed, "docker"); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("default worker policy, mixed indentation: got %v; want a ToolUsageError", err)
	}
	cfg, _, err = parseConfig("test", []string{"--allow-mixed-indentation", "--sensitive-env", "TOKEN, API_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policy()
	if _, err := p.Check(mixed, "docker"); err != nil {
		t.Errorf("--allow-mixed-indentation: %v", err)
	}
	if !slices.Equal(p.SensitiveEnv, []string{"TOKEN", "API_KEY"}) {
		t.Errorf("--sensitive-env: policy has %q; want [TOKEN API_KEY]", p.SensitiveEnv)
	}
	c, err := p.Check(guard.Request{Code: "print(1)\n", Settings: guard.Settings{Env: map[string]string{"token": "x", "OTHER": "y"}}}, "docker")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.SensitiveEnv, []string{"token"}) {
		t.Errorf("checked sensitive env: %q; want [token] (names match ignoring case)", c.SensitiveEnv)
	}
	if _, _, err := parseConfig("test", []string{"--sensitive-env", "NOT-PLAIN"}); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("--sensitive-env NOT-PLAIN: got %v; want a ConfigError", err)
	}
}
