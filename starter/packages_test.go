package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// testPackages is a lock of two packages, one with two hashes and an extra.
func testPackages(t *testing.T) []guard.Package {
	t.Helper()
	pkgs, err := guard.ParseLock("numpy==2.1.0 --hash=sha256:" + strings.Repeat("1", 64) +
		"\nplot-kit[fast]==0.3 --hash=sha256:" + strings.Repeat("2", 64) + " --hash=sha256:" + strings.Repeat("3", 64) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// `show` and `session show` list every package with its version, extras and every hash in full:
// what the digest binds is what the reviewer reads.
func TestShowListsPackagesWithEveryHash(t *testing.T) {
	pkgs := testPackages(t)
	run := hostileReview(false)
	run.Request.Packages = pkgs
	session := hostileSession()
	session.Settings.Packages = pkgs
	cellPkgs := []guard.Package{{Name: "zeta", Version: "9", Hashes: []string{"sha256:" + strings.Repeat("9", 64)}}}
	session.Cells[2].Packages = cellPkgs
	session.Views[2].PackageChanges = guard.DiffPackages(nil, cellPkgs)
	now := time.Date(2026, 1, 1, 0, 15, 0, 0, time.UTC)
	for name, print := range map[string]func(*bytes.Buffer) error{
		"show":         func(b *bytes.Buffer) error { return printReview(b, run, now) },
		"session show": func(b *bytes.Buffer) error { return printSessionReview(b, session, now) },
	} {
		var b bytes.Buffer
		if err := print(&b); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range []string{"numpy==2.1.0 (installed before the code runs", "plot-kit[fast]==0.3 (installed before",
			"--hash=sha256:" + strings.Repeat("1", 64), "--hash=sha256:" + strings.Repeat("2", 64), "--hash=sha256:" + strings.Repeat("3", 64)} {
			if !strings.Contains(out, want) {
				t.Errorf("%s does not show %q:\n%s", name, want, out)
			}
		}
		if name == "session show" {
			for _, want := range []string{"zeta==9 (installed before", "--hash=sha256:" + strings.Repeat("9", 64), "added zeta==9 (against the session's packages so far)"} {
				if !strings.Contains(out, want) {
					t.Errorf("session show does not show cell 3's %q:\n%s", want, out)
				}
			}
		}
	}
}

// --packages FILE reads the lock for run, session open and session cell; a lock that does
// not parse, or is over guard.MaxPackageLockBytes, is a usage error before anything starts.
func TestPackagesFlag(t *testing.T) {
	dir := t.TempDir()
	lock := "numpy==2.1.0 --hash=sha256:" + strings.Repeat("1", 64) + "\n"
	good, bad, huge := filepath.Join(dir, "good.txt"), filepath.Join(dir, "bad.txt"), filepath.Join(dir, "huge.txt")
	for p, b := range map[string]string{good: lock, bad: "numpy>=2 --hash=sha256:" + strings.Repeat("1", 64),
		huge: lock + strings.Repeat("#", guard.MaxPackageLockBytes)} {
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(args ...string) (*command, error) {
		cmd, err := parseArgs(args, io.Discard)
		if err != nil {
			return nil, err
		}
		if args[0] == "run" {
			return cmd, prepareRun(cmd, strings.NewReader(""))
		}
		return cmd, cmd.readSession(strings.NewReader(""))
	}
	if cmd, err := read("run", "--code", "import numpy", "--packages", good); err != nil || cmd.req.Packages != lock {
		t.Errorf("run --packages: %q, %v; want the lock", cmd.req.Packages, err)
	}
	if cmd, err := read("session", "open", "--packages", good); err != nil || cmd.session.Packages != lock {
		t.Errorf("session open --packages: %v", err)
	}
	if cmd, err := read("session", "cell", "session-1", "--code", "import numpy", "--packages", good); err != nil || cmd.req.Packages != lock {
		t.Errorf("session cell --packages: %v", err)
	}
	for _, f := range []string{bad, huge, filepath.Join(dir, "missing.txt")} {
		var usage *cli.UsageError
		if _, err := read("run", "--code", "x", "--packages", f); !errors.As(err, &usage) {
			t.Errorf("run --packages %s: %v; want a usage error", filepath.Base(f), err)
		}
	}
}

// pending says how many packages a waiting run brings (show lists them).
func TestPendingCountsPackages(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := printPending(&b, client.PendingPage{Runs: []client.Pending{{WorkflowID: "sandbox-p", StartTime: now}}},
		[]pendingDetail{{Kind: "run", Packages: 2}}, defaultPageSize, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "run +2 pkg") {
		t.Errorf("pending:\n%s", b.String())
	}
}
