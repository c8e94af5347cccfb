//go:build integration

package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/grpc"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// callCounter counts the gRPC methods a Temporal client calls.
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *callCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.calls[method[strings.LastIndex(method, "/")+1:]]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *callCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

// countingClient is a client of ts whose gRPC calls are counted.
func countingClient(t *testing.T, ts *temporaltest.TestServer, queue string) (*client.Client, tclient.Client, *callCounter) {
	t.Helper()
	counter := &callCounter{calls: map[string]int{}}
	tc, err := tclient.Dial(tclient.Options{HostPort: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace(),
		ConnectionOptions: tclient.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(counter.intercept)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	c, err := client.New(client.Options{Temporal: tc, TaskQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return c, tc, counter
}

// Issue 33: Start learns the check's outcome from the update that starts the run
// (update-with-start): one call, no status query, for a request that passes its check and for one
// that fails it (its typed error, with which the run ended); the history records the update.
func TestIntegrationStartLearnsTheCheckInOneCall(t *testing.T) {
	ts := devtest.Start(t)
	startWorker(t, ts, "one-call", nil)
	c, tc, counter := countingClient(t, ts, "one-call")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	started, err := c.Start(ctx, guard.Request{Code: "print(1)"}, client.StartOptions{SkipWorkerCheck: true})
	if err != nil || !strings.HasPrefix(started.Digest, "sha256:") || started.RunID == "" {
		t.Fatalf("Start = %+v, %v; want a digest and a run id", started, err)
	}
	if calls := counter.take(); calls["ExecuteMultiOperation"] != 1 || calls["QueryWorkflow"] != 0 || calls["StartWorkflowExecution"] != 0 {
		t.Fatalf("Start called %v; want one ExecuteMultiOperation, no query, no plain start", calls)
	}
	st, err := c.Status(ctx, started.WorkflowID)
	if err != nil || st.Request.Digest != started.Digest || st.State != contract.StatusAwaitingApproval {
		t.Fatalf("status = %+v, %v; want the run waiting with digest %s", st, err, started.Digest)
	}
	var accepted, completed int
	for it := tc.GetWorkflowHistory(ctx, started.WorkflowID, started.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT); it.HasNext(); {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && a.GetAcceptedRequest().GetInput().GetName() == contract.UpdateAwaitCheck {
			accepted++
		}
		if ev.GetWorkflowExecutionUpdateCompletedEventAttributes() != nil {
			completed++
		}
	}
	if accepted != 1 || completed != 1 {
		t.Fatalf("history has %d accepted and %d completed await-check updates; want 1 and 1", accepted, completed)
	}
	counter.take()

	_, err = c.Start(ctx, guard.Request{Code: "print(1)", Language: "cobol"}, client.StartOptions{SkipWorkerCheck: true, WorkflowID: "refused"})
	var tu *guard.ToolUsageError
	if !errors.As(err, &tu) || !strings.Contains(err.Error(), "cobol") {
		t.Fatalf("Start of a refused request = %v; want the check's ToolUsageError", err)
	}
	if calls := counter.take(); calls["ExecuteMultiOperation"] != 1 || calls["QueryWorkflow"] != 0 || calls["GetWorkflowExecutionHistory"] != 0 {
		t.Fatalf("Start of a refused request called %v; want one ExecuteMultiOperation, no query, no wait for the result", calls)
	}
	if _, err := c.Result(ctx, "refused"); !errors.As(err, &tu) {
		t.Fatalf("the refused run ended with %v; want the same ToolUsageError", err)
	}

	// Both histories, with the update in them, replay against the workflow code.
	for _, id := range []string{started.WorkflowID, "refused"} {
		r := worker.NewWorkflowReplayer()
		workflows.Register(r)
		if err := r.ReplayWorkflowExecution(ctx, tc.WorkflowService(), nil, ts.GetDefaultNamespace(), workflow.Execution{ID: id}); err != nil {
			t.Fatalf("replay %s: %v", id, err)
		}
	}
}

// Issue 33: a server with updates turned off refuses update-with-start; Start then starts the
// run plainly and polls its status, as before.
func TestIntegrationStartFallsBackWithoutUpdates(t *testing.T) {
	ts := devtest.Start(t, temporaltest.WithBaseServerOptions(temporal.WithDynamicConfigClient(dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
		dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key():   false,
	})))
	startWorker(t, ts, "no-updates", nil)
	c, _, counter := countingClient(t, ts, "no-updates")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var announced client.Started
	started, err := c.Start(ctx, guard.Request{Code: "print(1)"}, client.StartOptions{SkipWorkerCheck: true, OnStarted: func(s client.Started) { announced = s }})
	if err != nil || !strings.HasPrefix(started.Digest, "sha256:") || announced.RunID != started.RunID {
		t.Fatalf("Start = %+v, %v (announced %+v); want a digest from the polled status", started, err, announced)
	}
	if calls := counter.take(); calls["ExecuteMultiOperation"] != 1 || calls["StartWorkflowExecution"] != 1 || calls["QueryWorkflow"] == 0 {
		t.Fatalf("Start called %v; want the refused update-with-start, a plain start and status queries", calls)
	}
}
