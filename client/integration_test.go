//go:build integration

package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"

	"github.com/sandboxflow/sandboxflow/backends/httpservice"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// startWorker runs RunCode and its activities on queue of ts, over a backend that prints "ok",
// with bob as the one reviewer; more registers more on the worker (optional).
func startWorker(t *testing.T, ts *temporaltest.TestServer, queue string, more func(worker.Registry)) *agenttest.Env {
	t.Helper()
	b, err := httpservice.New("fake", func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		return guard.Result{OK: true, Stdout: []byte("ok\n")}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return agenttest.Setup(t, agenttest.Options{Server: ts, Backend: b, Policy: &guard.Policy{ApprovalTimeout: time.Hour},
		Reviewer: reviewertest.New(t, "bob"), TaskQueue: queue, Register: more, NoStarter: true})
}

// other is a workflow of another type that waits until it is cancelled.
func other(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool { return false })
}

// Findings 1 and 3 of issue 17 against a real server: no worker fails fast; an existing id, open
// or closed, is a ConfigError naming it; the id is known as soon as the run starts; result has a
// timeout; a workflow of another type is refused by show, approve, deny and result.
func TestIntegrationStartEdges(t *testing.T) {
	ts := devtest.Start(t)
	tc := ts.GetDefaultClient()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(client.Options{Temporal: tc, TaskQueue: "edges", Reviewer: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	req := guard.Request{Code: "print(1)"}

	begin := time.Now()
	_, err = c.Start(ctx, req, client.StartOptions{WorkflowID: "no-worker"})
	var nw *client.NoWorkerError
	if !errors.As(err, &nw) || time.Since(begin) > 10*time.Second {
		t.Fatalf("Start with no worker = %v after %s; want a *NoWorkerError at once", err, time.Since(begin))
	}

	// The worker also runs a workflow of another type, which show, approve, deny and result
	// must refuse.
	bob := startWorker(t, ts, "edges", func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(other, workflow.RegisterOptions{Name: "Other"})
	}).Reviewer
	var announced client.Started
	first, err := c.Start(ctx, req, client.StartOptions{WorkflowID: "mine", OnStarted: func(s client.Started) { announced = s }})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if announced.WorkflowID != "mine" || announced.RunID != first.RunID || announced.Digest != "" {
		t.Errorf("OnStarted got %+v; want the ids before the digest (run %s)", announced, first.RunID)
	}
	for _, state := range []string{"open", "closed"} {
		// A start retried with the same id and request (its answer lost) gets the same run.
		again, err := c.Start(ctx, req, client.StartOptions{WorkflowID: "mine"})
		if err != nil && state == "open" || again.RunID != first.RunID || state == "open" && again.Digest != first.Digest {
			t.Fatalf("Start retried with the id and request of an %s run = %+v, %v; want that run %+v", state, again, err, first)
		}
		_, err = c.Start(ctx, guard.Request{Code: "print('new code')"}, client.StartOptions{WorkflowID: "mine"})
		var ce *guard.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), `"mine"`) {
			t.Fatalf("Start with the id of an %s run = %v; want a ConfigError naming it", state, err)
		}
		if state == "open" {
			_, err := c.WaitResult(ctx, client.Run("mine"), 500*time.Millisecond)
			var wt *client.WaitTimeoutError
			if !errors.As(err, &wt) || wt.State != contract.StatusAwaitingApproval {
				t.Fatalf("WaitResult of a waiting run = %v; want a *WaitTimeoutError in state awaiting_approval", err)
			}
			if _, err := c.Deny(ctx, client.Run("mine"), bob.Signer, "no"); err != nil {
				t.Fatalf("Deny: %v", err)
			}
			var ad *guard.ApprovalDenied
			if _, err := c.WaitResult(ctx, client.Run("mine"), 0); !errors.As(err, &ad) {
				t.Fatalf("WaitResult after the denial = %v; want ApprovalDenied", err)
			}
		}
	}

	// A workflow id that reads as a sentence and a link in a reviewer's notification: the client
	// refuses it before sending anything, and a run or session a namespace writer starts under it
	// ends at its check with the same ToolUsageError, before any reviewer hears of it.
	const sentence = "Approved by bob: see https://evil.example/x"
	if _, err := c.Start(ctx, req, client.StartOptions{WorkflowID: sentence}); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("Start under %q = %v; want a ToolUsageError", sentence, err)
	}
	if _, err := c.OpenSession(ctx, guard.SessionRequest{}, client.SessionOptions{WorkflowID: sentence}); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("OpenSession under %q = %v; want a ToolUsageError", sentence, err)
	}
	for typ, in := range map[string]any{contract.WorkflowName: contract.Input{Request: req}, contract.SessionWorkflowName: contract.SessionInput{}} {
		id := sentence + " " + typ
		run, err := tc.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: id, TaskQueue: "edges"}, typ, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Get(ctx, nil); guard.TypeOf(contract.FromFailure(err)) != guard.TypeToolUsageError || !strings.Contains(err.Error(), "workflow id") {
			t.Errorf("%s started under %q by the namespace: %v; want it ended by a ToolUsageError naming the workflow id", typ, id, err)
		}
	}

	if _, err := tc.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: "not-runcode", TaskQueue: "edges"}, "Other"); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(context.Context) error{
		"show": func(ctx context.Context) error {
			_, err := c.Review(ctx, client.Run("not-runcode"), client.ReviewOptions{EnvValues: true, InputFiles: true})
			return err
		},
		"approve": func(ctx context.Context) error {
			_, err := c.Approve(ctx, client.Run("not-runcode"), "d", bob.Signer, "")
			return err
		},
		"deny": func(ctx context.Context) error {
			_, err := c.Deny(ctx, client.Run("not-runcode"), bob.Signer, "no")
			return err
		},
		"result": func(ctx context.Context) error { _, err := c.WaitResult(ctx, client.Run("not-runcode"), 0); return err },
	}
	for name, call := range calls {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := call(cctx)
		ccancel()
		var nr *client.NotRunCodeError
		if !errors.As(err, &nr) || nr.Type != "Other" {
			t.Errorf("%s of another workflow type = %v; want a *NotRunCodeError naming Other", name, err)
		}
	}
}

