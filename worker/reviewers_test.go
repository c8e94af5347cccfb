//go:build integration

package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/worker/service"
)

func TestWorkerRefusesToStartWithoutReviewers(t *testing.T) {
	cfg, _, err := parseConfig("worker", []string{"--data-dir", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = service.ReviewersFile(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if guard.TypeOf(err) != guard.TypeConfigError || !strings.Contains(err.Error(), "--reviewers FILE") || !strings.Contains(err.Error(), "allowed_signers") {
		t.Fatalf("no reviewers: %v; want a ConfigError that says to give --reviewers, an allowed_signers file", err)
	}

	bad := filepath.Join(t.TempDir(), "allowed_signers")
	if err := os.WriteFile(bad, []byte("alice ssh-rsa AAAA\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Reviewers = bad
	if _, err := service.ReviewersFile(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); guard.TypeOf(err) != guard.TypeConfigError {
		t.Fatalf("bad reviewers file: %v; want a ConfigError", err)
	}
}

func TestDevWorkerMakesReviewerKeysOnceAndPrintsThem(t *testing.T) {
	data := t.TempDir()
	t.Setenv("USER", "alice")
	t.Setenv("SANDBOXFLOW_REVIEWERS", "")
	cfg, _, err := parseConfig("worker", []string{"--dev", "--data-dir", data})
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	logger := slog.New(slog.NewTextHandler(&log, nil))
	path, err := service.ReviewersFile(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(data, "reviewer", "allowed_signers"); path != want {
		t.Errorf("reviewers file %s; want %s", path, want)
	}
	for _, want := range []string{"created", filepath.Join(data, "reviewer", "id_ed25519"), filepath.Join(data, "reviewer", "id_ed25519.pub"), path, "principal=alice"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	first, _ := os.ReadFile(path)
	log.Reset()
	if _, err := service.ReviewersFile(cfg, logger); err != nil || !strings.Contains(log.String(), "reusing") {
		t.Fatalf("second start: %v\n%s; want the key reused", err, log.String())
	}
	if again, _ := os.ReadFile(path); string(again) != string(first) {
		t.Error("the dev reviewer key changed on the second start")
	}
}

func TestReviewersFlagReadsItsEnvironmentVariable(t *testing.T) {
	t.Setenv("SANDBOXFLOW_REVIEWERS", "/etc/sandboxflow/allowed_signers")
	cfg, _, err := parseConfig("worker", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Reviewers != "/etc/sandboxflow/allowed_signers" {
		t.Errorf("--reviewers = %q; want SANDBOXFLOW_REVIEWERS", cfg.Reviewers)
	}
}
