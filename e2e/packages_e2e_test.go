//go:build integration

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/wheeltest"
)

// packagesResult is what the starter prints of a run with packages.
type packagesResult struct {
	OK       bool                  `json:"ok"`
	Stdout   string                `json:"stdout"`
	Stderr   string                `json:"stderr"`
	Packages *guard.PackagesReport `json:"packages"`
	Egress   *guard.EgressReport   `json:"egress"`
	Error    *client.ErrorBody     `json:"error"`
}

// TestPackagesThroughBinaries: worker --dev --package-index with an index of the test's own on
// loopback, under runc and runsc. A lock of two packages, one requiring the other, installs and
// the code imports both (and not a package the lock does not name); the code cannot reach the
// index; a wheel's .pth file is reported and never runs; a second run of the lock opens no
// connection; the receipt signs the installed wheels' hashes (audit verify fails on a changed
// one); and each bad lock ends with a PackageError and no container created (Docker's own
// event log, outside the sandbox, is what counts).
func TestPackagesThroughBinaries(t *testing.T) {
	requireDocker(t)
	ix := wheeltest.NewIndex(t)
	a := ix.AddWheel(t, wheeltest.Wheel{Name: "alpha", Version: "1.0", Requires: []string{"beta>=2"},
		Files: map[string]string{"alpha/__init__.py": "from beta import B\nA = 'a' + B\n"}})
	b := ix.AddWheel(t, wheeltest.Wheel{Name: "beta", Version: "2.1", Files: map[string]string{
		"beta.py": "B = 'b'\n", "beta-hook.pth": "import sys; sys.stdout.write('PTH-RAN\\n')\n"}})
	ix.AddWheel(t, wheeltest.Wheel{Name: "gamma", Version: "1.0", Files: map[string]string{"gamma.py": ""}})
	rogue := ix.AddWheel(t, wheeltest.Wheel{Name: "impostor", Version: "1.0", MetaName: "evil", Files: map[string]string{"evil.py": ""}})
	ix.Add(t, "onlysource", "onlysource-1.0.tar.gz", []byte("setup.py"))
	lock := wheeltest.Line("alpha", "1.0", a) + wheeltest.Line("beta", "2.1", b)
	changed := append([]byte(nil), b...)
	changed[len(changed)/3] ^= 1
	workerBin, starterBin := binaries(t)

	for _, rt := range []string{"runc", docker.RuntimeRunsc} {
		t.Run(rt, func(t *testing.T) {
			data := t.TempDir()
			addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
			queue := "packages-" + rt
			env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=" + queue,
				"USER=alice", "SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")}
			startDevWorker(t, workerBin, env, "--data-dir", data, "--ui-port", "-1", "--task-queue", queue,
				"--backend", "docker", "--docker-image", testPythonImage(), "--docker-runtime", rt, "--package-index", ix.URL(),
				// Every container is then created for its run, labelled with it: what the refusals
				// count. The warm pool's slots are the backend's tests'.
				"--warm-sandboxes", "0", "--egress-allow", "other.example:1")
			s := starterCLI{t: t, bin: starterBin, env: env}
			// run starts code with a lock through `starter run --packages` (and --allow-host),
			// approves it and reads its result with the starter.
			lockDir := t.TempDir()
			run := func(code, lock string, egress ...string) (string, packagesResult, time.Time) {
				t.Helper()
				lockFile := filepath.Join(lockDir, "lock.txt") // runs go one at a time
				if err := os.WriteFile(lockFile, []byte(lock), 0o600); err != nil {
					t.Fatal(err)
				}
				args := []string{"run", "--code", code, "--packages", lockFile}
				for _, e := range egress {
					args = append(args, "--allow-host", e)
				}
				var started startedJSON
				s.mustJSON(&started, args...)
				var decided struct{ State string }
				approved := time.Now()
				s.mustJSON(&decided, "approve", started.WorkflowID, "--digest", started.Digest)
				out, _ := s.run("result", started.WorkflowID)
				var res packagesResult
				if err := json.Unmarshal([]byte(out), &res); err != nil {
					t.Fatalf("starter result printed %q: %v", out, err)
				}
				return started.WorkflowID, res, approved
			}

			t.Run("installs, imports, reports and keeps the index out of reach", func(t *testing.T) {
				// The run may reach one other host; its code tries the index directly (the sandbox's
				// own loopback) and through the egress proxy (NO_PROXY cleared): both refused, the
				// second audited as the code's, apart from the install's fetches.
				port := ix.Server.URL[strings.LastIndex(ix.Server.URL, ":")+1:]
				code := "import alpha, beta, os, socket, urllib.request\nprint('A=' + alpha.A)\n" +
					"try:\n    import gamma\n    print('gamma=imported')\nexcept ImportError:\n    print('gamma=refused')\n" +
					"try:\n    socket.create_connection(('127.0.0.1', " + port + "), timeout=5)\n    print('index=reached')\n" +
					"except OSError:\n    print('index=refused')\n" +
					"os.environ.pop('no_proxy', None); os.environ.pop('NO_PROXY', None)\n" +
					"try:\n    urllib.request.urlopen('http://127.0.0.1:" + port + "/simple/beta/', timeout=10)\n    print('proxied=reached')\n" +
					"except Exception:\n    print('proxied=refused')\n"
				id, res, approved := run(code, lock, "other.example:1")
				if n := containersCreated(t, id, approved); n != 1 {
					t.Errorf("Docker's event log shows %d containers created for the run; want 1 (the count the refusals rely on)", n)
				}
				if !res.OK || !strings.Contains(res.Stdout, "A=ab") || !strings.Contains(res.Stdout, "gamma=refused") || !strings.Contains(res.Stdout, "index=refused") || !strings.Contains(res.Stdout, "proxied=refused") || strings.Contains(res.Stdout, "PTH-RAN") {
					t.Fatalf("result %+v", res)
				}
				if res.Packages == nil || len(res.Packages.Installed) != 2 || res.Packages.Installed[1].SHA256 != strings.TrimPrefix(wheeltest.Hash(b), "sha256:") ||
					!strings.Contains(strings.Join(res.Packages.Warnings, "\n"), "beta-hook.pth") {
					t.Fatalf("packages %+v; want alpha and beta with beta's hash and the .pth warned of", res.Packages)
				}
				install, refused := 0, 0
				for _, at := range res.Egress.Attempts {
					switch {
					case at.Phase == guard.EgressPhaseInstall && at.Allowed:
						install++
					case at.Phase == "" && !at.Allowed && at.Host == "127.0.0.1" && strconv.Itoa(int(at.Port)) == port:
						refused++
					}
				}
				if install != 4 || refused != 1 || len(res.Egress.Attempts) != 5 {
					t.Errorf("egress %+v; want the install's 4 fetches marked install and the code's one attempt on the index refused", res.Egress)
				}
				auditVerifies(t, s, data, id, strings.TrimPrefix(wheeltest.Hash(b), "sha256:"))
			})
			t.Run("a second run of the lock opens no connection", func(t *testing.T) {
				before := ix.Requests()
				_, res, _ := run("import alpha\nprint('A=' + alpha.A)", lock)
				if !res.OK || res.Packages == nil || !res.Packages.Cached || ix.Requests() != before {
					t.Fatalf("result %+v (index requests %d → %d); want the cached environment and no request", res, before, ix.Requests())
				}
			})
			zero := " --hash=sha256:" + strings.Repeat("0", 64) + "\n"
			for _, tc := range []struct {
				name, lock string
				reason     guard.PackageReason
			}{
				{"a changed byte", wheeltest.Line("beta", "2.1", changed), guard.PackageHashMismatch},
				{"a dependency missing from the lock", wheeltest.Line("alpha", "1.0", a), guard.PackageMissingDependency},
				{"an sdist", "onlysource==1.0" + zero, guard.PackageSdistOnly},
				{"another distribution under a locked name", wheeltest.Line("impostor", "1.0", rogue), guard.PackageWrongDistribution},
			} {
				t.Run(tc.name, func(t *testing.T) {
					id, res, approved := run("print('RAN')", tc.lock)
					if res.Error == nil || res.Error.Type != guard.TypePackageError || res.Error.Reason != string(tc.reason) || strings.Contains(res.Stdout, "RAN") {
						t.Fatalf("result %+v; want a PackageError %s", res, tc.reason)
					}
					if n := containersCreated(t, id, approved); n != 0 {
						t.Errorf("Docker created %d containers for the run; want none", n)
					}
				})
			}
		})
	}
}

