//go:build integration

package docker

// The package install (issue 48) on the real daemon, under runc and runsc: the host installs a
// lock from an index of the test's own on loopback, the code imports it read-only and cannot
// reach the index, a second run of the lock opens no connection, and each refusal ends before
// any container exists.

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/wheeltest"
	"github.com/sandboxflow/sandboxflow/wheels"
)

// packagesIndex serves alpha 1.0 (requiring beta), beta 2.1 (with a .pth file and a
// sitecustomize that would print if they ever ran), and gamma, which no lock here names.
func packagesIndex(t *testing.T) (*wheeltest.Index, string) {
	ix := wheeltest.NewIndex(t)
	a := ix.AddWheel(t, wheeltest.Wheel{Name: "alpha", Version: "1.0", Requires: []string{"beta>=2"},
		Files: map[string]string{"alpha/__init__.py": "from beta import B\nA = 'a' + B\n"}})
	b := ix.AddWheel(t, wheeltest.Wheel{Name: "beta", Version: "2.1", Files: map[string]string{
		"beta.py": "B = 'b'\n", "beta-hook.pth": "import sys; sys.stdout.write('PTH-RAN\\n')\n",
		"sitecustomize.py": "print('SITECUSTOMIZE-RAN')\n"}})
	ix.AddWheel(t, wheeltest.Wheel{Name: "gamma", Version: "1.0", Files: map[string]string{"gamma.py": ""}})
	return ix, wheeltest.Line("alpha", "1.0", a) + wheeltest.Line("beta", "2.1", b)
}

const packagesProbe = `
import sys, os, urllib.request
import alpha, beta
print("A=" + alpha.A)
print("from=" + os.path.dirname(beta.__file__))
pk = sys.path.index("/opt/sandboxflow/packages")
site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
std = sys.path.index("/usr/lib/python3.11")
print("order=%s" % (std < pk and all(pk < i for i in site)))
try:
    import gamma
    print("gamma=imported")
except ImportError:
    print("gamma=refused")
try:
    open("/opt/sandboxflow/packages/beta.py", "w")
    print("write=ok")
except OSError as e:
    print("write=refused")
for name, url in (("index", os.environ["INDEX"]), ("indexbyname", os.environ["INDEX_BY_NAME"])):
    try:
        urllib.request.urlopen(url + "/beta/", timeout=10)
        print(name + "=reached")
    except Exception as e:
        print(name + "=refused")
`

func packagesPolicy() guard.Policy {
	p := testPolicy
	p.AllowOpenNetwork = false
	p.Packages = true
	return p
}

