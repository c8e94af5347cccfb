//go:build integration

package workflows_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
)

// slowClaim is the worker's own Temporal client whose first signal (the sandbox activity's
// claim) waits delay before it goes, as on a server under load.
type slowClaim struct {
	client.Client
	delay time.Duration
	once  sync.Once
}

func (s *slowClaim) WorkflowService() workflowservice.WorkflowServiceClient {
	return slowSignal{s.Client.WorkflowService(), s}
}

type slowSignal struct {
	workflowservice.WorkflowServiceClient
	s *slowClaim
}

func (w slowSignal) SignalWorkflowExecution(ctx context.Context, in *workflowservice.SignalWorkflowExecutionRequest, opts ...grpc.CallOption) (*workflowservice.SignalWorkflowExecutionResponse, error) {
	w.s.once.Do(func() { time.Sleep(w.s.delay) })
	return w.WorkflowServiceClient.SignalWorkflowExecution(ctx, in, opts...)
}

// The sandbox activity heartbeats from its start: a claim that takes longer than the heartbeat
// timeout (2 s here) on a slow server still runs the code, once, instead of the server timing the
// activity out with its approval used ("outcome unknown"), as a clean-clone CI run saw happen.
func TestIntegrationSlowClaimOutlastsTheHeartbeatTimeout(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) {
		c.History = &slowClaim{Client: it.c, delay: 2*c.HeartbeatTimeout + time.Second}
	})
	req, mark := markRequest(t)
	const id = "it-slow-claim"
	run := it.start(id, it.queue, req)
	if _, err := it.decide(id, it.signed(id, true)); err != nil {
		t.Fatal(err)
	}
	res, err := it.result(run)
	if err != nil || !res.OK {
		t.Fatalf("result %+v, %v; want the code run", res, err)
	}
	wantRuns(t, mark, 1)
	if st, err := it.status(id); err != nil || st.State != contract.StatusSucceeded {
		t.Fatalf("status %+v, %v", st, err)
	}
}