// A reviewer's face reads a run, and the run is reset before the decision is sent: DecideRun sends
// the decision to the run that was read, which has ended, so it never reaches the new run (which
// still waits, with no decision and no rejection); a statement read off the new run is accepted.
func TestIntegrationDecideRunReachesOnlyTheRunRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startWorker(t, nil, "pinned", nil)
	c, bob := e.Client, e.Reviewer
	started, err := c.Start(ctx, guard.Request{Code: "print(1)"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read, err := c.ReadRun(ctx, started.WorkflowID)
	if err != nil || !read.Running || read.Status.RunID != started.RunID || read.Status.State != contract.StatusAwaitingApproval {
		t.Fatalf("ReadRun = %+v, %v; want the waiting run %s", read, err, started.RunID)
	}
	f, err := client.StatementFor(read.Status, client.StatementOptions{Reviewer: bob.Principal}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d, err := client.SignDecision(bob.Signer, f, "")
	if err != nil {
		t.Fatal(err)
	}
	reset := resetToFirstTask(ctx, t, e, started)
	var now client.RunInfo
	for now, err = c.ReadRun(ctx, started.WorkflowID); err != nil || now.Status.State != contract.StatusAwaitingApproval || now.Status.RunID != reset; now, err = c.ReadRun(ctx, started.WorkflowID) {
		if ctx.Err() != nil {
			t.Fatalf("the reset run %s never waited: %+v, %v", reset, now, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err = c.DecideRun(ctx, started.WorkflowID, read.Status.RunID, d)
	if err == nil {
		t.Fatalf("a decision for the run read was accepted after that run ended")
	}
	if rej, ok := contract.RejectionOf(err); ok {
		t.Fatalf("the decision reached the new run, which rejected it (%v); want it sent to the ended run only", rej)
	}
	if now, err = c.ReadRun(ctx, started.WorkflowID); err != nil || now.Status.Decision != nil || now.Status.RejectedDecisions != 0 || now.Status.State != contract.StatusAwaitingApproval {
		t.Fatalf("the new run after the stale decision: %+v, %v; want it waiting, untouched", now.Status, err)
	}
	f, err = client.StatementFor(now.Status, client.StatementOptions{Reviewer: bob.Principal}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if d, err = client.SignDecision(bob.Signer, f, ""); err != nil {
		t.Fatal(err)
	}
	if res, err := c.DecideRun(ctx, started.WorkflowID, now.Status.RunID, d); err != nil || res.State != contract.StatusRunning {
		t.Fatalf("DecideRun on the new run = %+v, %v; want it running", res, err)
	}
}

// resetToFirstTask resets the started run to the end of its first workflow task (before any
// decision) and returns the new run's id.
func resetToFirstTask(ctx context.Context, t *testing.T, e *agenttest.Env, started client.Started) string {
	t.Helper()
	var firstTask int64
	for it := e.Temporal.GetWorkflowHistory(ctx, started.WorkflowID, started.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT); it.HasNext() && firstTask == 0; {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			firstTask = ev.GetEventId()
		}
	}
	reset, err := e.Temporal.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: e.Namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: started.WorkflowID, RunId: started.RunID},
		Reason: "a reviewer's page is stale", WorkflowTaskFinishEventId: firstTask, RequestId: uuid.NewString(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return reset.GetRunId()
}
