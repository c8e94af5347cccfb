package workflows

import (
	"fmt"
	"testing"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Under a quorum of 1 and a rule that needs one approval from security, the desk keeps the seat
// waiting after bob's approval, says what is missing, and takes the decision (bob's, the first)
// once sec approves; an edit's check never lowers what a group needs.
func TestDeskWaitsForAGroup(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	wf := func(ctx workflow.Context) ([]string, error) {
		k := &desk{quorumVersion: 1, quorum: 1}
		k.startRules(&guard.RuleDecision{PolicyHash: "sha256:x", Groups: []guard.GroupNeed{{Group: "security", Approvals: 1, Principals: []string{"sec"}}}})
		b, shown := &ballot{}, &contract.DecisionWait{}
		var events []contract.EventType
		s := seat{what: "run", ballot: b, shown: shown, event: func(_ workflow.Context, typ contract.EventType, _ ...any) { events = append(events, typ) }}
		var out []string
		for _, v := range []approval.Verified{{Principal: "bob", Fingerprint: "SHA256:b"}, {Principal: "sec", Fingerprint: "SHA256:s"}} {
			k.accept(ctx, s, contract.Decision{ApprovalID: v.Principal, Approve: true}, v, contract.ViaUpdate)
			who := ""
			if b.decision != nil {
				who = b.decision.Reviewer
			}
			out = append(out, fmt.Sprintf("decision %q missing %q", who, shown.Missing))
		}
		out = append(out, fmt.Sprint(events))
		return out, nil
	}
	env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "desk-groups"})
	env.ExecuteWorkflow("desk-groups")
	var out []string
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	want := []string{`decision "" missing ["1 approval from security"]`, `decision "bob" missing []`, "[approval.counted]"}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("got %q; want %q", out, want)
	}
	merged := mergeGroups([]guard.GroupNeed{{Group: "security", Approvals: 2}}, []guard.GroupNeed{{Group: "security", Approvals: 1}, {Group: "ops", Approvals: 1}})
	if len(merged) != 2 || merged[0].Approvals != 2 || merged[1].Group != "ops" {
		t.Fatalf("merged %+v; want security 2 and ops 1", merged)
	}
}