func TestPackagesIntegration(t *testing.T) {
	eachSessionRuntime(t, func(t *testing.T, rt string) {
		ix, lockText := packagesIndex(t)
		in, err := wheels.New(wheels.Config{Index: ix.URL(), CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(ix.Server.URL, "http://"))
		b := newTestBackend(t, rt, func(c *Config) {
			c.Packages = in
			c.Egress = EgressConfig{PrivateOK: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
				Resolver: mapResolver{"other.test": "127.0.0.1", "index.test": "127.0.0.1"}}
		})
		p := packagesPolicy()
		p.EgressAllow = []string{"other.test:1"}
		check := func(code, lock string, files map[string][]byte) guard.Checked {
			req := guard.Request{Code: code, Language: guard.Python, Settings: guard.Settings{Packages: lock, Egress: p.EgressAllow, Files: files,
				Env: map[string]string{"INDEX": "http://127.0.0.1:" + port + "/simple", "INDEX_BY_NAME": "http://index.test:" + port + "/simple"}, Limits: guard.Limits{Timeout: 40 * time.Second}}}
			c, err := p.Check(req, Name)
			if err != nil {
				t.Fatal(err)
			}
			c.Owner = guard.Owner{WorkflowID: "test-" + randomHex(6), RunID: t.Name(), ActivityID: "1"}
			return c
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()

		t.Run("installs and the code imports, read-only, and cannot reach the index", func(t *testing.T) {
			res, err := b.Run(ctx, check(packagesProbe, lockText, nil))
			if err != nil {
				t.Fatal(err)
			}
			out := keyValues(res.Stdout)
			want := map[string]string{"A": "ab", "from": "/opt/sandboxflow/packages", "order": "True", "gamma": "refused", "write": "refused", "index": "refused", "indexbyname": "refused"}
			for k, v := range want {
				if out[k] != v {
					t.Errorf("%s=%q; want %q (stdout %s, stderr %s)", k, out[k], v, res.Stdout, res.Stderr)
				}
			}
			if strings.Contains(string(res.Stdout), "RAN") {
				t.Errorf("a .pth file or sitecustomize of a wheel ran: %s", res.Stdout)
			}
			if res.Packages == nil || len(res.Packages.Installed) != 2 || res.Packages.Cached {
				t.Fatalf("packages report %+v; want two installed, not cached", res.Packages)
			}
			if w := strings.Join(res.Packages.Warnings, "\n"); !strings.Contains(w, "beta-hook.pth") || !strings.Contains(w, "sitecustomize.py") {
				t.Errorf("warnings %q; want the .pth file and the sitecustomize", w)
			}
			var install, refused int
			for _, a := range res.Egress.Attempts {
				switch {
				case a.Phase == guard.EgressPhaseInstall && a.Allowed:
					install++
				case a.Phase == "" && !a.Allowed && a.Host == "index.test" && a.Port == mustPort(t, port):
					refused++
				}
			}
			if install != 4 || refused != 1 {
				t.Errorf("egress %+v; want the install's 4 fetches marked install and the code's attempt on the index (by name, through the proxy) refused", res.Egress.Attempts)
			}
		})
		t.Run("a second run of the lock opens no connection", func(t *testing.T) {
			before := ix.Requests()
			res, err := b.Run(ctx, check("import alpha\nprint('A=' + alpha.A)", lockText, nil))
			if err != nil || keyValues(res.Stdout)["A"] != "ab" || res.Packages == nil || !res.Packages.Cached || ix.Requests() != before {
				t.Fatalf("got %+v, %v (index requests %d → %d); want the cached environment, no request", res.Packages, err, before, ix.Requests())
			}
		})
		t.Run("a warm sandbox takes the environment into its slot", func(t *testing.T) {
			warm := newTestBackend(t, rt, func(c *Config) { c.Packages, c.WarmSandboxes = in, 1 })
			before := warm.WarmStats().Taken
			waitIdle(t, warm, 1)
			res, err := warm.Run(ctx, check("import alpha, sys\nprint('A=' + alpha.A)\nprint('path=%s' % ('/opt/sandboxflow/packages' in sys.path))", lockText, nil))
			if err != nil || keyValues(res.Stdout)["A"] != "ab" || warm.WarmStats().Taken != before+1 {
				t.Fatalf("got %s %s, %v, taken %d; want alpha imported in a warm sandbox", res.Stdout, res.Stderr, err, warm.WarmStats().Taken-before)
			}
			waitIdle(t, warm, 1)
			// A run without packages in a warm sandbox sees its empty slot off the path.
			res, err = warm.Run(ctx, checked(t, guard.Python, "import sys, os\nprint('path=%s' % ('/opt/sandboxflow/packages' in sys.path))\nprint('slot=%s' % os.listdir('/opt/sandboxflow/packages'))", nil))
			if err != nil || keyValues(res.Stdout)["path"] != "False" || keyValues(res.Stdout)["slot"] != "[]" {
				t.Fatalf("got %s %s, %v; want no package folder on the path, an empty slot", res.Stdout, res.Stderr, err)
			}
		})
		t.Run("a session's cells share the environment", func(t *testing.T) {
			req := guard.SessionRequest{Settings: guard.Settings{Packages: lockText, Limits: guard.Limits{Timeout: 20 * time.Second}}}
			cs, err := packagesPolicy().CheckSession(req, Name)
			if err != nil {
				t.Fatal(err)
			}
			cs.Owner = guard.Owner{WorkflowID: "test-session-" + randomHex(6), RunID: "run-" + randomHex(4), ActivityID: "open"}
			sb, err := b.OpenSession(ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(context.Background())
			for i, code := range []string{"import alpha", "print('A=' + alpha.A)"} {
				res, err := sb.RunCell(ctx, guard.Cell{Index: i + 1, Language: guard.Python, Code: code}, cs.Limits)
				if err != nil || !res.OK || res.Packages == nil {
					t.Fatalf("cell %d: %+v, %v", i+1, res, err)
				}
				if i == 1 && keyValues(res.Stdout)["A"] != "ab" {
					t.Errorf("cell 2 stdout %q", res.Stdout)
				}
			}
		})
	})
}

func mustPort(t *testing.T, s string) uint16 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}

// Each refusal ends the run with its typed error before any container exists for it.
func TestPackagesRefusedBeforeAnyContainer(t *testing.T) {
	needDocker(t)
	ix, lockText := packagesIndex(t)
	bad := []byte(lockText)
	i := strings.Index(lockText, "--hash=sha256:") + len("--hash=sha256:")
	bad[i] = map[bool]byte{true: '1', false: '0'}[bad[i] == '0']
	ix.Add(t, "onlysource", "onlysource-1.0.tar.gz", []byte("setup.py"))
	zero := " --hash=sha256:" + strings.Repeat("0", 64) + "\n"
	in, err := wheels.New(wheels.Config{Index: ix.URL(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b := newTestBackend(t, "runc", func(c *Config) { c.Packages = in })
	for _, tc := range []struct {
		name, lock string
		reason     guard.PackageReason
	}{
		{"a hash the wheel does not have", string(bad), guard.PackageHashMismatch},
		{"a dependency missing from the lock", lockText[:strings.Index(lockText, "beta==")], guard.PackageMissingDependency},
		{"an sdist", "onlysource==1.0" + zero, guard.PackageSdistOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := guard.Request{Code: "print('RAN')", Language: guard.Python, Settings: guard.Settings{Packages: tc.lock, Limits: guard.Limits{Timeout: 20 * time.Second}}}
			c, err := packagesPolicy().Check(req, Name)
			if err != nil {
				t.Fatal(err)
			}
			c.Owner = guard.Owner{WorkflowID: "test-" + randomHex(6), RunID: t.Name(), ActivityID: "1"}
			_, err = b.Run(context.Background(), c)
			var pe *guard.PackageError
			if !errors.As(err, &pe) || pe.Reason != tc.reason {
				t.Fatalf("got %v; want a PackageError %s", err, tc.reason)
			}
			if n := len(containersOf(t, c.Owner.WorkflowID)); n != 0 {
				t.Errorf("%d containers made for a refused lock", n)
			}
		})
	}
}

// cellPackagesProbe imports alpha and beta and says where from; print "none" when it cannot.
const cellPackagesProbe = `
import os, sys
try:
    import alpha, beta
    print("A=" + alpha.A)
    print("from=" + os.path.dirname(beta.__file__))
except ImportError:
    print("A=none")
`

// A session opened without packages gets a cell's packages installed by the host before that
// cell's code runs (issue 48): the cell and later ones import them, a fresh interpreter too; a
// lock with a changed byte ends its cell with the typed error, no code run, and the session
// goes on; the code cannot write into the package mount; a cell adds to a session opened with
// packages; a session taken over by another worker refuses cells with packages.
func TestSessionCellPackagesIntegration(t *testing.T) {
	eachSessionRuntime(t, func(t *testing.T, rt string) {
		ix := wheeltest.NewIndex(t)
		a := ix.AddWheel(t, wheeltest.Wheel{Name: "alpha", Version: "1.0", Requires: []string{"beta>=2"},
			Files: map[string]string{"alpha/__init__.py": "from beta import B\nA = 'a' + B\n"}})
		bw := ix.AddWheel(t, wheeltest.Wheel{Name: "beta", Version: "2.1", Files: map[string]string{"beta.py": "B = 'b'\n"}})
		g := ix.AddWheel(t, wheeltest.Wheel{Name: "gamma", Version: "1.0", Files: map[string]string{"gamma.py": ""}})
		in, err := wheels.New(wheels.Config{Index: ix.URL(), CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		b := newTestBackend(t, rt, func(c *Config) { c.Packages = in })
		p := packagesPolicy()
		ts := openSession(t, b, nil)
		ts.p = &p
		cell := func(code, lock string) (guard.Result, error) {
			t.Helper()
			var pkgs []guard.Package
			if lock != "" {
				if pkgs, err = guard.ParseLock(lock); err != nil {
					t.Fatal(err)
				}
			}
			c, err := p.CheckCell(ts.cs, ts.next, guard.Python, code, pkgs...)
			if err != nil {
				t.Fatal(err)
			}
			ts.next++
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			return ts.sb.RunCell(ctx, c, ts.cs.Limits)
		}
		mustCell := func(what, code, lock, want string) guard.Result {
			t.Helper()
			res, err := cell(code, lock)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if out := keyValues(res.Stdout); out["A"] != want {
				t.Errorf("%s: A=%q; want %q (stdout %q, stderr %q)", what, out["A"], want, res.Stdout, res.Stderr)
			}
			return res
		}

		mustCell("cell 1, no packages", cellPackagesProbe, "", "none")
		lock := wheeltest.Line("alpha", "1.0", a) + wheeltest.Line("beta", "2.1", bw)
		res := mustCell("cell 2, brings alpha and beta", cellPackagesProbe+"kept = 7\n", lock, "ab")
		if from := keyValues(res.Stdout)["from"]; !strings.HasPrefix(from, PackagesMount+"/cell-2-") {
			t.Errorf("cell 2 imported beta from %q; want %s/cell-2-*", from, PackagesMount)
		}
		if res.Packages == nil || len(res.Packages.Installed) != 2 {
			t.Errorf("cell 2's result lists %+v; want alpha and beta installed", res.Packages)
		}
		if res.Egress == nil || len(res.Egress.Attempts) == 0 || res.Egress.Attempts[0].Phase != guard.EgressPhaseInstall {
			t.Errorf("cell 2's egress audit %+v; want the install's fetches first", res.Egress)
		}
		res = mustCell("cell 3, no packages", cellPackagesProbe+`
print("kept=%d" % kept)
import glob
linked = glob.glob("/opt/sandboxflow/packages/cell-2-*/beta.py")
print("linked=%d" % len(linked))
for p in linked + ["/opt/sandboxflow/packages/evil.py", "/opt/sandboxflow/packages/cell-9/x.py"]:
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "w").write("B = 'evil'")
        print("write=ok " + p)
    except OSError:
        pass
`, "", "ab")
		if out := keyValues(res.Stdout); out["kept"] != "7" || out["linked"] != "1" || out["write"] != "" {
			t.Errorf("cell 3: kept=%q linked=%q write=%q; want the interpreter kept, cell 2's beta found and no write (stdout %q)", out["kept"], out["linked"], out["write"], res.Stdout)
		}
		if res.Egress != nil && len(res.Egress.Attempts) > 0 {
			t.Errorf("cell 3's egress audit lists %+v; the install's fetches were told in cell 2", res.Egress.Attempts)
		}

		bad := []byte(wheeltest.Hash(g))
		bad[len(bad)-1] = map[bool]byte{true: '1', false: '0'}[bad[len(bad)-1] == '0']
		_, err = cell(`print("RAN")`, "gamma==1.0 --hash="+string(bad)+"\n")
		var pe *guard.PackageError
		if !errors.As(err, &pe) {
			t.Fatalf("cell 4, a lock with a changed byte: %v; want a PackageError", err)
		}
		mustCell("cell 5, after the refused cell", cellPackagesProbe, "", "ab")
		if _, err := cell("import os\nos._exit(3)", ""); err != nil {
			t.Fatal(err)
		}
		res = mustCell("cell 7, a fresh interpreter", cellPackagesProbe, "", "ab")
		if !res.StateReset {
			t.Errorf("cell 7 did not say its state was reset")
		}

		cellAddsToSessionPackages(t, b, p, a, bw)

		// Another worker takes the session over: it knows neither the slot nor what was
		// installed, so it refuses a cell with packages; the packages already there stay.
		sendAndDie(t, ts.sb, guard.Cell{}, ts.cs.Limits, "")
		b2 := newTestBackend(t, rt, func(c *Config) { c.Packages = in })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if ts.sb, _, err = b2.AdoptSession(ctx, ts.sb.ID(), adoptable(ts.cs), nil); err != nil {
			t.Fatalf("adopt: %v", err)
		}
		var ce *guard.ConfigError
		if _, err := cell(`print("RAN")`, wheeltest.Line("gamma", "1.0", g)); !errors.As(err, &ce) || !strings.Contains(err.Error(), "taken over") {
			t.Errorf("a cell with packages in the adopted session: %v; want the ConfigError", err)
		}
		mustCell("a cell in the adopted session", cellPackagesProbe, "", "ab")
	})
}

// cellAddsToSessionPackages: in a session opened with beta, a cell adds alpha (which requires
// beta, in the set); its folder comes before the session's own on the path.
func cellAddsToSessionPackages(t *testing.T, b *Backend, p guard.Policy, a, bw []byte) {
	t.Helper()
	req := guard.SessionRequest{Settings: guard.Settings{Packages: wheeltest.Line("beta", "2.1", bw), Limits: guard.Limits{Timeout: 20 * time.Second}}}
	withBeta, err := p.CheckSession(req, Name)
	if err != nil {
		t.Fatal(err)
	}
	withBeta.Owner = guard.Owner{WorkflowID: "test-session-" + randomHex(6), RunID: "run-" + randomHex(4), ActivityID: "open"}
	ctx0, cancel0 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel0()
	sb2, err := b.OpenSession(ctx0, withBeta)
	if err != nil {
		t.Fatal(err)
	}
	defer sb2.Close(context.Background())
	addAlpha, err := guard.ParseLock(wheeltest.Line("alpha", "1.0", a))
	if err != nil {
		t.Fatal(err)
	}
	c1, err := p.CheckCell(withBeta, 1, guard.Python, cellPackagesProbe+`print("order=%s" % (sys.path.index(os.path.dirname(alpha.__path__[0])) < sys.path.index("/opt/sandboxflow/packages")))`, addAlpha...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb2.RunCell(ctx0, c1, withBeta.Limits)
	if out := keyValues(res.Stdout); err != nil || out["A"] != "ab" || out["order"] != "True" || res.Packages == nil || len(res.Packages.Installed) != 2 {
		t.Errorf("a cell adding alpha to a session with beta: %v, stdout %q stderr %q packages %+v; want both, its folder first", err, res.Stdout, res.Stderr, res.Packages)
	}
}
