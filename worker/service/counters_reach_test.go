package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// The attack: code a root worker's local backend runs (as uid 65534) deletes the sandbox host's
// passkey counters file from a folder it may write, and the host then accepts an assertion of a
// cloned passkey whose counter did not grow, as if it had never seen the passkey. The local kind
// now refuses to start with the counters file (the sandbox host's, and with --dev the inbox's)
// in the code's reach, as it does for the reviewers file.
func TestLocalKindKeepsPasskeyCountersOutOfReach(t *testing.T) {
	need.Need(t, need.Root)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, err := os.MkdirTemp("", "sandboxflow-counters-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, shared} {
		if err := os.Chmod(d, map[string]os.FileMode{dir: 0o755, shared: 0o777}[d]); err != nil {
			t.Fatal(err)
		}
	}
	counters := filepath.Join(shared, "passkey-counters.json")
	seen := approval.Verified{Method: approval.MethodWebAuthn, Fingerprint: "SHA256:alice", Counter: 10, Challenge: "first"}
	clone := approval.Verified{Method: approval.MethodWebAuthn, Fingerprint: "SHA256:alice", Counter: 10, Challenge: "another statement"}
	if err := approval.NewCounters(counters).Advance(seen); err != nil {
		t.Fatal(err)
	}
	if err := approval.NewCounters(counters).Advance(clone); !errors.Is(err, approval.ReasonCounterReplayed) {
		t.Fatalf("the clone before the attack: %v; want %s", err, approval.ReasonCounterReplayed)
	}
	b, err := local.New(local.Config{AllowUnsafeLocal: true, UID: local.DefaultUID})
	if err != nil {
		t.Fatal(err)
	}
	checked, err := guard.Policy{Languages: []string{guard.Python}}.Check(guard.Request{Code: "import os\nos.remove(" + strconv.Quote(counters) + ")\nprint('gone')\n"}, local.Name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Run(context.Background(), checked)
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "gone" {
		t.Fatalf("the attack: %v, stdout %q stderr %q; want the code to delete the counters file", err, res.Stdout, res.Stderr)
	}
	if err := approval.NewCounters(counters).Advance(clone); err != nil {
		t.Fatalf("the clone after the attack: %v; want it accepted (the attack works)", err)
	}

	var ce *guard.ConfigError
	o := validOptions(t, kinds.Local, "--allow-unsafe-local")
	o.PasskeyCounters = counters
	if _, _, err := NewBackend(context.Background(), o, logger); !errors.As(err, &ce) || !strings.Contains(err.Error(), counters) {
		t.Errorf("the sandbox host's counters file in a folder the code may write: %v; want a ConfigError naming it", err)
	}
	o.PasskeyCounters, o.Dev, o.DataDir = "", true, shared
	if _, _, err := NewBackend(context.Background(), o, logger); !errors.As(err, &ce) || !strings.Contains(err.Error(), shared) {
		t.Errorf("--dev with the data folder the code may write: %v; want a ConfigError naming it", err)
	}
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	o.Dev, o.DataDir, o.PasskeyCounters = false, "", counters
	if _, closeBackend, err := NewBackend(context.Background(), o, logger); err != nil {
		t.Errorf("the counters file in a folder of 0755: %v; want the backend", err)
	} else {
		closeBackend()
	}
}
