//go:build integration

package workflows_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
)

// A namespace writer's own "Session" worker is started with MODE=fast (the start input every
// reviewer door checks the status against) but opens its sandbox with MODE=evil. Its status,
// read through the client's reviewer door (CellStatement), first shows the honest settings:
// the reviewer signs cell 1 over the start's settings digest, and the host, whose sandbox has
// the other settings digest, refuses it. Then the status shows the sandbox's settings and
// digest (the env names alike, the values hidden): the door refuses to make a statement.
func TestIntegrationRogueSessionSettingsDigest(t *testing.T) {
	it := newITest(t)
	b := &sessiontest.Backend{}
	hostQueue := it.queue + "-host-settings"
	it.sessionWorkers(b, hostQueue)
	policy := integrationConfig(nil, nil, "").Policy
	shownReq := guard.SessionRequest{Settings: guard.Settings{Env: map[string]string{"MODE": "fast"}}}
	shown, err := policy.CheckSession(shownReq, sessiontest.Name)
	if err != nil {
		t.Fatal(err)
	}
	sandboxed, err := policy.CheckSession(guard.SessionRequest{Settings: guard.Settings{Env: map[string]string{"MODE": "evil"}}}, sessiontest.Name)
	if err != nil {
		t.Fatal(err)
	}
	cell, err := policy.CheckCell(sandboxed, 1, "", "import os; print(os.environ['MODE'])")
	if err != nil {
		t.Fatal(err)
	}
	status := func(s guard.CheckedSession, id, runID string) contract.SessionStatus {
		chain := guard.ChainStart(s.Digest)
		return contract.SessionStatus{State: contract.SessionOpen, WorkflowID: id, RunID: runID, SandboxTaskQueue: hostQueue,
			StatementVersion: approval.StatementVersion, Settings: s.Summary(), Chain: chain,
			Cells: []contract.CellStatus{{Cell: 1, Language: cell.Language, Code: cell.Code, CodeBytes: len(cell.Code), CodeDigest: cell.CodeDigest,
				Chain: chain, Digest: guard.CellDigest(s.Digest, 1, cell.CodeDigest, chain), State: contract.StatusAwaitingApproval,
				DecisionWait: contract.DecisionWait{ApprovalDeadline: time.Now().Add(time.Hour)}}}}
	}
	rogue := func(ctx workflow.Context, _ contract.SessionInput) (string, error) {
		info := workflow.GetInfo(ctx)
		st := status(shown, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
		if err := workflow.SetQueryHandler(ctx, contract.QuerySessionStatus, func() (contract.SessionStatus, error) { return st, nil }); err != nil {
			return "", err
		}
		opts := func(queue string) workflow.Context {
			return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: queue, StartToCloseTimeout: time.Minute,
				RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		}
		var opened contract.SessionOpened
		if err := workflow.ExecuteActivity(opts(it.queue), contract.SessionOpenActivityName, contract.SessionOpenInput{Session: sandboxed}).Get(ctx, &opened); err != nil {
			return "", err
		}
		var d contract.Decision
		workflow.GetSignalChannel(ctx, contract.SignalApproval).Receive(ctx, &d)
		err := workflow.ExecuteActivity(opts(opened.HostTaskQueue), contract.SessionCellActivityName,
			contract.CellRunInput{Cell: cell, Chain: guard.ChainStart(sandboxed.Digest), Decision: d}).Get(ctx, nil)
		st = status(sandboxed, info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
		workflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
		if err == nil {
			return "ran", nil
		}
		return guard.TypeOf(contract.FromFailure(err)), nil
	}
	const rogueQueue = "sandboxflow-it-rogue-settings"
	it.ts.NewWorker(rogueQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.SessionWorkflowName})
	})
	id := "it-rogue-settings-" + uuid.NewString()[:8]
	run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), tclient.StartWorkflowOptions{ID: id, TaskQueue: rogueQueue},
		contract.SessionWorkflowName, contract.SessionInput{Request: shownReq})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Options{Temporal: it.c, TaskQueue: it.queue, Reviewer: it.alice.Principal})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(b.Sandboxes()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	f, err := c.Statement(it.ctx(10*time.Second), client.Cell(id, 1), client.StatementOptions{})
	if err != nil {
		t.Fatalf("the door refused the honest-looking status: %v", err)
	}
	if f.Digest != guard.CellDigest(shown.Digest, 1, cell.CodeDigest, guard.ChainStart(shown.Digest)) {
		t.Fatalf("the statement signs %s; want cell 1 over the start's settings digest", f.Digest)
	}
	it.signal(id, it.alice.Decision(t, f))
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, err = c.Statement(it.ctx(10*time.Second), client.Cell(id, 1), client.StatementOptions{})
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var mm *client.CellMismatchError
	if !errors.As(err, &mm) || mm.Field != "settings" {
		t.Fatalf("the door, shown the sandbox's settings digest: %v; want a CellMismatchError for the settings", err)
	}
	_ = it.c.SignalWorkflow(it.ctx(10*time.Second), id, "", "finish", nil)
	var outcome string
	if err := run.Get(it.ctx(time.Minute), &outcome); err != nil {
		t.Fatal(err)
	}
	if outcome != guard.TypeApprovalRefused || b.Cells() != 0 {
		t.Fatalf("the cell signed over the start's settings, in the other sandbox: %q, %d cells ran; want ApprovalRefused, none", outcome, b.Cells())
	}
}
