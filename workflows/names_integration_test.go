//go:build integration

package workflows_test

// Integration tests of issue 27's names: the reviewer's principal is part of the signed
// statement (version 2). A key whose line allows two principals signs as either, and the one
// signed is the one recorded; nobody who relays the decision (a namespace writer sending it, or
// a rogue workflow scheduling the sandbox activity with it) can name the other.

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// The workflow refuses the decision relayed with the other principal the key allows, accepts it
// as signed, and the run records that principal.
func TestIntegrationTheSignedPrincipalIsTheReviewer(t *testing.T) {
	it := newITest(t)
	key, err := reviewertest.NewKey("alice,ops")
	if err != nil {
		t.Fatal(err)
	}
	file := reviewertest.WriteAllowedSigners(t, t.TempDir(), key)
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) { c.ReviewersFile = file })
	req, mark := markRequest(t)
	const id = "it-signed-principal"
	run := it.start(id, it.queue, req)
	f := it.fields(id, true)
	f.Reviewer = "ops"
	d := key.Decision(t, f)
	if !strings.Contains(d.Statement, "\nreviewer: ops\n") || f.Version != approval.StatementVersion2 {
		t.Fatalf("statement %q; want version 2 naming ops", d.Statement)
	}
	relayed := d
	relayed.Reviewer = "alice"
	_, err = it.decide(id, relayed)
	wantRefused(t, "the decision relayed as alice", err, string(approval.ReasonStatementMismatch))
	if _, err := it.decide(id, d); err != nil {
		t.Fatalf("the decision as signed: %v", err)
	}
	res, err := it.result(run)
	if err != nil || res.Reviewer != "ops" {
		t.Fatalf("result %+v, %v; want the run approved by ops", res, err)
	}
	if st, _ := it.status(id); st.Decision == nil || st.Decision.Reviewer != "ops" || st.StatementVersion != approval.StatementVersion2 {
		t.Errorf("status %+v; want the decision by ops, statement version 2", st)
	}
	wantRuns(t, mark, 1)
}

// A namespace writer's "RunCode" takes the genuine decision signed as ops and schedules the
// sandbox activity with it renamed to alice, and with a version 1 statement of the same key
// (which names nobody, and which the key's holder signed for a run checked before version 2):
// the sandbox host refuses both on its own, and nothing runs.
func TestIntegrationSandboxHostRefusesARenamedDecision(t *testing.T) {
	it := newITest(t)
	key, err := reviewertest.NewKey("alice,ops")
	if err != nil {
		t.Fatal(err)
	}
	file := reviewertest.WriteAllowedSigners(t, t.TempDir(), key)
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) { c.ReviewersFile = file })
	req, mark := markRequest(t)
	checked, err := integrationConfig(nil, nil, "").Policy.Check(req, "local")
	if err != nil {
		t.Fatal(err)
	}
	rogue := func(ctx workflow.Context, _ contract.Input) ([]string, error) {
		var d, legacy contract.Decision
		workflow.GetSignalChannel(ctx, contract.SignalApproval).Receive(ctx, &d)
		workflow.GetSignalChannel(ctx, "v1").Receive(ctx, &legacy)
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: it.queue, StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		renamed := d
		renamed.Reviewer = "alice"
		var out []string
		for _, dec := range []contract.Decision{renamed, legacy} {
			var res guard.Result
			err := workflow.ExecuteActivity(ctx, contract.RunActivityName,
				contract.RunInput{Checked: checked, Decision: dec}).Get(ctx, &res)
			if err != nil {
				out = append(out, err.Error())
			} else {
				out = append(out, "ran as "+res.Reviewer)
			}
		}
		return out, nil
	}
	const id = "it-renamed-decision"
	run := it.startImpostor("sandboxflow-it-renamed", id, rogue, req)
	f := reviewertest.Fields(id, run.GetRunID(), checked.Digest, it.queue, true)
	f.Reviewer = "ops"
	it.signal(id, key.Decision(t, f))
	old := f
	old.Version, old.Reviewer = approval.StatementVersion1, ""
	if err := it.c.SignalWorkflow(it.ctx(5*time.Second), id, "", "v1", key.Decision(t, old)); err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := run.Get(it.ctx(60*time.Second), &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("outcomes %q; want 2", out)
	}
	for i, name := range []string{"renamed to alice", "a version 1 statement"} {
		if !strings.Contains(out[i], guard.TypeApprovalRefused) || !strings.Contains(out[i], "nothing ran") || !strings.Contains(out[i], string(approval.ReasonStatementMismatch)) {
			t.Errorf("%s: %q; want the host's ApprovalRefused (%s)", name, out[i], approval.ReasonStatementMismatch)
		}
	}
	wantRuns(t, mark, 0)
}

// The reviewer field of a decision, or the principal signed, spelled another way than the
// reviewers file lists it (another case, another Unicode normalization, a fullwidth or Cyrillic
// look-alike) is refused by the workflow; only the name as listed and signed runs the code.
func TestIntegrationPrincipalSpellingsAreRefused(t *testing.T) {
	it := newITest(t)
	key, err := reviewertest.NewKey("josé,alice")
	if err != nil {
		t.Fatal(err)
	}
	file := reviewertest.WriteAllowedSigners(t, t.TempDir(), key)
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) { c.ReviewersFile = file })
	req, mark := markRequest(t)
	const id = "it-principal-spellings"
	run := it.start(id, it.queue, req)
	f := it.fields(id, true)
	f.Reviewer = "josé"
	d := key.Decision(t, f)
	for _, named := range []string{"jose\u0301", "José", "Alice", "\uff41lice", "\u0430lice"} {
		relayed := d
		relayed.Reviewer = named
		_, err := it.decide(id, relayed)
		wantRefused(t, "the decision named "+named, err, string(approval.ReasonStatementMismatch))
	}
	for _, signedAs := range []string{"jose\u0301", "José", "\u0430lice"} {
		g := it.fields(id, true)
		g.Reviewer = signedAs
		_, err := it.decide(id, key.Decision(t, g))
		wantRefused(t, "the statement signed as "+signedAs, err, string(approval.ReasonPrincipalMismatch))
	}
	if _, err := it.decide(id, d); err != nil {
		t.Fatalf("the decision as signed: %v", err)
	}
	res, err := it.result(run)
	if err != nil || res.Reviewer != "josé" {
		t.Fatalf("result %+v, %v; want the run approved by josé", res, err)
	}
	wantRuns(t, mark, 1)
}
