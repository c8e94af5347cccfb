package inbox

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// TestRunPageOffersNoApprovalOfAnOldStatementVersion: a run's status asking for statement
// version 1 (a run from before version 2, or a workflow worker's downgrade to a statement that
// names no reviewer) gets no approve statement on its page, only the reason and a denial; the
// current version gets both.
func TestRunPageOffersNoApprovalOfAnOldStatementVersion(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	s := &Server{cfg: Config{Now: func() time.Time { return now }, DecisionTTL: DefaultDecisionTTL}}
	for _, version := range []int{0, approval.StatementVersion1, approval.StatementVersion} {
		ri := &client.RunInfo{Running: true, Status: contract.Status{State: contract.StatusAwaitingApproval, WorkflowID: "sandbox-1", RunID: uuid.NewString(),
			StatementVersion: version, SandboxTaskQueue: "sandboxflow", Request: guard.Summary{Digest: "sha256:" + strings.Repeat("ab", 32)}}}
		v := &runView{ID: "sandbox-1", State: "awaiting_approval", Awaiting: true}
		if err := s.statements(ri, v, "alice"); err != nil {
			t.Fatalf("version %d: statements: %v", version, err)
		}
		var b bytes.Buffer
		if err := pages["run"].ExecuteTemplate(&b, "layout", pageData{Title: "run", Run: v}); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		current := version == approval.StatementVersion
		if got := strings.Contains(page, `id="statement-approve"`); got != current {
			t.Errorf("version %d: approve statement on the page %v; want %v", version, got, current)
		}
		if got := strings.Contains(page, `id="approve-refused"`); got == current {
			t.Errorf("version %d: approval refused on the page %v; want %v", version, got, !current)
		}
		if !strings.HasPrefix(v.Deny.Text, "sandboxflow-approval-statement v") || v.Deny.Approve {
			t.Errorf("version %d: deny statement %+v; want one", version, v.Deny)
		}
	}
}
