//go:build integration

package main

import (
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

// --package-index offers packages in the policy (on every worker that checks requests), only
// with a backend that installs them, and without credentials in the URL.
func TestConfigPackageIndex(t *testing.T) {
	cfg, _, err := parseConfig("test", []string{"--package-index", "https://mirror.example/simple/"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Policy().Packages {
		t.Error("--package-index: the policy offers no packages")
	}
	if cfg, _, err := parseConfig("test", nil); err != nil || cfg.Policy().Packages {
		t.Errorf("no --package-index: %v, packages %t; want none offered", err, cfg.Policy().Packages)
	}
	for _, args := range [][]string{
		{"--package-index", "https://user:pass@mirror.example/simple/"},
		{"--package-index", "ftp://mirror.example/simple/"},
		{"--package-index", "https://mirror.example/simple/", "--backend", "local", "--allow-unsafe-local"},
		{"--package-refuse-hooks"},
		{"--package-cache", "/tmp/x"},
	} {
		if _, _, err := parseConfig("test", args); guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("%q: got %v; want a ConfigError", args, err)
		}
	}
}
