//go:build integration

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// editedCode is the code alice's edit makes: it shows something, so the record carries an output.
const editedCode = "display('shown by alice')\nprint('edited by alice')\n"

// Red team, where edits (issue 30) meet the audit (issue 31): an honest run whose code a
// reviewer edited, with a quorum of two (bob approves the edited code after alice's edit), must
// export a record that `starter audit verify` accepts, naming the code that ran: the audit must
// read the request as edited, not the one first checked, and judge the approvals against it.
func TestIntegrationAuditOfAnEditedQuorumRunVerifies(t *testing.T) {
	need.Need(t, need.Docker)
	ts := devtest.Start(t)
	addr, ns := ts.GetFrontendHostPort(), ts.GetDefaultNamespace()
	alice, bob := reviewertest.New(t, "alice"), reviewertest.New(t, "bob")
	b, err := docker.New(docker.Config{Image: "sandboxflow-test-python:bookworm-full", Runtime: "runc",
		Deployment: "redteam-audit-edit", Labels: map[string]string{"test.sandboxflow.suite": "redteam-audit-edit"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Close(ctx)
	})
	reviewers := reviewertest.WriteAllowedSigners(t, t.TempDir(), alice, bob)
	env := agenttest.Setup(t, agenttest.Options{Server: ts, Backend: b, TaskQueue: "cli", NoStarter: true,
		Policy: &guard.Policy{ApprovalTimeout: time.Hour, Quorum: 2}, ReviewersFile: reviewers})
	sc := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const id = "redteam-audit-edit"
	r := starterIn(t, addr, ns, "run", "--code", "print('original')", "--workflow-id", id)
	var started client.Started
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &started) != nil {
		t.Fatalf("run: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	f, edit, err := sc.EditedStatement(ctx, id, started.Digest, editedCode, client.StatementOptions{Reviewer: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := client.EditedDecision(alice.Signer, f, edit, "")
	if err != nil {
		t.Fatal(err)
	}
	dr, err := sc.Decide(ctx, id, d)
	if err != nil {
		t.Fatalf("alice's edit: %v", err)
	}
	r = starterIn(t, addr, ns, "approve", id, "--digest", dr.Digest, "--key", bob.KeyFile, "--reviewer", "bob", "--wait")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var res guard.Result
	if r.code != 0 || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &res) != nil || strings.TrimSpace(string(res.Stdout)) != "edited by alice" {
		t.Fatalf("bob approves the edited code: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}

	exp := starterIn(t, addr, ns, "audit", id)
	if exp.code != 0 {
		t.Fatalf("starter audit: exit %d: %s %s", exp.code, exp.stdout, exp.stderr)
	}
	var rec struct {
		Checked struct {
			Code   string `json:"code"`
			Digest string `json:"digest"`
		} `json:"checked"`
	}
	if err := json.Unmarshal([]byte(exp.stdout), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Checked.Digest != dr.Digest || rec.Checked.Code != editedCode {
		t.Errorf("the audit's checked request is %s %q; want the edited one, %s", rec.Checked.Digest, rec.Checked.Code, dr.Digest)
	}
	p := filepath.Join(t.TempDir(), "export.json")
	if err := os.WriteFile(p, []byte(exp.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	v := starterIn(t, addr, ns, "audit", "verify", p, "--reviewers", reviewers, "--hosts", env.Host.File)
	var got verdict
	if err := json.Unmarshal([]byte(v.stdout), &got); err != nil {
		t.Fatalf("audit verify: %q: %v (%s)", v.stdout, err, v.stderr)
	}
	if v.code != 0 || !got.OK {
		t.Errorf("audit verify of an honest edited run: exit %d, failed %v; want ok", v.code, got.failed())
	}

	// A record without bob's approval (the receipt names two) fails the approvals check.
	var doc map[string]any
	if err := json.Unmarshal([]byte(exp.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if len(res.Approvals) != 2 || res.Approvals[1].Reviewer != "bob" {
		t.Fatalf("result's approvals %+v; want alice's edit, then bob's", res.Approvals)
	}
	var kept []any
	for _, d := range doc["decisions"].([]any) {
		if d.(map[string]any)["decision"].(map[string]any)["approval_id"] != res.Approvals[1].ApprovalID {
			kept = append(kept, d)
		}
	}
	if len(kept) == len(doc["decisions"].([]any)) {
		t.Fatalf("the record holds no decision %s", res.Approvals[1].ApprovalID)
	}
	doc["decisions"] = kept
	if got := verifyDoc(t, addr, ns, p, doc, reviewers, env.Host.File); got.failed()["approvals"] == "" {
		t.Errorf("audit verify without bob's approval: failed %v; want the approvals check failed", got.failed())
	}

	// One byte of what the code showed changed in the record: the receipt signs every output.
	doc = nil
	if err := json.Unmarshal([]byte(exp.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	outs, _ := doc["result"].(map[string]any)["outputs"].([]any)
	if len(outs) != 1 {
		t.Fatalf("the record's outputs %v; want the one display() showed", outs)
	}
	outs[0].(map[string]any)["data"] = base64.StdEncoding.EncodeToString([]byte("'shown by alicf'"))
	if got := verifyDoc(t, addr, ns, p, doc, reviewers, env.Host.File); got.failed()["result"] == "" {
		t.Errorf("audit verify with an output's byte changed: failed %v; want the result check failed", got.failed())
	}

	// A database writer who changes the started request (the code the edit was made of) in the
	// export is caught: the edit names the started request's digest.
	doc = nil
	if err := json.Unmarshal([]byte(exp.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	doc["request"].(map[string]any)["code"] = "print('never started')"
	forged, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	v = starterIn(t, addr, ns, "audit", "verify", p, "--reviewers", reviewers, "--hosts", env.Host.File)
	got = verdict{}
	if err := json.Unmarshal([]byte(v.stdout), &got); err != nil {
		t.Fatalf("audit verify: %q: %v (%s)", v.stdout, err, v.stderr)
	}
	if v.code != 1 || got.failed()["request"] == "" {
		t.Errorf("audit verify with the started code changed: exit %d, failed %v; want the request check failed", v.code, got.failed())
	}
}

// verifyDoc writes doc to p and returns starter audit verify's verdict on it (exit 1 expected).
func verifyDoc(t *testing.T, addr, ns, p string, doc map[string]any, reviewers, hosts string) verdict {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	v := starterIn(t, addr, ns, "audit", "verify", p, "--reviewers", reviewers, "--hosts", hosts)
	var got verdict
	if err := json.Unmarshal([]byte(v.stdout), &got); err != nil {
		t.Fatalf("audit verify: %q: %v (%s)", v.stdout, err, v.stderr)
	}
	if v.code != 1 || got.OK {
		t.Errorf("audit verify: exit %d, ok %t; want 1, not ok", v.code, got.OK)
	}
	return got
}
