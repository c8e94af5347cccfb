//go:build integration

package client_test

import (
	"context"
	"errors"
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

// impostorRequest is what every impostor session is started with.
var impostorRequest = guard.SessionRequest{Languages: []string{guard.Python}, Settings: guard.Settings{Env: map[string]string{"MODE": "fast"}}, MaxCells: 5}

// impostorStatus is the status of a session whose cell 1 ran and printed shown, chained as if it
// had printed chained, and whose cell 2 waits; alter changes it further.
func impostorStatus(s guard.CheckedSession, id, runID, shown, chained string, alter func(*contract.SessionStatus)) contract.SessionStatus {
	st := contract.SessionStatus{State: contract.SessionOpen, WorkflowID: id, RunID: runID, SandboxTaskQueue: "host-1",
		StatementVersion: approval.StatementVersion, Settings: s.Summary()}
	chain := guard.ChainStart(s.Digest)
	c1 := contract.CellStatus{Cell: 1, Language: guard.Python, Code: "print('ok')\n", State: contract.StatusSucceeded, Chain: chain,
		Result: &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte(shown)}}
	c1.CodeBytes, c1.CodeDigest = len(c1.Code), guard.CellCodeDigest(c1.Language, c1.Code)
	c1.Digest = guard.CellDigest(s.Digest, 1, c1.CodeDigest, chain)
	c1.ResultDigest = guard.ResultDigest(*c1.Result)
	chain = guard.ChainNext(chain, c1.Digest, guard.ResultDigest(guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte(chained)}))
	c2 := contract.CellStatus{Cell: 2, Language: guard.Python, Code: "print(secret)\n", State: contract.StatusAwaitingApproval, Chain: chain,
		DecisionWait: contract.DecisionWait{ApprovalDeadline: time.Now().Add(time.Hour)}}
	c2.CodeBytes, c2.CodeDigest = len(c2.Code), guard.CellCodeDigest(c2.Language, c2.Code)
	c2.Digest = guard.CellDigest(s.Digest, 2, c2.CodeDigest, chain)
	st.Cells, st.Chain = []contract.CellStatus{c1, c2}, chain
	if alter != nil {
		alter(&st)
	}
	return st
}

// TestIntegrationLyingSessionWorkflow: a namespace writer runs its own workflow under the type
// name Session, whose status query shows the reviewer one history while the digest it asks to
// have signed binds another. The client's reviewer door refuses before anything is signed or
// sent, against a real server: cell 1 shown printing "ok" but chained as printing the secret;
// settings shown other than the session was started with; the status of another session. The same
// workflow with an honest status gets the decision, so the count of decisions it received
// shows what was sent.
func TestIntegrationLyingSessionWorkflow(t *testing.T) {
	ts := devtest.Start(t)
	tc := ts.GetDefaultClient()
	bob := reviewertest.New(t, "bob")
	settings, err := guard.Policy{}.CheckSession(impostorRequest, "docker")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		alters  = map[string]func(*contract.SessionStatus){}
		chained = map[string]string{}
	)
	impostor := func(ctx workflow.Context, in contract.SessionInput) error {
		info := workflow.GetInfo(ctx)
		id, runID := info.WorkflowExecution.ID, info.WorkflowExecution.RunID
		mu.Lock()
		alter, chain := alters[id], chained[id]
		mu.Unlock()
		decided := 0
		if err := workflow.SetQueryHandler(ctx, contract.QuerySessionStatus, func() (contract.SessionStatus, error) {
			return impostorStatus(settings, id, runID, "ok\n", chain, alter), nil
		}); err != nil {
			return err
		}
		if err := workflow.SetQueryHandler(ctx, "decided", func() (int, error) { return decided, nil }); err != nil {
			return err
		}
		if err := workflow.SetUpdateHandler(ctx, contract.UpdateDecideCell, func(ctx workflow.Context, d contract.CellDecision) (contract.DecideResult, error) {
			decided++
			return contract.DecideResult{ApprovalID: d.Decision.ApprovalID, Approve: d.Decision.Approve, Digest: d.Decision.Digest, State: contract.StatusRunning}, nil
		}); err != nil {
			return err
		}
		return workflow.Await(ctx, func() bool { return false })
	}
	w := worker.New(tc, "impostor", worker.Options{})
	w.RegisterWorkflowWithOptions(impostor, workflow.RegisterOptions{Name: contract.SessionWorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var c *client.Client
	c, err = client.New(client.Options{Temporal: tc, TaskQueue: "impostor", Reviewer: bob.Principal})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A run started as another type is never read as a session's start.
	if _, err := tc.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: "a-run", TaskQueue: "nobody"}, contract.WorkflowName, contract.Input{Request: guard.Request{Code: "print(1)"}}); err != nil {
		t.Fatal(err)
	}
	if in, err := c.SessionStartInput(ctx, "a-run", ""); err == nil {
		t.Errorf("SessionStartInput of a RunCode run = %+v; want a refusal", in)
	}

	for _, tt := range []struct {
		name    string
		chained string
		alter   func(*contract.SessionStatus)
		refused bool
		check   func(error) bool
	}{
		{"honest", "ok\n", nil, false, nil},
		{"cell 1 shown printing ok, chained printing the secret", "the secret is 1234\n", nil, true, func(err error) bool {
			var mm *client.CellMismatchError
			return errors.As(err, &mm) && mm.Cell == 2 && mm.Field == "chain"
		}},
		// The status shows a longer timeout than the settings digest binds.
		{"settings shown other than started with", "ok\n", func(st *contract.SessionStatus) { st.Settings.Limits.Timeout = time.Hour }, true, func(err error) bool {
			var mm *client.CellMismatchError
			return errors.As(err, &mm) && mm.Field == "settings"
		}},
		{"the status of another session", "ok\n", func(st *contract.SessionStatus) { st.WorkflowID = "session-other" }, true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := "session-impostor-" + time.Now().Format("150405.000000000")
			mu.Lock()
			alters[id], chained[id] = tt.alter, tt.chained
			mu.Unlock()
			if _, err := tc.ExecuteWorkflow(ctx, tclientOptions(id), contract.SessionWorkflowName, contract.SessionInput{Request: impostorRequest}); err != nil {
				t.Fatal(err)
			}
			res, err := c.Approve(ctx, client.Cell(id, 2), "", bob.Signer, "")
			if tt.refused != (err != nil) || tt.check != nil && !tt.check(err) {
				t.Errorf("ApproveCell = %+v, %v; want refused %t", res, err, tt.refused)
			}
			v, err := tc.QueryWorkflow(ctx, id, "", "decided")
			var decided int
			if err != nil || v.Get(&decided) != nil {
				t.Fatalf("query decided: %v", err)
			}
			if want := map[bool]int{true: 0, false: 1}[tt.refused]; decided != want {
				t.Errorf("the workflow received %d decision(s); want %d", decided, want)
			}
		})
	}
}

func tclientOptions(id string) tclient.StartWorkflowOptions {
	return tclient.StartWorkflowOptions{ID: id, TaskQueue: "impostor"}
}
