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
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
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

// Sessions are subjects like runs: the session's check applies the rules to its settings
// (subject "session": a refusal refuses it; a quorum is recorded for its cells) and each cell's
// check to the cell's code (subject "cell": a refusal refuses the cell).
func TestSessionRules(t *testing.T) {
	set, err := rules.Parse([]byte(`version: 1
rules:
  - {name: no-long-sessions, when: 'subject == "session" && request.limits.timeout_seconds > 60', refuse: cells of at most a minute}
  - {name: secrets-two, when: 'subject == "session" && size(request.env) > 0', quorum: 2, warn: env}
  - {name: no-fork, when: 'subject == "cell" && cell > 1 && request.code.contains("fork")', refuse: no forks after the first cell}
`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Backend: &sessiontest.Backend{}, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), HostTaskQueue: testTaskQueue, Rules: set})
	if err != nil {
		t.Fatal(err)
	}
	long := guard.SessionRequest{Settings: guard.Settings{Limits: guard.Limits{Timeout: 2 * time.Minute}}}
	if _, err := a.SessionCheck(context.Background(), contract.SessionCheckInput{Request: long}); !isRefusedBy(err, "no-long-sessions") {
		t.Errorf("a session of 2 min cells: %v; want refused by no-long-sessions", err)
	}
	check, err := a.SessionCheck(context.Background(), contract.SessionCheckInput{Request: guard.SessionRequest{Settings: guard.Settings{Env: map[string]string{"A": "1"}}}})
	if err != nil || check.Quorum != 2 || check.Rules == nil || len(check.Rules.Warnings) != 1 {
		t.Fatalf("a session with env: %+v, %v; want quorum 2 and a warning recorded", check.Rules, err)
	}
	in := contract.CellCheckInput{Session: check.Session, Index: 2, Code: "os.fork()"}
	if _, err := a.SessionCellCheck(context.Background(), in); !isRefusedBy(err, "no-fork") {
		t.Errorf("cell 2 that forks: %v; want refused by no-fork", err)
	}
	in.Index = 1
	if _, err := a.SessionCellCheck(context.Background(), in); err != nil {
		t.Errorf("cell 1 that forks: %v; want it checked", err)
	}
}

func isRefusedBy(err error, rule string) bool {
	pr, ok := contract.FromFailure(err).(*guard.PolicyRefused)
	return ok && pr.Rule == rule
}

// A cell that a rule asks more of than the session's rules ask (a group, a quorum) is refused at
// its check, naming the rule: the workflow cannot wait for it and the host would refuse it.
func TestCellRulesBeyondTheSession(t *testing.T) {
	set, err := rules.Parse([]byte(`version: 1
groups: {security: [sec]}
rules:
  - {name: cell-corp, when: 'subject == "cell" && request.code.contains("corp")', require: {group: security}}
  - {name: all-corp, when: 'request.env.exists(e, e == "CORP")', require: {group: security}}
`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Backend: &sessiontest.Backend{}, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), HostTaskQueue: testTaskQueue, Rules: set})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := a.SessionCheck(context.Background(), contract.SessionCheckInput{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SessionCellCheck(context.Background(), contract.CellCheckInput{Session: plain.Session, Index: 1, Code: "print('corp')"}); !isRefusedBy(err, "cell-corp") {
		t.Errorf("a corp cell of a plain session: %v; want refused by cell-corp", err)
	}
	corp, err := a.SessionCheck(context.Background(), contract.SessionCheckInput{Request: guard.SessionRequest{Settings: guard.Settings{Env: map[string]string{"CORP": "1"}}}})
	if err != nil || corp.Rules == nil || len(corp.Rules.Groups) != 1 {
		t.Fatalf("a corp session: %+v, %v; want the security group recorded", corp.Rules, err)
	}
	if _, err := a.SessionCellCheck(context.Background(), contract.CellCheckInput{Session: corp.Session, Index: 1, Code: "print('corp')"}); err != nil {
		t.Errorf("a corp cell of a session that needs security: %v; want checked", err)
	}
}
