//go:build integration

package workflows_test

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	sfclient "github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// A namespace writer's "RunCode" answers the status query truthfully about the code, but asks for
// statement version 1 (no statement_version, as a run from before version 2 has, or 1 said
// outright), so that the reviewer would sign an approval naming nobody. The reviewer's tools
// (client.Statement and Approve, which starter statement and approve use, and StatementFor,
// which the inbox uses) refuse to make that approval, since no sandbox host accepts one; a
// denial is still made, as the run asks.
func TestIntegrationStatusDowngradingTheStatementIsNotApproved(t *testing.T) {
	it := newITest(t)
	policy := integrationConfig(nil, nil, "").Policy
	started, _ := markRequest(t)
	checked, err := policy.Check(started, "local")
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]int{"it-downgrade-absent": 0, "it-downgrade-v1": approval.StatementVersion1}
	rogue := func(ctx workflow.Context, _ contract.Input) error {
		info := workflow.GetInfo(ctx)
		st := contract.Status{State: contract.StatusAwaitingApproval, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			SandboxTaskQueue: it.queue, Request: checked.Summary(), DecisionWait: contract.DecisionWait{ApprovalDeadline: workflow.Now(ctx).Add(time.Hour)},
			StatementVersion: versions[info.WorkflowExecution.ID]}
		if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.Status, error) { return st, nil }); err != nil {
			return err
		}
		workflow.GetSignalChannel(ctx, contract.SignalApproval).Receive(ctx, nil)
		return nil
	}
	const rogueQueue = "sandboxflow-it-rogue-downgrade"
	it.ts.NewWorker(rogueQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.WorkflowName})
	})
	sc, err := sfclient.New(sfclient.Options{Temporal: it.c, TaskQueue: rogueQueue, Reviewer: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for id, version := range versions {
		if _, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: rogueQueue}, contract.WorkflowName, contract.Input{Request: started}); err != nil {
			t.Fatal(err)
		}
		it.waitState(id, contract.StatusAwaitingApproval)
		if f, err := sc.Statement(it.ctx(10*time.Second), sfclient.Run(id), sfclient.StatementOptions{}); !errors.Is(err, sfclient.ErrStatementVersion) {
			t.Errorf("%s (version %d): statement to approve: %+v, %v; want %v", id, version, f, err, sfclient.ErrStatementVersion)
		}
		if _, err := sc.Approve(it.ctx(10*time.Second), sfclient.Run(id), checked.Digest, it.alice.Signer, "ok"); !errors.Is(err, sfclient.ErrStatementVersion) {
			t.Errorf("%s (version %d): approve: %v; want %v", id, version, err, sfclient.ErrStatementVersion)
		}
		if f, err := sc.Statement(it.ctx(10*time.Second), sfclient.Run(id), sfclient.StatementOptions{Deny: true}); err != nil || f.Version != approval.StatementVersion1 || f.Approve {
			t.Errorf("%s (version %d): statement to deny: %+v, %v; want a version 1 denial", id, version, f, err)
		}
	}
}
