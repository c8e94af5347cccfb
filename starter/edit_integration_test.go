//go:build integration

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// Approve with edits through the starter, against a real server and the Docker backend, with a
// quorum of 2: bob approves the original code (1 of 2); alice's edit that the policy refuses
// (mixed indentation) is refused and the run still waits on the original; an attacker who
// relays alice's signed edit with other code, or bob's signature of the original digest as an
// edit, is refused; alice's edit is taken (`approve --edit`), bob's approval of the original no
// longer counts and `show` shows the edited code, who edited it and 1 of 2; bob's approval of the
// original digest is refused; bob approves the edited code and the edited code runs, once, and
// the result names the editor and both digests.
func TestIntegrationStarterApproveWithEdit(t *testing.T) {
	need.Need(t, need.Docker)
	ts := devtest.Start(t)
	addr, ns := ts.GetFrontendHostPort(), ts.GetDefaultNamespace()
	alice, bob := reviewertest.New(t, "alice"), reviewertest.New(t, "bob")
	b, err := docker.New(docker.Config{Image: "sandboxflow-test-python:bookworm-full", Runtime: "runc",
		Deployment: "starter-edit", Labels: map[string]string{"test.sandboxflow.suite": "starter-edit"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Close(ctx)
	})
	env := agenttest.Setup(t, agenttest.Options{Server: ts, Backend: b, TaskQueue: "cli", NoStarter: true,
		Policy: &guard.Policy{ApprovalTimeout: time.Hour, Quorum: 2}, ReviewersFile: reviewertest.WriteAllowedSigners(t, t.TempDir(), alice, bob)})
	sc := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	r := starterIn(t, addr, ns, "run", "--code", "print('original')", "--workflow-id", "cli-edit")
	var started client.Started
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &started) != nil {
		t.Fatalf("run: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	original := started.Digest
	if r := starterIn(t, addr, ns, "approve", "cli-edit", "--digest", original, "--key", bob.KeyFile, "--reviewer", "bob"); r.code != 0 || !strings.Contains(r.stdout, `"approvals":1`) {
		t.Fatalf("bob approves the original: exit %d, %s %s; want 1 of 2", r.code, r.stdout, r.stderr)
	}
	// pending lists approvals had and needed (visibility is eventually consistent: poll).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := starterIn(t, addr, ns, "pending", "--json")
		var page client.PendingPage
		_ = json.Unmarshal([]byte(r.stdout), &page)
		if len(page.Runs) == 1 && page.Runs[0].Approvals == 1 && page.Runs[0].Quorum == 2 {
			if r := starterIn(t, addr, ns, "pending"); !strings.Contains(r.stdout, "1 of 2") {
				t.Errorf("pending table %q; want 1 of 2", r.stdout)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending --json: %s; want cli-edit with 1 of 2 approvals", r.stdout)
		}
	}
	dir := t.TempDir()
	write := func(name, code string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(code), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// An edit the policy refuses: refused, and the run waits on the original code.
	mixed := write("mixed.py", "if True:\n\tx = 1\n        print(x)\n")
	r = starterIn(t, addr, ns, "approve", "cli-edit", "--digest", original, "--key", alice.KeyFile, "--reviewer", "alice", "--edit", mixed)
	if r.code != 1 || !strings.Contains(r.stdout, "the policy refuses the edited request") || !strings.Contains(r.stdout, "indents with tabs") {
		t.Fatalf("an edit the policy refuses: exit %d, %s %s; want refused, saying why", r.code, r.stdout, r.stderr)
	}
	st, err := sc.Status(ctx, "cli-edit")
	if err != nil || st.State != contract.StatusAwaitingApproval || st.Request.Digest != original || st.Edit != nil || len(st.Approvals) != 1 {
		t.Fatalf("after the refused edit: %+v, %v; want still waiting on the original with bob's approval", st, err)
	}

	// An attacker's relays: alice's signed edit carrying other code; bob's approval of the
	// original digest sent as an edit. Each is sent as an update of its own id (the Go client
	// uses the approval id, which the server would answer again with its first outcome).
	relay := func(d contract.Decision) error {
		h, err := env.Temporal.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{WorkflowID: "cli-edit", UpdateName: contract.UpdateDecide,
			UpdateID: uuid.NewString(), Args: []any{d}, WaitForStage: tclient.WorkflowUpdateStageCompleted})
		if err != nil {
			return err
		}
		return h.Get(ctx, nil)
	}
	editedCode := "print('edited by alice')"
	f, edit, err := sc.EditedStatement(ctx, "cli-edit", original, editedCode, client.StatementOptions{Reviewer: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	signedEdit, err := client.EditedDecision(alice.Signer, f, edit, "")
	if err != nil {
		t.Fatal(err)
	}
	swapped := signedEdit
	swapped.Edit = &contract.DecisionEdit{Code: "import os; os.system('id')", OriginalDigest: original}
	if err := relay(swapped); err == nil || !strings.Contains(err.Error(), "checks to digest") {
		t.Errorf("alice's signed edit with other code: %v; want refused, the digest signed is not the code's", err)
	}
	backToOriginal := signedEdit
	backToOriginal.Edit = &contract.DecisionEdit{Code: "print('original')", OriginalDigest: original}
	if err := relay(backToOriginal); err == nil || !strings.Contains(err.Error(), "checks to digest") {
		t.Errorf("alice's signed edit with the original code: %v; want refused", err)
	}
	bobF, err := sc.Statement(ctx, client.Run("cli-edit"), client.StatementOptions{Reviewer: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	bobD, err := client.SignDecision(bob.Signer, bobF, "")
	if err != nil {
		t.Fatal(err)
	}
	bobD.Edit = &contract.DecisionEdit{Code: editedCode, OriginalDigest: original}
	if err := relay(bobD); err == nil || !strings.Contains(err.Error(), "own digest") {
		t.Errorf("bob's approval of the original sent as an edit: %v; want refused", err)
	}
	bobD.Digest = f.Digest
	if err := relay(bobD); err == nil || !strings.Contains(err.Error(), "statement_mismatch") {
		t.Errorf("bob's approval of the original sent as an edit under the edited digest: %v; want refused", err)
	}
	// An edit signed by a key the reviewers file does not list, and alice's genuine edit sent
	// as the signal (which takes no edits): refused, the second recorded as rejected.
	mallory := reviewertest.New(t, "alice")
	forged, err := client.EditedDecision(mallory.Signer, f, edit, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := relay(forged); err == nil || !strings.Contains(err.Error(), "unknown_key") {
		t.Errorf("an edit signed by an unlisted key: %v; want refused (unknown_key)", err)
	}
	if err := env.Temporal.SignalWorkflow(ctx, "cli-edit", "", contract.SignalApproval, signedEdit); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, err := sc.Status(ctx, "cli-edit")
		if err == nil && st.RejectedDecisions == 1 {
			if !strings.Contains(st.LastRejection, "only as the update") || st.Edit != nil || st.Request.Digest != original {
				t.Errorf("the signalled edit: %q, edit %+v; want refused, the run unchanged", st.LastRejection, st.Edit)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the signalled edit was never rejected: %+v, %v", st, err)
		}
	}

	// alice's edit, through the starter.
	edited := write("edited.py", editedCode)
	r = starterIn(t, addr, ns, "approve", "cli-edit", "--digest", original, "--key", alice.KeyFile, "--reviewer", "alice", "--edit", edited)
	var dr contract.DecideResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &dr) != nil || dr.Digest == original || dr.State != contract.StatusAwaitingApproval || dr.Approvals != 1 {
		t.Fatalf("alice's edit: exit %d, %s %s; want accepted under a new digest, 1 of 2 (bob's approval of the original no longer counts)", r.code, r.stdout, r.stderr)
	}
	if dr.Digest != f.Digest {
		t.Errorf("the edit's digest %s; want the one alice's client computed, %s", dr.Digest, f.Digest)
	}
	r = starterIn(t, addr, ns, "show", "cli-edit")
	for _, want := range []string{"1 | print('edited by alice')", "edited", "by alice", original, "1 of 2 needed", dr.Digest} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("show after the edit: exit %d, %s; want %q", r.code, r.stdout, want)
		}
	}
	// bob's approval of the original code is for another digest now.
	bobOld := bobF
	bobOld.ApprovalID = uuid.NewString()
	if d, err := client.SignDecision(bob.Signer, bobOld, ""); err != nil {
		t.Fatal(err)
	} else if _, err := sc.Decide(ctx, "cli-edit", d); err == nil || !strings.Contains(err.Error(), "wrong digest") {
		t.Errorf("bob's approval of the original after the edit: %v; want refused (wrong digest)", err)
	}
	// A second edit is refused.
	if r := starterIn(t, addr, ns, "approve", "cli-edit", "--digest", dr.Digest, "--key", bob.KeyFile, "--reviewer", "bob", "--edit", mixed); r.code != 1 || !strings.Contains(r.stdout, "already edited by alice") {
		t.Errorf("a second edit: exit %d, %s; want refused", r.code, r.stdout)
	}

	r = starterIn(t, addr, ns, "approve", "cli-edit", "--digest", dr.Digest, "--key", bob.KeyFile, "--reviewer", "bob", "--wait")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var res guard.Result
	if r.code != 0 || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &res) != nil {
		t.Fatalf("bob approves the edited code: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if !res.OK || strings.TrimSpace(string(res.Stdout)) != "edited by alice" || res.Digest != dr.Digest {
		t.Errorf("result %+v; want the edited code run", res)
	}
	if e := res.Edit; e == nil || e.Editor != "alice" || e.OriginalDigest != original || e.Digest != dr.Digest {
		t.Errorf("result's edit %+v; want alice, %s, %s", res.Edit, original, dr.Digest)
	}
	if len(res.Approvals) != 2 || res.Approvals[0].Reviewer != "alice" || res.Approvals[1].Reviewer != "bob" {
		t.Errorf("result's approvals %+v; want alice's edit, then bob's", res.Approvals)
	}
}
