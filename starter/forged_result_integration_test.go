//go:build integration

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
)

// TestIntegrationApproveWaitRefusesAForgedResult: a namespace writer's own "RunCode" worker
// shows an honest status for its run, and answers the reviewer's approve --wait with a result of
// its own making: another run's genuine result and receipt with one byte of stdout changed, then
// the same receipt unchanged (a genuine receipt of another run). starter approve --wait, with
// the operators' hosts file, prints the refusal and no result.
func TestIntegrationApproveWaitRefusesAForgedResult(t *testing.T) {
	e := agenttest.Setup(t, agenttest.Options{Policy: &guard.Policy{ApprovalTimeout: time.Hour}, TaskQueue: "forged-result"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A genuine result, with its receipt, from the honest worker.
	started, err := e.Client.Start(ctx, guard.Request{Code: "print('all 41 tests passed')"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Decide(t, e, started.WorkflowID, true)
	genuine, err := e.Client.Result(ctx, started.WorkflowID)
	if err != nil || genuine.Receipt == nil {
		t.Fatalf("the genuine run: %+v, %v", genuine, err)
	}
	altered := genuine
	altered.Stdout = []byte("all 42 tests passed\n")

	req := guard.Request{Code: "print(1)"}
	checked, err := guard.Policy{}.Check(req, "docker")
	if err != nil {
		t.Fatal(err)
	}
	forgeries := map[string]guard.Result{"rogue-altered": altered, "rogue-other-run": genuine}
	rogue := func(ctx workflow.Context, in contract.Input) error {
		info := workflow.GetInfo(ctx)
		st := contract.Status{State: contract.StatusAwaitingApproval, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			SandboxTaskQueue: "rogue-host", StatementVersion: approval.StatementVersion, Request: checked.Summary(), DecisionWait: contract.DecisionWait{ApprovalDeadline: time.Now().Add(time.Hour)}}
		if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.Status, error) { return st, nil }); err != nil {
			return err
		}
		forged := forgeries[info.WorkflowExecution.ID]
		done := false
		if err := workflow.SetUpdateHandler(ctx, contract.UpdateDecide, func(ctx workflow.Context, d contract.Decision) (contract.DecideResult, error) {
			done = true
			return contract.DecideResult{ApprovalID: d.ApprovalID, Approve: true, Reviewer: d.Reviewer, Digest: d.Digest,
				State: contract.StatusRunning, Ended: true, Result: &forged}, nil
		}); err != nil {
			return err
		}
		return workflow.Await(ctx, func() bool { return done })
	}
	w := worker.New(e.Temporal, "rogue-queue", worker.Options{})
	w.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.WorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	t.Setenv("SANDBOXFLOW_HOSTS", e.Host.File) // the operators' hosts file, for every command
	for id := range forgeries {
		t.Run(id, func(t *testing.T) {
			if _, err := e.Temporal.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: id, TaskQueue: "rogue-queue"}, contract.WorkflowName, contract.Input{Request: req}); err != nil {
				t.Fatal(err)
			}
			var r cliResult
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				r = binary(t, e, "", "approve", id, "--digest", checked.Digest, "--wait")
				if !strings.Contains(r.stdout+r.stderr, "query") { // the first workflow task has run
					break
				}
			}
			if r.code == 0 || strings.Contains(r.stdout, "all 4") {
				t.Fatalf("approve --wait of a forged result: exit %d, %s %s; want a refusal and no result", r.code, r.stdout, r.stderr)
			}
			last := r.stdout[strings.LastIndex(strings.TrimSpace(r.stdout), "\n")+1:]
			var out struct {
				Error struct{ Type string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(last), &out); err != nil || out.Error.Type != guard.TypeReceiptRefused {
				t.Errorf("approve --wait printed %q; want a ReceiptRefused error last", r.stdout)
			}
		})
	}
}
