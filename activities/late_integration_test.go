//go:build integration

package activities

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// heartbeatCut fails a sandbox host's activity heartbeats with Unavailable while on is set, as
// a network cut between the host and the server does; its other calls go through.
type heartbeatCut struct{ on atomic.Bool }

func (c *heartbeatCut) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if c.on.Load() && strings.HasSuffix(method, "/RecordActivityTaskHeartbeat") {
		return status.Error(codes.Unavailable, "heartbeatCut: the network is cut")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// cutBackend cuts the host's heartbeats when its code starts and runs for d, past the heartbeat
// timeout, so that the server times the attempt out while the code runs.
type cutBackend struct {
	cut *heartbeatCut
	d   time.Duration
}

func (b *cutBackend) Name() string { return "echo" }

func (b *cutBackend) Run(ctx context.Context, _ guard.Checked) (guard.Result, error) {
	b.cut.on.Store(true)
	defer b.cut.on.Store(false)
	select {
	case <-time.After(b.d):
		return guard.Result{Stdout: []byte("ran through the cut")}, nil
	case <-ctx.Done():
		return guard.Result{}, ctx.Err()
	}
}

// lateProbeOut is what lateProbe saw: the sandbox activity's error and the late result.
type lateProbeOut struct {
	HeartbeatTimeout bool
	Late             contract.LateResult
}

// lateProbe runs the sandbox activity with the input it is signalled on "input" (its approval
// names the run), under a 2 s heartbeat timeout, and returns the late result it is signalled
// after the activity timed out.
func lateProbe(ctx workflow.Context) (lateProbeOut, error) {
	var in contract.RunInput
	workflow.GetSignalChannel(ctx, "input").Receive(ctx, &in)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		HeartbeatTimeout: 2 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	var res guard.Result
	err := workflow.ExecuteActivity(actx, contract.RunActivityName, in).Get(ctx, &res)
	var te *temporal.TimeoutError
	out := lateProbeOut{HeartbeatTimeout: errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT}
	if err == nil {
		return out, errors.New("lateProbe: the sandbox activity completed")
	}
	got := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(workflow.GetSignalChannel(ctx, contract.SignalLateResult), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, &out.Late)
		got = true
	})
	sel.AddFuture(workflow.NewTimer(ctx, time.Minute), func(workflow.Future) {})
	sel.Select(ctx)
	if !got {
		return out, errors.New("lateProbe: no late result within a minute")
	}
	return out, nil
}

// TestIntegrationLateResultAfterAHeartbeatTimeout: on a real server, a sandbox host whose
// heartbeats are cut while its code runs sees the server time the activity out; the code runs
// on to its end and the run receives its result as the late-result signal, encrypted with the
// worker's payload codec, with a receipt that verifies and names the host's claim.
func TestIntegrationLateResultAfterAHeartbeatTimeout(t *testing.T) {
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	ring, err := codec.ParseKeyRing([]byte("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	cut := &heartbeatCut{}
	c := ts.NewClientWithOptions(codec.ClientOptions(client.Options{ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(cut.intercept)}}}, ring))
	raw := ts.NewClientWithOptions(client.Options{}) // no codec: what the server stores

	host := hosttest.New(t, "host-a")
	hosts, err := receipt.LoadHosts(host.File)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Backend: &cutBackend{cut: cut, d: 8 * time.Second}, ReviewersFile: reviewersFile(t), DataConverter: codec.DataConverter(ring),
		HostKeyFile: host.KeyFile, HostName: host.Name, HostsFile: host.File, Sink: &MemorySink{}})
	if err != nil {
		t.Fatal(err)
	}
	const tq = "late-results"
	w := worker.New(c, tq, WorkerOptions(worker.Options{}))
	w.RegisterWorkflow(lateProbe)
	a.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "late-probe", TaskQueue: tq}, lateProbe)
	if err != nil {
		t.Fatal(err)
	}
	checked := checked(t, a, guard.Request{Code: "print(1)"})
	decision := testReviewer().Decision(t, reviewertest.Fields(run.GetID(), run.GetRunID(), checked.Digest, tq, true))
	if err := c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), "input", contract.RunInput{Checked: checked, Decision: decision}); err != nil {
		t.Fatal(err)
	}
	var out lateProbeOut
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !out.HeartbeatTimeout || string(out.Late.Result.Stdout) != "ran through the cut" {
		t.Fatalf("heartbeat timeout %t, late stdout %q; want the server to time the activity out and the code's output to arrive late", out.HeartbeatTimeout, out.Late.Result.Stdout)
	}
	st, err := receipt.Verify(hosts, out.Late.Result.Receipt)
	if err != nil {
		t.Fatalf("late result's receipt: %v", err)
	}
	if err := receipt.CheckResult(st, out.Late.Result); err != nil {
		t.Error(err)
	}
	claim, lateInputs := claimAndLates(t, raw, run)
	if st.Claim != claim || st.ActivityID != out.Late.ActivityID || len(lateInputs) != 1 {
		t.Errorf("receipt names claim %q, activity %q (%d late results in history); want the claim %q of the history, the late result's activity", st.Claim, st.ActivityID, len(lateInputs), claim)
	}
	var plain contract.LateResult
	if len(lateInputs) == 1 && converter.GetDefaultDataConverter().FromPayloads(lateInputs[0], &plain) == nil {
		t.Error("the late result is in history in the clear")
	}
}

// claimAndLates reads run's history as the server stores it: the host's claim's commitment and
// the late-result signals' inputs.
func claimAndLates(t *testing.T, raw client.Client, run client.WorkflowRun) (string, []*commonpb.Payloads) {
	t.Helper()
	var claim string
	var lates []*commonpb.Payloads
	iter := raw.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		s := ev.GetWorkflowExecutionSignaledEventAttributes()
		switch s.GetSignalName() {
		case contract.SignalSandboxClaim:
			var msg contract.SandboxClaim
			if err := converter.GetDefaultDataConverter().FromPayloads(s.GetInput(), &msg); err != nil {
				t.Fatal(err)
			}
			claim = msg.Commitment
		case contract.SignalLateResult:
			lates = append(lates, s.GetInput())
		}
	}
	return claim, lates
}
