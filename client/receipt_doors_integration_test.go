//go:build integration

package client_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/sandboxflow/sandboxflow/backends/httpservice"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
)

// alterStdout rewrites, in every answer the client receives, a result's stdout "ok\n" into
// "OK\n": what a namespace writer (or anyone between the server and the client) could make the
// client read in place of what the host signed.
func alterStdout(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return err
	}
	alter := func(p *commonpb.Payloads) {
		for _, pl := range p.GetPayloads() {
			pl.Data = bytes.ReplaceAll(pl.Data, []byte(`"stdout":"ok\n"`), []byte(`"stdout":"OK\n"`))
		}
	}
	switch r := reply.(type) {
	case *workflowservice.UpdateWorkflowExecutionResponse:
		alter(r.GetOutcome().GetSuccess())
	case *workflowservice.PollWorkflowExecutionUpdateResponse:
		alter(r.GetOutcome().GetSuccess())
	case *workflowservice.GetWorkflowExecutionHistoryResponse:
		for _, e := range r.GetHistory().GetEvents() {
			alter(e.GetWorkflowExecutionCompletedEventAttributes().GetResult())
		}
	}
	return nil
}

// answerWithResult drops result_from_history from the decide updates the client sends, as a
// worker from before it ignores it: the update then answers with the run's result.
func answerWithResult(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*workflowservice.UpdateWorkflowExecutionRequest); ok {
		for _, pl := range r.GetRequest().GetInput().GetArgs().GetPayloads() {
			pl.Data = bytes.ReplaceAll(pl.Data, []byte(`,"result_from_history":true`), nil)
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// TestIntegrationResultDoorsVerifyTheReceipt: a result altered on its way to the client (one
// byte of stdout) is refused with a ReceiptRefused at every result door of the client: the
// ended run's result approve-and-wait reads from the history, the decide update's answer when
// it carries the result (a worker from before result_from_history), the run's result (its
// close), and WaitResult; the same run read without the alteration verifies.
func TestIntegrationResultDoorsVerifyTheReceipt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := httpservice.New("fake", func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		return guard.Result{OK: true, Stdout: []byte("ok\n")}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e := agenttest.Setup(t, agenttest.Options{Backend: b, Policy: &guard.Policy{ApprovalTimeout: time.Hour},
		Reviewer: reviewertest.New(t, "bob"), TaskQueue: "receipt-doors", NoStarter: true})
	tc, err := tclient.Dial(tclient.Options{HostPort: e.Address, Namespace: e.Namespace,
		ConnectionOptions: tclient.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(alterStdout)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	c, err := client.New(client.Options{Temporal: tc, Namespace: e.Namespace, TaskQueue: e.TaskQueue, Reviewer: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	started, err := e.Client.Start(ctx, guard.Request{Code: "print('ok')"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(door string, res guard.Result, err error) {
		t.Helper()
		var rr *guard.ReceiptRefused
		if !errors.As(err, &rr) {
			t.Errorf("%s: stdout %q, %v; want a ReceiptRefused", door, res.Stdout, err)
		}
	}
	dr, wait, err := c.ApproveAndWait(ctx, client.Run(started.WorkflowID), started.Digest, e.Reviewer.Signer, "")
	if err != nil {
		t.Fatalf("approve and wait: %v", err)
	}
	if !dr.Ended || dr.Result != nil {
		t.Fatalf("the answer %+v; want the run ended, its result left to the history", dr.DecideResult)
	}
	res, err := wait.Get(ctx)
	refused("approve and wait", res, err)

	old, err := tclient.Dial(tclient.Options{HostPort: e.Address, Namespace: e.Namespace,
		ConnectionOptions: tclient.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(alterStdout, answerWithResult)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oc, err := client.New(client.Options{Temporal: old, Namespace: e.Namespace, TaskQueue: e.TaskQueue, Reviewer: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	answered, err := e.Client.Start(ctx, guard.Request{Code: "print('ok')"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dr, wait, err = oc.ApproveAndWait(ctx, client.Run(answered.WorkflowID), answered.Digest, e.Reviewer.Signer, "")
	if err != nil {
		t.Fatalf("approve and wait, answered with the result: %v", err)
	}
	if dr.Result == nil || string(dr.Result.Stdout) != "OK\n" {
		t.Fatalf("the answer's result %+v; want the altered stdout, or the test alters nothing", dr.Result)
	}
	res, err = wait.Get(ctx)
	refused("approve and wait, answered with the result", res, err)
	res, err = c.Result(ctx, started.WorkflowID)
	refused("result", res, err)
	res, err = c.WaitResult(ctx, client.Run(started.WorkflowID), time.Minute)
	refused("wait result", res, err)

	if res, err := e.Client.Result(ctx, started.WorkflowID); err != nil || string(res.Stdout) != "ok\n" || res.Receipt == nil {
		t.Errorf("the run read as it is: stdout %q, receipt %v, %v; want ok, verified", res.Stdout, res.Receipt != nil, err)
	}
}

// TestIntegrationCellResultDoorVerifiesTheReceipt: a cell's result altered on its way to the
// client (one byte of stdout, in the decide-cell answer and the session's status) is refused by
// CellResult, the door every tool that hands a cell's result on goes through; the same cell read
// as it is verifies.
func TestIntegrationCellResultDoorVerifiesTheReceipt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := &sessiontest.Backend{Result: func(guard.Cell, []guard.Cell) guard.Result {
		return guard.Result{Outcome: guard.OutcomeSucceeded, Stdout: []byte("ok\n")}
	}}
	e := agenttest.Setup(t, agenttest.Options{Backend: b, Policy: &guard.Policy{ApprovalTimeout: time.Hour},
		Reviewer: reviewertest.New(t, "bob"), TaskQueue: "receipt-cell-doors", NoStarter: true})
	tc, err := tclient.Dial(tclient.Options{HostPort: e.Address, Namespace: e.Namespace,
		ConnectionOptions: tclient.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(alterStdout, alterQueryStdout)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	c, err := client.New(client.Options{Temporal: tc, Namespace: e.Namespace, TaskQueue: e.TaskQueue, Reviewer: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Client.OpenSession(ctx, guard.SessionRequest{}, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.Client.SubmitCell(ctx, s.WorkflowID, contract.CellRequest{Code: "print('ok')"})
	if err != nil {
		t.Fatal(err)
	}
	var rr *guard.ReceiptRefused
	dec, wait, err := c.ApproveAndWait(ctx, client.Cell(s.WorkflowID, sub.Cell), sub.Digest, e.Reviewer.Signer, "")
	if err != nil || dec.CellStatus == nil || dec.CellStatus.Result == nil {
		t.Fatalf("approve cell and wait: %+v, %v; want the ended cell", dec, err)
	}
	if res, err := wait.Get(ctx); !errors.As(err, &rr) {
		t.Errorf("the approval's wait: stdout %q, %v; want a ReceiptRefused", res.Stdout, err)
	}
	if got := string(dec.CellStatus.Result.Stdout); got != "OK\n" {
		t.Fatalf("the answer's stdout %q; want the altered one, or the test alters nothing", got)
	}
	res, err := c.CellResult(ctx, s.WorkflowID, *dec.CellStatus)
	if !errors.As(err, &rr) {
		t.Errorf("cell result: stdout %q, %v; want a ReceiptRefused", res.Stdout, err)
	}
	cs, err := e.Client.AwaitCell(ctx, s.WorkflowID, sub.Cell)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := e.Client.CellResult(ctx, s.WorkflowID, cs); err != nil || string(res.Stdout) != "ok\n" {
		t.Errorf("the cell read as it is: stdout %q, %v; want ok, verified", res.Stdout, err)
	}
	if _, err := e.Client.CloseSession(ctx, s.WorkflowID, "done"); err != nil {
		t.Fatal(err)
	}
}

// alterQueryStdout is alterStdout for the answers of queries (a session's status).
func alterQueryStdout(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return err
	}
	if r, ok := reply.(*workflowservice.QueryWorkflowResponse); ok {
		for _, pl := range r.GetQueryResult().GetPayloads() {
			pl.Data = bytes.ReplaceAll(pl.Data, []byte(`"stdout":"ok\n"`), []byte(`"stdout":"OK\n"`))
		}
	}
	return nil
}
