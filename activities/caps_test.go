package activities

import (
	"context"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/grpc"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/rules"
)

// countingLog answers visibility counts from count, and keeps every query.
type countingLog struct {
	*historytest.Log
	mu      sync.Mutex
	queries []string
	count   func(query string) int64
}

func (l *countingLog) WorkflowService() workflowservice.WorkflowServiceClient {
	return countService{WorkflowServiceClient: l.Log.WorkflowService(), l: l}
}

type countService struct {
	workflowservice.WorkflowServiceClient
	l *countingLog
}

func (s countService) CountWorkflowExecutions(_ context.Context, req *workflowservice.CountWorkflowExecutionsRequest, _ ...grpc.CallOption) (*workflowservice.CountWorkflowExecutionsResponse, error) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.l.queries = append(s.l.queries, req.GetQuery())
	return &workflowservice.CountWorkflowExecutionsResponse{Count: s.l.count(req.GetQuery())}, nil
}

// The caps at a run's check: an agent with as many runs waiting as its cap is refused with the
// cap named; another agent (fewer waiting) is not; an agent name that tries to end the query's
// string is escaped, so it is counted as the name it is; the run being checked (an edit's check
// runs while it waits) is not counted; without an agent only the totals count.
func TestCapsAtTheCheck(t *testing.T) {
	set, err := rules.Parse([]byte("version: 1\nlimits: {waiting: {per_agent: 2, total: 10}, running: {per_agent: 1}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	log := &countingLog{Log: &historytest.Log{}, count: func(q string) int64 {
		switch {
		case strings.Contains(q, "SandboxAgent = 'loop'") && strings.Contains(q, "awaiting_approval"):
			return 2
		case strings.Contains(q, "awaiting_approval") && !strings.Contains(q, "SandboxAgent"):
			return 5
		}
		return 0
	}}
	a, err := New(Config{Backend: &echoBackend{}, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), Rules: set, History: log})
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	a.Register(env)
	check := func(agent string) error {
		req := guard.Request{Code: "print(1)"}
		req.Metadata.Agent = agent
		_, err := env.ExecuteActivity(contract.CheckActivityName, contract.CheckInput{Request: req})
		return err
	}
	if pr, ok := contract.FromFailure(check("loop")).(*guard.PolicyRefused); !ok || pr.Cap != "waiting.per_agent" || !strings.Contains(pr.Reason, "agent loop") {
		t.Fatalf("agent loop with 2 waiting: %v; want refused by waiting.per_agent", check("loop"))
	}
	if err := check("other"); err != nil {
		t.Fatalf("agent other: %v; want checked", err)
	}
	log.queries = nil
	if err := check(`x' OR SandboxAgent != 'y`); err != nil {
		t.Fatalf("an agent name with quotes: %v; want checked (counted as its own name)", err)
	}
	if q := log.queries[0]; !strings.Contains(q, `SandboxAgent = 'x\' OR SandboxAgent != \'y'`) || !strings.Contains(q, "WorkflowId != 'default-test-workflow-id'") {
		t.Fatalf("query %q; want the agent name escaped, and the run being checked (an edit's) not counted", q)
	}
	log.queries = nil
	if err := check(""); err != nil || len(log.queries) != 1 || strings.Contains(strings.Join(log.queries, " "), "SandboxAgent") {
		t.Fatalf("no agent: %v, queries %q; want the waiting total alone (running has no total)", err, log.queries)
	}
}
