//go:build integration

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/backends/e2b"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/e2bfake"
	"github.com/sandboxflow/sandboxflow/worker/service"
)

func TestHostedFlags(t *testing.T) {
	t.Setenv(e2b.EnvAPIKey, "")
	t.Setenv(e2b.EnvDomain, "e2b.example")
	cfg, _, err := parseConfig("test", []string{"--backend", "e2b", "--e2b-template", "py312"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.E2B.Template != "py312" || cfg.E2B.Domain != "e2b.example" || cfg.Backend != "e2b" {
		t.Errorf("template %q domain %q name %q; want py312, e2b.example (from E2B_DOMAIN), e2b", cfg.E2B.Template, cfg.E2B.Domain, cfg.Backend)
	}
	cfg, _, err = parseConfig("test", []string{"--backend", "http", "--http-url", "http://127.0.0.1:1/run"})
	if err != nil || cfg.Backend != "http" {
		t.Fatalf("--backend http --http-url: %v, name %q", err, cfg.Backend)
	}
	var ce *guard.ConfigError
	if _, _, err := parseConfig("test", []string{"--backend", "http"}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "--http-url") {
		t.Errorf("--backend http without --http-url: %v; want a ConfigError naming --http-url", err)
	}
	// No flag takes the key itself: a key on a command line shows in ps and shell history.
	if _, _, err := parseConfig("test", []string{"--backend", "e2b", "--e2b-api-key", "k"}); err == nil {
		t.Errorf("--e2b-api-key was accepted; want no such flag")
	}
}

func TestHostedBackendKeyHandling(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	t.Setenv(e2b.EnvAPIKey, "")
	cfg, _, err := parseConfig("test", []string{"--backend", "e2b"})
	if err != nil {
		t.Fatal(err)
	}
	var ce *guard.ConfigError
	if _, _, err := service.NewBackend(context.Background(), cfg, logger); !errors.As(err, &ce) || !strings.Contains(err.Error(), e2b.EnvAPIKey) {
		t.Fatalf("e2b without a key: %v; want a ConfigError naming %s", err, e2b.EnvAPIKey)
	}

	const key = "e2b_key_from_file_0123456789"
	fake := e2bfake.Start(t, key)
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err = parseConfig("test", []string{"--backend", "e2b", "--e2b-api-key-file", file,
		"--e2b-api-url", fake.APIURL(), "--e2b-sandbox-url", fake.SandboxURL()})
	if err != nil {
		t.Fatal(err)
	}
	b, closeBackend, err := service.NewBackend(context.Background(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	closeBackend()
	if b.Name() != e2b.Name {
		t.Errorf("backend %q; want e2b", b.Name())
	}
	if s := fmt.Sprintf("%+v", *cfg); strings.Contains(s, key) {
		t.Errorf("the worker's config holds the key: %s", s)
	}

	if _, _, err := service.NewBackend(context.Background(), &service.Options{Backend: "http", HTTP: service.HTTPOptions{URL: "http://127.0.0.1:1/", HeaderFile: filepath.Join(t.TempDir(), "missing")}}, logger); !errors.As(err, &ce) {
		t.Errorf("http with a missing header file: %v; want a ConfigError", err)
	}
}
