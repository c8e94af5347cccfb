//go:build integration

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// fakeHash is a sha256 hash to name a wheel in a lock: these tests never install one.
func fakeHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

// writeLock writes lock text into dir/name and returns its path.
func writeLock(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A run started with `run --packages` shows every package with its version and hashes in
// `show`, and its statement names the digest that binds them; an approval signed for the same
// request with one package fewer is refused by the workflow and runs nothing (counted outside
// the sandbox), and `approve` with that digest refuses before signing.
func TestIntegrationPackagesShownAndBound(t *testing.T) {
	need.Need(t, need.Python3)
	e := agenttest.Setup(t, agenttest.Options{TaskQueue: "pkg-views",
		Policy: &guard.Policy{Languages: []string{guard.Python}, ApprovalTimeout: time.Hour, Packages: true}})
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	code := fmt.Sprintf("open(%q, 'a').write('ran\\n')\n", ran)
	alpha, beta1, beta2 := fakeHash("alpha-1.0-py3-none-any.whl"), fakeHash("beta-2.0-py3-none-any.whl"), fakeHash("beta-2.0-cp312.whl")
	lock := writeLock(t, dir, "lock.txt", "alpha==1.0 --hash="+alpha+"\nBETA==2.0 \\\n  --hash="+beta2+" --hash="+beta1+"\n")

	r := binary(t, e, "", "run", "--code", code, "--packages", lock, "--workflow-id", "pkg-run")
	if r.code != 0 {
		t.Fatalf("run --packages: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	st := waitState(t, e, "pkg-run", contract.StatusAwaitingApproval)
	if len(st.Request.Packages) != 2 || st.Request.Packages[1].Name != "beta" || len(st.Request.Packages[1].Hashes) != 2 {
		t.Fatalf("the status's packages %+v; want alpha and beta (normalized) with their hashes", st.Request.Packages)
	}
	show := binary(t, e, "", "show", "pkg-run")
	for _, want := range []string{"alpha==1.0", "beta==2.0", "--hash=" + alpha, "--hash=" + beta1, "--hash=" + beta2, st.Request.Digest} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, show.stdout)
		}
	}
	if stmt := binary(t, e, "", "statement", "pkg-run"); stmt.code != 0 || !strings.Contains(stmt.stdout, "digest: "+st.Request.Digest+"\n") {
		t.Errorf("statement: exit %d, %s %s; want the digest %s", stmt.code, stmt.stdout, stmt.stderr, st.Request.Digest)
	}

	// The same request with beta left out: another digest.
	ctx := context.Background()
	in, err := e.Client.StartInput(ctx, "pkg-run", st.RunID)
	if err != nil {
		t.Fatal(err)
	}
	shown, err := contract.ShownChecked(st.Request, in.Request)
	if err != nil {
		t.Fatal(err)
	}
	full := shown.Packages
	shown.Packages = full[:1]
	without := guard.Digest(&shown)
	oneHash := append([]guard.Package(nil), full...)
	oneHash[1] = guard.Package{Name: "beta", Version: "2.0", Hashes: []string{beta1, fakeHash("beta-2.0-tampered")}}
	slices.Sort(oneHash[1].Hashes)
	shown.Packages = oneHash
	otherHash := guard.Digest(&shown)
	for name, digest := range map[string]string{"without beta": without, "with one of beta's hashes changed": otherHash} {
		if digest == st.Request.Digest {
			t.Fatalf("%s: the digest does not bind the packages", name)
		}
		f, err := client.StatementFor(st, client.StatementOptions{Reviewer: e.Reviewer.Principal}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		f.Digest = digest
		d, err := client.SignDecision(e.Reviewer.Signer, f, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Decide(ctx, "pkg-run", d); err == nil {
			t.Errorf("an approval of the lock %s was accepted for the run", name)
		}
	}
	if r := binary(t, e, "", "approve", "pkg-run", "--digest", without); r.code == 0 || !strings.Contains(r.stdout+r.stderr, st.Request.Digest) {
		t.Errorf("approve --digest of the lock without beta: exit %d, %s %s; want refused, naming the run's digest", r.code, r.stdout, r.stderr)
	}
	time.Sleep(time.Second)
	if st := waitState(t, e, "pkg-run", contract.StatusAwaitingApproval); st.Decision != nil {
		t.Errorf("decision %+v recorded", st.Decision)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the code ran (%v)", err)
	}
}

// A session opened with `session open --packages` lists them; a cell whose packages change a
// version or a hash of the session's is refused (a ToolUsageError naming it) before any
// reviewer sees it; a cell that adds a package shows it and what it adds, and on a host that
// installs no packages (the local backend) it ends with a ConfigError and runs nothing.
func TestIntegrationCellPackages(t *testing.T) {
	need.Need(t, need.Python3)
	e := agenttest.Setup(t, agenttest.Options{TaskQueue: "pkg-cells",
		Policy: &guard.Policy{Languages: []string{guard.Python}, ApprovalTimeout: time.Hour, Packages: true}})
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	alpha, gamma := fakeHash("alpha-1.0"), fakeHash("gamma-3.0")
	r := binary(t, e, "", "session", "open", "--packages", writeLock(t, dir, "session.txt", "alpha==1.0 --hash="+alpha+"\n"))
	var opened client.SessionStarted
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &opened) != nil {
		t.Fatalf("session open --packages: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	id := opened.WorkflowID
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := e.Client.SessionStatus(context.Background(), id)
		if err == nil && st.State == contract.SessionOpen && st.SandboxTaskQueue != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: %s, %v; want open", id, st.State, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for name, lock := range map[string]string{
		"another version": "alpha==1.1 --hash=" + alpha + "\n",
		"another hash":    "alpha==1.0 --hash=" + gamma + "\n",
	} {
		r := binary(t, e, "", "session", "cell", id, "--code", "import alpha", "--packages", writeLock(t, dir, "cell.txt", lock))
		if r.code == 0 || r.errorType(t) != guard.TypeToolUsageError || !strings.Contains(r.stdout, "alpha") {
			t.Errorf("a cell with %s of alpha: exit %d, %s %s; want a ToolUsageError naming alpha", name, r.code, r.stdout, r.stderr)
		}
	}
	code := fmt.Sprintf("open(%q, 'a').write('ran\\n')\n", ran)
	gammaLock := writeLock(t, dir, "gamma.txt", "gamma==3.0 --hash="+gamma+"\n")
	r = binary(t, e, "", "session", "cell", id, "--code", code, "--packages", gammaLock, "--request-id", "call-1")
	var sub contract.CellSubmitted
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &sub) != nil || sub.Cell != 1 {
		t.Fatalf("a cell adding gamma: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	// The same request id: with the same lock, the same cell; with another, refused.
	r = binary(t, e, "", "session", "cell", id, "--code", code, "--packages", gammaLock, "--request-id", "call-1")
	var again contract.CellSubmitted
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &again) != nil || again.Digest != sub.Digest {
		t.Errorf("the same cell again under its request id: exit %d, %s %s; want cell 1 back", r.code, r.stdout, r.stderr)
	}
	other := writeLock(t, dir, "gamma2.txt", "gamma==3.0 --hash="+fakeHash("gamma-3.0-other")+"\n")
	if r := binary(t, e, "", "session", "cell", id, "--code", code, "--packages", other, "--request-id", "call-1"); r.code == 0 || r.errorType(t) != guard.TypeToolUsageError {
		t.Errorf("the request id with another lock: exit %d, %s %s; want a ToolUsageError", r.code, r.stdout, r.stderr)
	}
	show := binary(t, e, "", "session", "show", id)
	for _, want := range []string{"alpha==1.0", "--hash=" + alpha, "gamma==3.0", "--hash=" + gamma, "added gamma==3.0"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("session show lacks %q:\n%s", want, show.stdout)
		}
	}
	r = binary(t, e, "", "approve", id, "--cell", "1", "--wait")
	if r.code == 0 || !strings.Contains(r.stdout, "installs no packages") {
		t.Errorf("approve the cell adding gamma: exit %d, %s %s; want the host's ConfigError", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cell ran (%v)", err)
	}
}