// containersCreated counts, in the Docker daemon's event log, the containers created for a
// run's workflow since a time.
func containersCreated(t *testing.T, workflowID string, since time.Time) int {
	t.Helper()
	out, err := exec.Command("docker", "events", "--since", since.Add(-time.Second).Format(time.RFC3339Nano), "--until", time.Now().Add(time.Second).Format(time.RFC3339Nano),
		"--filter", "type=container", "--filter", "event=create", "--filter", "label="+docker.LabelWorkflowID+"="+workflowID, "--format", "{{.ID}}").Output()
	if err != nil {
		t.Fatalf("docker events: %v", err)
	}
	return len(strings.Fields(string(out)))
}

// auditVerifies exports a run's audit record, checks that `starter audit verify` accepts it, and
// that it refuses it once an installed wheel's hash is changed.
func auditVerifies(t *testing.T, s starterCLI, data, id, sha string) {
	t.Helper()
	exp, code := s.run("audit", id)
	if code != 0 {
		t.Fatalf("starter audit exit %d: %s", code, exp)
	}
	dir := t.TempDir()
	verify := func(doc string) int {
		p := filepath.Join(dir, "audit.json")
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		_, code := s.run("audit", "verify", p, "--reviewers", filepath.Join(data, "reviewer", "allowed_signers"), "--hosts", filepath.Join(data, "host", "hosts"))
		return code
	}
	if code := verify(exp); code != 0 {
		t.Fatalf("audit verify of the export: exit %d", code)
	}
	// The lock the run was started with, and the wheel the result says was installed.
	for _, where := range []string{"sha256:", `"sha256":"`} {
		if !strings.Contains(exp, where+sha) {
			t.Fatalf("the audit export has no %s%s", where, sha)
		}
		if code := verify(strings.Replace(exp, where+sha, where+strings.Repeat("7", 64), 1)); code == 0 {
			t.Errorf("audit verify accepted an export whose %s%s was changed", where, sha)
		}
	}
}

