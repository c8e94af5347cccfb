//go:build integration

package workflows_test

// Integration tests of issue 27's passkey checks on the sandbox host, with a real server and
// worker: an assertion made on another port of the inbox's host runs nothing, though a rogue
// workflow schedules it; and a cloned passkey's assertion, whose signature counter did not grow,
// is accepted by the workflow (one run sees no other) and refused by the host's own counters.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

func TestIntegrationSandboxHostChecksPasskeyOriginAndCounter(t *testing.T) {
	const origin = "https://inbox.example.com"
	it := newITest(t)
	alice := reviewertest.NewPasskey(t, "alice", "inbox.example.com")
	dir := t.TempDir()
	file := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(file, []byte(alice.AllowedLine(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) {
		c.ReviewersFile, c.PasskeyOrigin, c.PasskeyCountersFile = file, origin, filepath.Join(dir, "counters.json")
	})
	req, mark := markRequest(t)
	checked, err := integrationConfig(nil, nil, "").Policy.Check(req, "local")
	if err != nil {
		t.Fatal(err)
	}

	// A: a rogue schedules the activity with an assertion made on another port.
	const rogueID = "it-passkey-other-port"
	run := it.startImpostor("sandboxflow-it-passkey", rogueID, holdingRogue(checked, it.queue, 0), req)
	f := reviewertest.Fields(rogueID, run.GetRunID(), checked.Digest, it.queue, true)
	it.signal(rogueID, alice.Decision(t, f, "https://inbox.example.com:8443", 5))
	var outcome string
	if err := run.Get(it.ctx(60*time.Second), &outcome); err != nil {
		t.Fatal(err)
	}
	wantHostRefused(t, outcome, approval.ReasonWrongOrigin)
	wantRuns(t, mark, 0)

	// B: the genuine assertion, counter 5, through the real workflow: it runs.
	const genuineID = "it-passkey-genuine"
	genuine := it.start(genuineID, it.queue, req)
	if _, err := it.decide(genuineID, alice.Decision(t, it.fields(genuineID, true), origin, 5)); err != nil {
		t.Fatalf("the genuine passkey decision: %v", err)
	}
	if res, err := it.result(genuine); err != nil || res.Reviewer != "alice" {
		t.Fatalf("genuine run: %+v, %v; want it run, approved by alice", res, err)
	}
	wantRuns(t, mark, 1)

	// C: a clone reporting counter 5 again signs another run: the workflow accepts it, the
	// sandbox host refuses it.
	const cloneID = "it-passkey-clone"
	clone := it.start(cloneID, it.queue, req)
	if _, err := it.decide(cloneID, alice.Decision(t, it.fields(cloneID, true), origin, 5)); err != nil {
		t.Fatalf("the clone's decision, at the workflow: %v; want it accepted (the workflow sees one run)", err)
	}
	_, err = it.result(clone)
	if err == nil || !strings.Contains(err.Error(), guard.TypeApprovalRefused) || !strings.Contains(err.Error(), "refused ("+string(approval.ReasonCounterReplayed)+")") {
		t.Fatalf("clone run: %v; want the host's ApprovalRefused (%s)", err, approval.ReasonCounterReplayed)
	}
	if st, _ := it.status(cloneID); st.State != contract.StatusError {
		t.Errorf("clone run state %s; want %s", st.State, contract.StatusError)
	}
	wantRuns(t, mark, 1)
}

// The sandbox host's counters file, replaced after a genuine run by JSON that is not a counters
// file ({}: no version, no passkeys), does not read as a host that never saw the passkey: a
// clone's assertion with the counter already used runs nothing, and the file is left as found.
func TestIntegrationSandboxHostCountersFileFailsClosed(t *testing.T) {
	const origin = "https://inbox.example.com"
	it := newITest(t)
	alice := reviewertest.NewPasskey(t, "alice", "inbox.example.com")
	dir := t.TempDir()
	file := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(file, []byte(alice.AllowedLine(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	counters := filepath.Join(dir, "counters.json")
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) {
		c.ReviewersFile, c.PasskeyOrigin, c.PasskeyCountersFile = file, origin, counters
	})
	req, mark := markRequest(t)
	const genuineID = "it-counters-genuine"
	genuine := it.start(genuineID, it.queue, req)
	if _, err := it.decide(genuineID, alice.Decision(t, it.fields(genuineID, true), origin, 5)); err != nil {
		t.Fatalf("the genuine passkey decision: %v", err)
	}
	if _, err := it.result(genuine); err != nil {
		t.Fatalf("genuine run: %v", err)
	}
	wantRuns(t, mark, 1)
	if err := os.WriteFile(counters, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	const cloneID = "it-counters-clone"
	clone := it.start(cloneID, it.queue, req)
	if _, err := it.decide(cloneID, alice.Decision(t, it.fields(cloneID, true), origin, 5)); err != nil {
		t.Fatalf("the clone's decision, at the workflow: %v", err)
	}
	if res, err := it.result(clone); err == nil || !strings.Contains(err.Error(), "passkey counters") {
		t.Fatalf("clone run with the counters file replaced: %+v, %v; want the host's passkey counters failure", res, err)
	}
	wantRuns(t, mark, 1)
	if b, _ := os.ReadFile(counters); string(b) != "{}" {
		t.Errorf("counters file %q after the refusal; want it left as found", b)
	}
}
