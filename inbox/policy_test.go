package inbox

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A run's page shows the policy rules' warnings, escaped, and, while the run waits, the group
// approvals it still lacks; once it is decided, no longer what it lacks.
func TestRunPageShowsPolicyRules(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	s := &Server{cfg: Config{Now: func() time.Time { return now }, DecisionTTL: DefaultDecisionTTL}}
	for _, waiting := range []bool{true, false} {
		st := contract.Status{State: contract.StatusAwaitingApproval, WorkflowID: "sandbox-1",
			Rules:        &guard.RuleDecision{PolicyHash: "sha256:x", Warnings: []string{"corp: reaches <corp>"}},
			DecisionWait: contract.DecisionWait{Missing: []string{"1 approval from security"}}}
		if !waiting {
			st.State = contract.StatusSucceeded
		}
		v := s.runView(&client.RunInfo{Running: waiting, Status: st})
		var b bytes.Buffer
		if err := pages["run"].ExecuteTemplate(&b, "layout", pageData{Title: "run", Run: v}); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		if !strings.Contains(page, `id="policy-warning"`) || !strings.Contains(page, "corp: reaches &lt;corp&gt;") {
			t.Errorf("waiting %v: no escaped policy warning on the page", waiting)
		}
		if got := strings.Contains(page, "Waiting for 1 approval from security"); got != waiting {
			t.Errorf("waiting %v: the page says what is missing: %v", waiting, got)
		}
	}
}