// TestCellPackagesThroughBinaries: worker --dev --package-index, runc. A session opened without
// packages; a cell brought with `starter session cell --packages` (two packages, one requiring
// the other) is approved, the host installs them into the running session and the cell imports
// both, its result listing them and the install's fetches; a cell whose lock has a changed byte
// ends with a PackageError and nothing of it run; the next cell, with no lock, imports them still.
func TestCellPackagesThroughBinaries(t *testing.T) {
	requireDocker(t)
	ix := wheeltest.NewIndex(t)
	a := ix.AddWheel(t, wheeltest.Wheel{Name: "alpha", Version: "1.0", Requires: []string{"beta>=2"},
		Files: map[string]string{"alpha/__init__.py": "from beta import B\nA = 'a' + B\n"}})
	b := ix.AddWheel(t, wheeltest.Wheel{Name: "beta", Version: "2.1", Files: map[string]string{"beta.py": "B = 'b'\n"}})
	g := ix.AddWheel(t, wheeltest.Wheel{Name: "gamma", Version: "1.0", Files: map[string]string{"gamma.py": ""}})
	changed := append([]byte(nil), g...)
	changed[len(changed)/3] ^= 1
	workerBin, starterBin := binaries(t)
	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	queue := "cell-packages"
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=" + queue,
		"USER=alice", "SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")}
	startDevWorker(t, workerBin, env, "--data-dir", data, "--ui-port", "-1", "--task-queue", queue,
		"--backend", "docker", "--docker-image", testPythonImage(), "--docker-runtime", "runc", "--package-index", ix.URL(),
		"--warm-sandboxes", "0")
	s := sessionCLI{starterCLI{t: t, bin: starterBin, env: env}}
	lockFile := func(name, text string) string {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const probe = "try:\n    import alpha\n    print('A=' + alpha.A)\nexcept ImportError:\n    print('A=none')\n"
	id := s.open("--language", "python").WorkflowID
	if res := s.cell(id, probe); string(res.Stdout) != "A=none\n" {
		t.Fatalf("cell 1: %q %q; want nothing of the index importable", res.Stdout, res.Stderr)
	}
	res := s.cell(id, probe, "--packages", lockFile("ab.txt", wheeltest.Line("alpha", "1.0", a)+wheeltest.Line("beta", "2.1", b)))
	if string(res.Stdout) != "A=ab\n" || res.Packages == nil || len(res.Packages.Installed) != 2 || res.Receipt == nil {
		t.Fatalf("cell 2 with alpha and beta: stdout %q stderr %q packages %+v; want both imported, listed and signed", res.Stdout, res.Stderr, res.Packages)
	}
	install := 0
	for _, at := range res.Egress.Attempts {
		if at.Phase == guard.EgressPhaseInstall {
			install++
		}
	}
	if install == 0 {
		t.Errorf("cell 2's egress %+v; want the install's fetches", res.Egress)
	}
	var sub contract.CellSubmitted
	s.mustJSON(&sub, "session", "cell", id, "--code", "print('RAN')", "--packages", lockFile("bad.txt", wheeltest.Line("gamma", "1.0", changed)))
	out, rc := s.run("approve", id, "--cell", strconv.Itoa(sub.Cell), "--wait")
	if rc == 0 || !strings.Contains(out, string(guard.PackageHashMismatch)) || !strings.Contains(out, "nothing ran") || strings.Contains(out, "RAN") {
		t.Errorf("cell 3 with a changed byte: exit %d, %s; want a PackageError hash_mismatch and nothing run", rc, out)
	}
	if res := s.cell(id, probe); string(res.Stdout) != "A=ab\n" {
		t.Errorf("cell 4: %q %q; want alpha and beta still imported", res.Stdout, res.Stderr)
	}
	s.mustJSON(&struct{}{}, "session", "close", id)
}
