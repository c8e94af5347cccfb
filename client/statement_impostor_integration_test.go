//go:build integration

package client_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// TestIntegrationLyingRunWorkflow: a namespace writer runs its own workflow under the type name
// RunCode, whose status query shows the code it was started with, honestly digested, but names
// another run or another workflow than the one the reviewer reads: a statement for it would be
// signed for that other run (and, were its own run's statement reused, sent there). The status
// and the start are read beside the describe, of whichever run is current; the reviewer door
// still holds the status to the run the server describes and refuses before anything is signed.
// The same workflow with an honest status gets a statement for its own run.
func TestIntegrationLyingRunWorkflow(t *testing.T) {
	ts := devtest.Start(t)
	tc := ts.GetDefaultClient()
	bob := reviewertest.New(t, "bob")
	req := guard.Request{Code: "print(1)"}
	checked, err := guard.Policy{}.Check(req, "docker")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		alters = map[string]func(*contract.Status){}
	)
	impostor := func(ctx workflow.Context, in contract.Input) error {
		info := workflow.GetInfo(ctx)
		mu.Lock()
		alter := alters[info.WorkflowExecution.ID]
		mu.Unlock()
		st := contract.Status{State: contract.StatusAwaitingApproval, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			SandboxTaskQueue: "host-1", StatementVersion: approval.StatementVersion, Request: checked.Summary(), DecisionWait: contract.DecisionWait{ApprovalDeadline: time.Now().Add(time.Hour)}}
		if alter != nil {
			alter(&st)
		}
		if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.Status, error) { return st, nil }); err != nil {
			return err
		}
		return workflow.Await(ctx, func() bool { return false })
	}
	w := worker.New(tc, "run-impostor", worker.Options{})
	w.RegisterWorkflowWithOptions(impostor, workflow.RegisterOptions{Name: contract.WorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	c, err := client.New(client.Options{Temporal: tc, TaskQueue: "run-impostor", Reviewer: bob.Principal, Namespace: ts.GetDefaultNamespace()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tt := range []struct {
		name  string
		alter func(*contract.Status)
	}{
		{"honest", nil},
		{"the status of another run", func(st *contract.Status) { st.RunID = "01a238ba-0000-7000-8000-000000000000" }},
		{"the status of another workflow", func(st *contract.Status) { st.WorkflowID = "run-other" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := "run-impostor-" + strings.ReplaceAll(tt.name, " ", "-")
			mu.Lock()
			alters[id] = tt.alter
			mu.Unlock()
			run, err := tc.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: id, TaskQueue: "run-impostor"}, contract.WorkflowName, contract.Input{Request: req})
			if err != nil {
				t.Fatal(err)
			}
			var f approval.Fields
			for f, err = c.Statement(ctx, client.Run(id), client.StatementOptions{}); err != nil && strings.Contains(err.Error(), "query") && ctx.Err() == nil; f, err = c.Statement(ctx, client.Run(id), client.StatementOptions{}) {
				time.Sleep(50 * time.Millisecond) // the first workflow task has not run yet
			}
			if tt.alter == nil {
				if err != nil || f.WorkflowID != id || f.RunID != run.GetRunID() || f.Digest != checked.Digest {
					t.Fatalf("Statement = %+v, %v; want one for %s run %s", f, err, id, run.GetRunID())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "do not approve") {
				t.Fatalf("Statement = %+v, %v; want it refused: the status names another run", f, err)
			}
		})
	}
}

// A reset between the reads: the run the describe names is a reset of the run the reviewer
// started, whose start event (original_execution_run_id) names the run it was reset from. The
// statement is for the run described, read of that run, and approves it.
func TestIntegrationStatementOfAResetRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startWorker(t, nil, "statement-reset", nil)
	started, err := e.Client.Start(ctx, guard.Request{Code: "print(1)"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reset := resetToFirstTask(ctx, t, e, started)
	var now client.RunInfo
	for now, err = e.Client.ReadRun(ctx, started.WorkflowID); err != nil || now.Status.State != contract.StatusAwaitingApproval || now.Status.RunID != reset; now, err = e.Client.ReadRun(ctx, started.WorkflowID) {
		if ctx.Err() != nil {
			t.Fatalf("the reset run %s never waited: %+v, %v", reset, now, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f, err := e.Client.WithReviewer(e.Reviewer.Principal).Statement(ctx, client.Run(started.WorkflowID), client.StatementOptions{})
	if err != nil || f.RunID != reset || f.Digest != started.Digest {
		t.Fatalf("Statement of the reset run = %+v, %v; want one for run %s", f, err, reset)
	}
	dr, wait, err := e.Client.WithReviewer(e.Reviewer.Principal).ApproveAndWait(ctx, client.Run(started.WorkflowID), started.Digest, e.Reviewer.Signer, "")
	if err != nil || dr.State != contract.StatusRunning {
		t.Fatalf("ApproveAndWait of the reset run = %+v, %v", dr, err)
	}
	if res, err := wait.Get(ctx); err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("the reset run's result: %+v, %v", res, err)
	}
}
