//go:build integration

package client_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/backends/callable"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// callLog records the gRPC calls a Temporal client makes, in order; a history read that waits for
// new events (a long poll) is named "long poll", and the decide update's return is noted.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	name := method[strings.LastIndex(method, "/")+1:]
	if h, ok := req.(*workflowservice.GetWorkflowExecutionHistoryRequest); ok && h.GetWaitNewEvent() {
		name = "long poll"
	}
	l.add(name)
	err := invoker(ctx, method, req, reply, cc, opts...)
	if name == "UpdateWorkflowExecution" {
		l.add("UpdateWorkflowExecution returned")
	}
	return err
}

func (l *callLog) add(name string) {
	l.mu.Lock()
	l.calls = append(l.calls, name)
	l.mu.Unlock()
}

func (l *callLog) since(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls[i:]...)
}

func (l *callLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.calls)
}

// ApproveAndWait waits for the result with one long poll on the approved run, started with the
// decide update: after the update nothing else is called (no describe, no query, no second poll),
// and the result comes back once the code ends. A refused decision returns no wait.
func TestIntegrationApproveAndWaitMakesOneCallForTheResult(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	release := make(chan struct{})
	b, err := callable.New("fake", func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		select {
		case <-release:
			return guard.Result{OK: true, Stdout: []byte("ok\n")}, nil
		case <-ctx.Done():
			return guard.Result{}, ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	e := agenttest.Setup(t, agenttest.Options{Backend: b, Policy: &guard.Policy{ApprovalTimeout: time.Hour},
		Reviewer: reviewertest.New(t, "bob"), TaskQueue: "approve-wait", NoStarter: true})
	log := &callLog{}
	tc, err := tclient.Dial(tclient.Options{HostPort: e.Address, Namespace: e.Namespace,
		ConnectionOptions: tclient.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(log.intercept)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	c, err := client.New(client.Options{Temporal: tc, Namespace: e.Namespace, TaskQueue: e.TaskQueue, Reviewer: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	started, err := e.Client.Start(ctx, guard.Request{Code: "print(1)"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if _, _, err := c.DecideAndWait(ctx, started.WorkflowID, "", contract.Decision{}); err == nil || !strings.Contains(err.Error(), "run id") {
		t.Errorf("DecideAndWait without a run id: %v; want it refused", err)
	}
	from := log.len()
	dr, wait, err := c.ApproveAndWait(ctx, started.WorkflowID, started.Digest, e.Reviewer.Signer, "")
	if err != nil || dr.State != contract.StatusRunning {
		t.Fatalf("ApproveAndWait: %+v, %v; want the run running", dr, err)
	}
	calls := log.since(from)
	update := -1
	for i, name := range calls {
		if name == "UpdateWorkflowExecution returned" {
			update = i
		}
	}
	if update < 0 || !containsCall(calls[:update], "long poll") {
		t.Fatalf("calls %v; want the long poll on the result started before the decide update returned", calls)
	}
	close(release)
	res, err := wait.Get(ctx)
	if err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("result: %q, %v; want ok", res.Stdout, err)
	}
	if after := log.since(from + update + 1); len(after) != 0 {
		t.Errorf("calls after the decide update returned: %v; want none (the long poll was already waiting)", after)
	}
	if polls := countCall(log.since(from), "long poll"); polls != 1 {
		t.Errorf("%d long polls; want 1", polls)
	}

	// A decision the workflow refuses (the run was decided already) returns no wait.
	f, err := client.StatementFor(contract.Status{State: contract.StatusAwaitingApproval, WorkflowID: started.WorkflowID, RunID: started.RunID, StatementVersion: approval.StatementVersion, SandboxTaskQueue: e.TaskQueue,
		Request: guard.Summary{Digest: started.Digest}}, client.StatementOptions{Reviewer: "bob"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d, err := client.SignDecision(e.Reviewer.Signer, f, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, w, err := c.DecideAndWait(ctx, started.WorkflowID, started.RunID, d); err == nil || w != nil {
		t.Errorf("a decision on a run that ended: wait %v, %v; want an error and no wait", w, err)
	}
}

func containsCall(calls []string, name string) bool { return countCall(calls, name) > 0 }

func countCall(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if c == name {
			n++
		}
	}
	return n
}
