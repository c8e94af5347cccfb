package wheels

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/wheeltest"
)

func lock(t *testing.T, text string) []guard.Package {
	t.Helper()
	pkgs, err := guard.ParseLock(text)
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func installer(t *testing.T, ix *wheeltest.Index, refuse bool) *Installer {
	t.Helper()
	in, err := New(Config{Index: ix.URL(), CacheDir: t.TempDir(), RefuseHooks: refuse})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

var (
	alpha = wheeltest.Wheel{Name: "alpha", Version: "1.0", Requires: []string{"beta (>=2.0)", "gamma; python_version < '3'", "delta; extra == 'fast'"},
		Files: map[string]string{"alpha/__init__.py": "from beta import B\nA = 'a' + B\n"}}
	beta = wheeltest.Wheel{Name: "beta", Version: "2.1", Files: map[string]string{"beta.py": "B = 'b'\n"}}
)

// Two packages, one requiring the other: both install read-only, with their hashes; the second
// install of the lock comes from the cache and opens no connection (the index is stopped).
func TestInstallAndCache(t *testing.T) {
	ix := wheeltest.NewIndex(t)
	a, b := ix.AddWheel(t, alpha), ix.AddWheel(t, beta)
	in := installer(t, ix, false)
	pkgs := lock(t, wheeltest.Line("alpha", "1.0", a)+wheeltest.Line("beta", "2.1", b))
	env, err := in.Install(context.Background(), pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(env.Dir, "beta.py")); string(got) != "B = 'b'\n" {
		t.Errorf("beta.py = %q", got)
	}
	if env.Report.Cached || len(env.Report.Installed) != 2 || env.Report.Installed[0].SHA256 != strings.TrimPrefix(wheeltest.Hash(a), "sha256:") ||
		env.Report.Installed[1].File != beta.FileName() {
		t.Errorf("report %+v", env.Report)
	}
	if len(env.Fetches) != 4 || env.Fetches[0].Phase != guard.EgressPhaseInstall || env.Fetches[0].Host != "127.0.0.1" {
		t.Errorf("fetches %+v; want 4 of the install phase (2 pages, 2 wheels)", env.Fetches)
	}
	if err := os.WriteFile(filepath.Join(env.Dir, "beta.py"), []byte("x"), 0o644); err == nil && os.Geteuid() != 0 {
		t.Error("the environment's files are writable")
	}
	if st, _ := os.Stat(filepath.Join(env.Dir, "alpha")); st.Mode().Perm() != 0o555 {
		t.Errorf("folder mode %v; want 0555", st.Mode().Perm())
	}
	ix.Server.Close()
	before := ix.Requests()
	again, err := in.Install(context.Background(), pkgs, nil)
	if err != nil || !again.Report.Cached || len(again.Fetches) != 0 || again.Dir != env.Dir || ix.Requests() != before {
		t.Fatalf("second install: %+v, %v; want cached, no fetch", again, err)
	}
	// A fresh environment of another lock still reuses the verified wheel from the cache.
	only := lock(t, wheeltest.Line("beta", "2.1", b))
	if e, err := in.Install(context.Background(), only, nil); err != nil || len(e.Fetches) != 0 || e.Report.Cached {
		t.Errorf("beta alone: %+v, %v; want built from the wheel cache without a fetch", e, err)
	}
}

func TestInstallRefusals(t *testing.T) {
	ix := wheeltest.NewIndex(t)
	a, b := ix.AddWheel(t, alpha), ix.AddWheel(t, beta)
	changed := append([]byte(nil), b...)
	changed[len(changed)/2] ^= 1
	ix.Add(t, "sdonly", "sdonly-1.0.tar.gz", []byte("setup.py would run"))
	rogue := ix.AddWheel(t, wheeltest.Wheel{Name: "impostor", Version: "1.0", MetaName: "evil", Files: map[string]string{"evil.py": ""}})
	oldBeta := wheeltest.Wheel{Name: "beta", Version: "1.0", Files: map[string]string{"beta.py": ""}}
	old := ix.AddWheel(t, oldBeta)
	for _, tc := range []struct {
		name, lock string
		reason     guard.PackageReason
		says       string
	}{
		{"a changed byte", wheeltest.Line("beta", "2.1", changed), guard.PackageHashMismatch, "has sha256:" + strings.TrimPrefix(wheeltest.Hash(b), "sha256:")},
		{"a dependency missing from the lock", wheeltest.Line("alpha", "1.0", a), guard.PackageMissingDependency, `requires "beta (>=2.0)"`},
		{"a dependency at a version its requirement refuses", wheeltest.Line("alpha", "1.0", a) + wheeltest.Line("beta", "1.0", old), guard.PackageMissingDependency, "pins beta==1.0"},
		{"an sdist only", "sdonly==1.0 --hash=sha256:" + strings.Repeat("0", 64), guard.PackageSdistOnly, "sdonly-1.0.tar.gz"},
		{"another distribution's wheel", wheeltest.Line("impostor", "1.0", rogue), guard.PackageWrongDistribution, "holds evil 1.0"},
		{"a package the index lacks", "absent==1.0 --hash=sha256:" + strings.Repeat("0", 64), guard.PackageNotFound, "no page"},
		{"a version the index lacks", "beta==9.9 --hash=sha256:" + strings.Repeat("0", 64), guard.PackageNotFound, "no wheel of version 9.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := installer(t, ix, false).Install(context.Background(), lock(t, tc.lock), nil)
			var pe *guard.PackageError
			if !errors.As(err, &pe) || pe.Reason != tc.reason || !strings.Contains(pe.Msg, tc.says) || guard.Retryable(err) {
				t.Errorf("got %v; want a non-retryable %s saying %q", err, tc.reason, tc.says)
			}
		})
	}
	t.Run("an unreachable index", func(t *testing.T) {
		in := installer(t, ix, false)
		ix.Server.Close()
		_, err := in.Install(context.Background(), lock(t, wheeltest.Line("beta", "2.1", b)), nil)
		var pe *guard.PackageError
		if !errors.As(err, &pe) || pe.Reason != guard.PackageIndexUnreachable || !guard.Retryable(err) {
			t.Errorf("got %v; want a retryable index_unreachable", err)
		}
	})
}

// What a wheel puts on the path that runs on its own or shadows something is warned of, and
// refused with RefuseHooks.
func TestHookWarnings(t *testing.T) {
	ix := wheeltest.NewIndex(t)
	w := ix.AddWheel(t, wheeltest.Wheel{Name: "hooky", Version: "1.0", Files: map[string]string{
		"hooky.pth": "import os; os.system('id')\n", "sitecustomize.py": "", "json/__init__.py": "", "helper.py": "",
		"hooky-1.0.data/scripts/run": "#!/bin/sh\n", "hooky-1.0.data/purelib/hooky_lib.py": "X = 1\n"}})
	pkgs := lock(t, wheeltest.Line("hooky", "1.0", w))
	env, err := installer(t, ix, false).Install(context.Background(), pkgs, []string{"helper.py", "data.csv"})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(env.Report.Warnings, "\n")
	for _, want := range []string{"hooky.pth, a .pth file", "sitecustomize.py", "json/, the name of a standard library module", "input helper.py", "hooky-1.0.data/scripts is not installed"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q; want one saying %q", all, want)
		}
	}
	if _, err := os.Stat(filepath.Join(env.Dir, "hooky_lib.py")); err != nil {
		t.Errorf("purelib not merged into the site folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(env.Dir, "hooky-1.0.data")); err == nil {
		t.Error("the .data folder was installed")
	}
	_, err = installer(t, ix, true).Install(context.Background(), pkgs, nil)
	var pe *guard.PackageError
	if !errors.As(err, &pe) || pe.Reason != guard.PackageHooksRefused {
		t.Errorf("with RefuseHooks: %v; want hooks_refused", err)
	}
}

// Runs of the same lock at the same time build one environment and both use it.
func TestConcurrentInstalls(t *testing.T) {
	ix := wheeltest.NewIndex(t)
	b := ix.AddWheel(t, beta)
	cache := t.TempDir()
	pkgs := lock(t, wheeltest.Line("beta", "2.1", b))
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	for i := range dirs {
		wg.Go(func() {
			// Separate installers share the folder, as two worker processes of one host would.
			in, _ := New(Config{Index: ix.URL(), CacheDir: cache})
			env, err := in.Install(context.Background(), pkgs, nil)
			if err != nil {
				t.Error(err)
			}
			dirs[i] = env.Dir
		})
	}
	wg.Wait()
	for _, d := range dirs {
		if d != dirs[0] {
			t.Errorf("dirs %q; want one environment", dirs)
		}
	}
	left, _ := filepath.Glob(filepath.Join(cache, "envs", ".build-*"))
	if len(left) != 0 {
		t.Errorf("temporary folders left: %q", left)
	}
}

// A private index's credentials go with the host's fetches (and the audit names the secret),
// never anywhere the sandbox reads.
func TestPrivateIndexCredentials(t *testing.T) {
	ix := wheeltest.NewPrivateIndex(t, "Bearer s3cret")
	b := ix.AddWheel(t, beta)
	pkgs := lock(t, wheeltest.Line("beta", "2.1", b))
	header := func(u *url.URL) (http.Header, []string) {
		if u.Hostname() != "127.0.0.1" {
			return nil, nil
		}
		return http.Header{"Authorization": {"Bearer s3cret"}}, []string{"mirror"}
	}
	in, err := New(Config{Index: ix.URL(), CacheDir: t.TempDir(), Client: ix.Server.Client(), Header: header})
	if err != nil {
		t.Fatal(err)
	}
	env, err := in.Install(context.Background(), pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(env.Fetches) != 2 || len(env.Fetches[1].Secrets) != 1 || env.Fetches[1].Secrets[0] != "mirror" {
		t.Errorf("fetches %+v; want two naming the secret", env.Fetches)
	}
	files, _ := filepath.Glob(filepath.Join(env.Dir, "..", "*"))
	for _, f := range files {
		if data, _ := os.ReadFile(f); strings.Contains(string(data), "s3cret") {
			t.Errorf("%s holds the credential", f)
		}
	}
	without, _ := New(Config{Index: ix.URL(), CacheDir: t.TempDir(), Client: ix.Server.Client()})
	if _, err := without.Install(context.Background(), pkgs, nil); guard.TypeOf(err) != guard.TypePackageError {
		t.Errorf("without credentials: %v; want a PackageError", err)
	}
}

// An environment linked into a sandbox's slot holds the same files, read-only, and goes away
// whole.
func TestLinkEnv(t *testing.T) {
	ix := wheeltest.NewIndex(t)
	a, b := ix.AddWheel(t, alpha), ix.AddWheel(t, beta)
	in := installer(t, ix, false)
	env, err := in.Install(context.Background(), lock(t, wheeltest.Line("alpha", "1.0", a)+wheeltest.Line("beta", "2.1", b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	slot := filepath.Join(t.TempDir(), "slot")
	if err := os.Mkdir(slot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := LinkEnv(env.Dir, slot); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(slot, "alpha", "__init__.py")); !strings.Contains(string(got), "from beta import B") {
		t.Errorf("alpha/__init__.py in the slot = %q", got)
	}
	if st, _ := os.Stat(filepath.Join(slot, "alpha")); st.Mode().Perm() != 0o555 {
		t.Errorf("slot folder mode %v; want 0555", st.Mode().Perm())
	}
	if err := RemoveTree(slot); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(slot); !os.IsNotExist(err) {
		t.Errorf("slot left after RemoveTree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(env.Dir, "beta.py")); err != nil {
		t.Errorf("the environment lost a file with its slot: %v", err)
	}
}
