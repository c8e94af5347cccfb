package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/rules"
)

const hostRules = `version: 1
groups: {security: [sec]}
rules:
  - {name: corp, when: 'request.code.contains("corp.example")', require: {group: security}}
  - {name: secrets, when: 'size(request.secrets) > 0 || request.code.contains("TWO")', quorum: 2}
  - {name: no-fork, when: 'request.code.contains("os.fork")', refuse: no forks}
`

// The sandbox host applies its own policy rules to what it received, whatever the workflow
// accepted (a namespace writer can schedule the sandbox activity with any approvals): code a
// rule refuses, approvals that lack the security group's, or fewer than a rule's quorum are
// refused as ApprovalRefused (policy) before anything runs; with sec's approval the run is
// admitted and the admission carries the policy's hash for the receipt.
func TestHostAppliesItsOwnRules(t *testing.T) {
	alice, bob, sec := testReviewer(), reviewertest.New(t, "bob"), reviewertest.New(t, "sec")
	file := reviewertest.WriteAllowedSigners(t, t.TempDir(), alice, bob, sec)
	set, err := rules.Parse([]byte(hostRules))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Backend: &echoBackend{}, Sink: &MemorySink{}, ReviewersFile: file, Rules: set})
	if err != nil {
		t.Fatal(err)
	}
	info := activity.Info{TaskQueue: testTaskQueue, ScheduledTime: time.Now()}
	info.WorkflowExecution.ID, info.WorkflowExecution.RunID = testWorkflowID, testRunID
	admit := func(code string, by ...*reviewertest.Reviewer) (*admission, error) {
		c, err := a.policy.Check(guard.Request{Code: code}, a.backendName)
		if err != nil {
			t.Fatal(err)
		}
		var ds []contract.Decision
		for _, r := range by {
			f := fields(c.Digest)
			f.ApprovalID, f.Reviewer, f.Approve = uuid.NewString(), r.Principal, true
			ds = append(ds, r.Decision(t, f))
		}
		ad := a.runAdmission(info, c, contract.RunInput{Checked: c, Decision: ds[0], Decisions: ds})
		_, err = a.verifyAdmission(ad)
		return ad, err
	}
	for _, tc := range []struct {
		name, code string
		by         []*reviewertest.Reviewer
		want       string
	}{
		{"a group's approval missing", "print('corp.example')", []*reviewertest.Reviewer{alice, bob}, "1 approval from security"},
		{"a rule's quorum short", "print('TWO')", []*reviewertest.Reviewer{sec}, "need 2 approvals"},
		{"a rule refuses", "import os; os.fork()", []*reviewertest.Reviewer{alice, sec}, `rule "no-fork"`},
	} {
		_, err := admit(tc.code, tc.by...)
		var ar *guard.ApprovalRefused
		if !errors.As(err, &ar) || ar.Reason != guard.RefusedPolicy || !strings.Contains(ar.Msg, tc.want) {
			t.Errorf("%s: %v; want an ApprovalRefused (policy) saying %q", tc.name, err, tc.want)
		}
		var pr *guard.PolicyRefused
		if errors.As(err, &pr) || guard.TypeOf(err) != guard.TypeApprovalRefused {
			t.Errorf("%s: %v is typed %s; want the host's ApprovalRefused", tc.name, err, guard.TypeOf(err))
		}
	}
	ad, err := admit("print('corp.example')", alice, sec)
	if err != nil || ad.policyHash != set.Hash() {
		t.Fatalf("alice and sec: %v, hash %q; want admitted under %s", err, ad.policyHash, set.Hash())
	}
}

// The check applies the rules: a refusal is a PolicyRefused naming the rule, emitted as
// policy.refused; a match records the policy's hash, the raised quorum, the group and the
// warning with the check.
func TestCheckAppliesRules(t *testing.T) {
	set, err := rules.Parse([]byte(hostRules + "  - {name: w, when: 'true', warn: read twice}\n"))
	if err != nil {
		t.Fatal(err)
	}
	sink := &MemorySink{}
	a, err := New(Config{Backend: &echoBackend{}, Sink: sink, ReviewersFile: reviewertest.WriteAllowedSigners(t, t.TempDir(), testReviewer()), Rules: set})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.SandboxCheck(context.Background(), contract.CheckInput{Request: guard.Request{Code: "import os; os.fork()"}})
	if pr, ok := contract.FromFailure(err).(*guard.PolicyRefused); !ok || pr.Rule != "no-fork" || pr.Reason != "no forks" {
		t.Fatalf("check of a refused request: %v; want a PolicyRefused by no-fork", err)
	}
	if evs := sink.Events(); len(evs) != 1 || evs[0].Type != contract.EventPolicyRefused || evs[0].Data["rule"] != "no-fork" {
		t.Fatalf("events %+v; want one policy.refused naming no-fork", evs)
	}
	res, err := a.SandboxCheck(context.Background(), contract.CheckInput{Request: guard.Request{Code: "print('corp.example TWO')"}})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Rules
	if r == nil || r.PolicyHash != set.Hash() || res.Quorum != 2 || len(r.Groups) != 1 || r.Groups[0].Group != "security" ||
		len(r.Warnings) != 1 || r.Warnings[0] != "w: read twice" {
		t.Fatalf("check result quorum %d, rules %+v; want quorum 2, the security group and one warning", res.Quorum, r)
	}
}
