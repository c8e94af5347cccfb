//go:build integration

package client_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/backends/httpservice"
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

// ApproveAndWait gets the decision and the result without a long poll (Decision.Wait): the
// update is answered once the code has ended, without its result (Decision.ResultFromHistory),
// which the wait reads from the run's history in the read that checks its receipt; nothing else
// is called after the statement's reads (no long poll, no query). A refused decision returns no
// wait.
func TestIntegrationApproveAndWaitMakesOneCallForTheResult(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	release, running := make(chan struct{}), make(chan struct{})
	b, err := httpservice.New("fake", func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		close(running)
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
	type answer struct {
		dr   client.Decided
		wait *client.ResultWait
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		dr, wait, err := c.ApproveAndWait(ctx, client.Run(started.WorkflowID), started.Digest, e.Reviewer.Signer, "")
		answered <- answer{dr, wait, err}
	}()
	<-running
	select {
	case a := <-answered:
		t.Fatalf("ApproveAndWait answered while the code still runs: %+v, %v; want the answer once it ended", a.dr, a.err)
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	a := <-answered
	if a.err != nil || a.dr.State != contract.StatusRunning || !a.dr.Ended || a.dr.Result != nil {
		t.Fatalf("ApproveAndWait: %+v, %v; want the approval that started the run, ended, without its result (Decision.ResultFromHistory)", a.dr, a.err)
	}
	calls := log.since(from)
	update := slices.Index(calls, "UpdateWorkflowExecution")
	if update < 0 {
		t.Fatalf("calls %v; want the decide update", calls)
	}
	res, err := a.wait.Get(ctx)
	if err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("result: %q, %v; want ok", res.Stdout, err)
	}
	// After the update: its polls, and the read of the run's history that gives the result and
	// checks its receipt; never a long poll on the result.
	for _, name := range log.since(from + update) {
		switch name {
		case "UpdateWorkflowExecution", "UpdateWorkflowExecution returned", "PollWorkflowExecutionUpdate",
			"GetWorkflowExecutionHistory", "DescribeWorkflowExecution":
			continue
		}
		t.Errorf("calls from the decide update on: %v; want the update (and its polls) and the receipt check's reads only: no long poll on the result", log.since(from+update))
		break
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

// What the decide update does not answer with, the run's result still gives: a result with more
// output than MaxAnsweredResultBytes (not recorded twice), in its stdout or in what it showed
// (outputs count as output), and a run that ended with an error
// (typed, from the workflow's result). Each decision is answered once the run has ended.
func TestIntegrationApproveAndWaitLeavesLargeAndFailedResultsToTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	big := bytes.Repeat([]byte("x"), contract.MaxAnsweredResultBytes+1)
	b, err := httpservice.New("fake", func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		switch c.Code {
		case "fail":
			return guard.Result{}, &guard.ConfigError{Msg: "the backend is misconfigured"}
		case "shows":
			half := big[:len(big)/2+1]
			return guard.Result{OK: true, Outputs: []guard.Output{
				{Index: 1, Source: guard.OutputDisplay, MIME: guard.MIMEText, Size: int64(len(half)), Data: half},
				{Index: 2, Source: guard.OutputDisplay, MIME: guard.MIMEText, Size: int64(len(half)), Data: half}}}, nil
		}
		return guard.Result{OK: true, Stdout: big}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e := agenttest.Setup(t, agenttest.Options{Backend: b, Policy: &guard.Policy{ApprovalTimeout: time.Hour, MaxStdoutBytes: contract.MaxAnsweredResultBytes + 1024},
		Reviewer: reviewertest.New(t, "bob"), TaskQueue: "approve-wait-left", NoStarter: true})
	c := e.Client.WithReviewer("bob")

	started, err := e.Client.Start(ctx, guard.Request{Code: "big"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dr, wait, err := c.ApproveAndWait(ctx, client.Run(started.WorkflowID), started.Digest, e.Reviewer.Signer, "")
	if err != nil || !dr.Ended || dr.Result != nil {
		t.Fatalf("ApproveAndWait of a large result: %+v, %v; want it answered once ended, without the result", dr, err)
	}
	res, err := wait.Get(ctx)
	if err != nil || !bytes.Equal(res.Stdout, big) {
		t.Fatalf("the large result: %d bytes, %v; want all %d", len(res.Stdout), err, len(big))
	}

	started, err = e.Client.Start(ctx, guard.Request{Code: "shows"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dr, wait, err = c.ApproveAndWait(ctx, client.Run(started.WorkflowID), started.Digest, e.Reviewer.Signer, "")
	if err != nil || !dr.Ended || dr.Result != nil {
		t.Fatalf("ApproveAndWait of a result showing large outputs: %+v, %v; want it answered once ended, without the result", dr, err)
	}
	if res, err := wait.Get(ctx); err != nil || len(res.Outputs) != 2 || len(res.Outputs[1].Data) != len(big)/2+1 {
		t.Fatalf("the result showing large outputs: %+v, %v; want both outputs whole", res.Outputs, err)
	}

	started, err = e.Client.Start(ctx, guard.Request{Code: "fail"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dr, wait, err = c.ApproveAndWait(ctx, client.Run(started.WorkflowID), started.Digest, e.Reviewer.Signer, "")
	if err != nil || !dr.Ended || dr.Result != nil {
		t.Fatalf("ApproveAndWait of a run that fails: %+v, %v; want it answered once ended, without a result", dr, err)
	}
	var ce *guard.ConfigError
	if _, err := wait.Get(ctx); !errors.As(err, &ce) {
		t.Fatalf("the failed run's result: %v; want its ConfigError", err)
	}
}
