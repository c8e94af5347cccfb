package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
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
	}
}
