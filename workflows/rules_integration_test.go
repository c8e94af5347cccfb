//go:build integration

package workflows_test

import (
	"path/filepath"
	"testing"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/rules"
)

// TestRecordRulesHistory runs the story of testdata/runcode_rules_group.json and checks that its
// history replays (historytest.Recorded; SANDBOXFLOW_RECORD_HISTORY=1 re-records the file): a
// run whose code names corp.example, under a rule that needs one approval from the group
// security (bob), on the local backend: alice's approval is counted and the run keeps waiting
// for 1 approval from security; bob's approval runs it, and the check recorded the policy's hash.
func TestRecordRulesHistory(t *testing.T) {
	it := newITest(t)
	q := newQuorumReviewers(it)
	set, err := rules.Parse([]byte(`version: 1
groups: {security: [bob]}
rules:
  - {name: corp, when: 'request.code.contains("corp.example")', require: {group: security}, warn: names the corporate network}
`))
	if err != nil {
		t.Fatal(err)
	}
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) { c.Rules = set })
	const id = "recorded-rules" // workflows.recordedRulesID
	run := it.start(id, it.queue, guard.Request{Code: "print('api.corp.example')"})
	it.waitState(id, contract.StatusAwaitingApproval)
	if res, err := it.decide(id, it.signedAs(id, q.alice, "alice", true)); err != nil || res.State != contract.StatusAwaitingApproval {
		t.Fatalf("alice's approval: %+v, %v; want counted, still waiting", res, err)
	}
	st := it.waitState(id, contract.StatusAwaitingApproval)
	if len(st.Missing) != 1 || st.Missing[0] != "1 approval from security" || st.Rules == nil || st.Rules.PolicyHash != set.Hash() {
		t.Fatalf("status after alice: missing %q, rules %+v; want 1 approval from security under %s", st.Missing, st.Rules, set.Hash())
	}
	if _, err := it.decide(id, it.signedAs(id, q.bob, "bob", true)); err != nil {
		t.Fatal(err)
	}
	if res, err := it.result(run); err != nil || len(res.Approvals) != 2 {
		t.Fatalf("result %+v, %v; want alice's and bob's approvals", res, err)
	}
	historytest.Recorded(t, replayer(), id, it.history(id), filepath.Join("testdata", "runcode_rules_group.json"))
}
