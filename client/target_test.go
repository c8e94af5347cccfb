package client

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

func TestTarget(t *testing.T) {
	for _, tt := range []struct {
		t      Target
		cell   int
		isCell bool
		name   string
	}{
		{Run("sandbox-1"), 0, false, "sandbox-1"},
		{Cell("session-1", 2), 2, true, "cell 2 of session-1"},
		{Cell("session-1", 0), CellWaiting, true, "the waiting cell of session-1"},
		{Session("session-1"), CellWaiting, true, "the waiting cell of session-1"},
		{Target{ID: "sandbox-1"}, 0, false, "sandbox-1"},
	} {
		if tt.t.Cell != tt.cell || tt.t.IsCell() != tt.isCell || tt.t.String() != tt.name {
			t.Errorf("%+v: cell %d, IsCell %t, String %q; want %d, %t, %q", tt.t, tt.t.Cell, tt.t.IsCell(), tt.t, tt.cell, tt.isCell, tt.name)
		}
	}
	// A run's Decided encodes as the workflow's answer alone; a cell's names the cell.
	answer := contract.DecideResult{ApprovalID: "a", Approve: true, Digest: "d", State: contract.StatusRunning}
	want, _ := json.Marshal(answer)
	if got, _ := json.Marshal(Decided{DecideResult: answer}); string(got) != string(want) {
		t.Errorf("a run's Decided encodes as %s; want the answer's %s", got, want)
	}
	if got, _ := json.Marshal(Decided{Cell: 3, DecideResult: answer}); !strings.HasPrefix(string(got), `{"cell":3,`) {
		t.Errorf("a cell's Decided encodes as %s; want it to name cell 3", got)
	}
	// A TargetReview encodes as the review it holds.
	run := &Review{WorkflowID: "sandbox-1", Warning: "w"}
	session := &SessionReview{SessionID: "session-1", Waiting: 2}
	for _, r := range []struct {
		tr   TargetReview
		want any
	}{{TargetReview{Run: run}, run}, {TargetReview{Session: session}, session}} {
		got, _ := json.Marshal(r.tr)
		want, _ := json.Marshal(r.want)
		if string(got) != string(want) {
			t.Errorf("TargetReview encodes as %s; want %s", got, want)
		}
	}
}

// doorFake is a Temporal client whose one workflow is of type typ: it describes it with runID,
// answers its status query (the run's status, or the session's), keeps no history, and records
// every update it is sent, which it then fails. Any other call panics (the embedded interface is
// nil), which fails the test.
type doorFake struct {
	tclient.Client
	typ, runID string
	run        contract.Status
	session    contract.SessionStatus
	updates    []tclient.UpdateWorkflowOptions
}

// errUpdateSeen is the fake's answer to every update.
var errUpdateSeen = errors.New("the fake records updates and answers none")

func (f *doorFake) DescribeWorkflowExecution(ctx context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflow.WorkflowExecutionInfo{
		Type: &commonpb.WorkflowType{Name: f.typ}, Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: f.runID},
	}}, nil
}

func (f *doorFake) QueryWorkflow(ctx context.Context, id, runID, name string, args ...any) (converter.EncodedValue, error) {
	var answer any
	switch {
	case name == contract.QueryStatus && f.typ == contract.WorkflowName:
		answer = f.run
	case name == contract.QuerySessionStatus && f.typ == contract.SessionWorkflowName:
		answer = f.session
	default:
		return nil, serviceerror.NewQueryFailed("unknown query " + name)
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(answer)
	if err != nil {
		return nil, err
	}
	return encodedValue{p: p}, nil
}

func (f *doorFake) WorkflowService() workflowservice.WorkflowServiceClient { return fakeService{} }

func (f *doorFake) UpdateWorkflow(ctx context.Context, opts tclient.UpdateWorkflowOptions) (tclient.WorkflowUpdateHandle, error) {
	f.updates = append(f.updates, opts)
	return nil, errUpdateSeen
}

// newDoorFakes returns a RunCode run "sandbox-1" (run "run-1") and a Session "session-a" (run
// "run-a", newSessionCase's: cell 3 waits), each waiting for a decision.
func newDoorFakes(t *testing.T) (run, session *doorFake) {
	t.Helper()
	run = &doorFake{typ: contract.WorkflowName, runID: "run-1", run: contract.Status{
		WorkflowID: "sandbox-1", RunID: "run-1", State: contract.StatusAwaitingApproval, SandboxTaskQueue: "hosts",
		DecisionWait: contract.DecisionWait{ApprovalDeadline: time.Now().Add(time.Hour)}, StatementVersion: approval.StatementVersion,
		Request: guard.Summary{Digest: "sha256:" + strings.Repeat("ab", 32)},
	}}
	st := newSessionCase(t, "prod").st
	st.Cells[2].ApprovalDeadline = time.Now().Add(time.Hour)
	session = &doorFake{typ: contract.SessionWorkflowName, runID: st.RunID, session: st}
	return run, session
}

// TestOneDoorGoesToTheTargetsPath: each action on a run goes the run's way and on a cell the
// cell's: sent to the other kind of workflow, a run's action is refused as not a RunCode run and
// a cell's as not a session, and what reaches Temporal is the update the target's kind takes.
func TestOneDoorGoesToTheTargetsPath(t *testing.T) {
	bob := reviewertest.New(t, "bob").Signer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	actions := map[string]func(c *Client, tg Target) error{
		"review":    func(c *Client, tg Target) error { _, err := c.Review(ctx, tg, ReviewOptions{}); return err },
		"statement": func(c *Client, tg Target) error { _, err := c.Statement(ctx, tg, StatementOptions{}); return err },
		"approve":   func(c *Client, tg Target) error { _, err := c.Approve(ctx, tg, "sha256:00", bob, ""); return err },
		"deny":      func(c *Client, tg Target) error { _, err := c.Deny(ctx, tg, bob, "no"); return err },
		"approve and wait": func(c *Client, tg Target) error {
			_, w, err := c.ApproveAndWait(ctx, tg, "sha256:00", bob, "")
			if w != nil {
				w.Stop()
			}
			return err
		},
		"cancel": func(c *Client, tg Target) error { _, err := c.Cancel(ctx, tg, "stop"); return err },
		"wait":   func(c *Client, tg Target) error { _, err := c.WaitResult(ctx, tg, time.Second); return err },
	}
	for name, act := range actions {
		run, session := newDoorFakes(t)
		var nr *NotRunCodeError
		if err := act(newDoorClient(t, session), Run("session-a")); !errors.As(err, &nr) {
			t.Errorf("%s of a run target naming a session = %v; want a *NotRunCodeError (the run's path)", name, err)
		}
		err := act(newDoorClient(t, run), Cell("sandbox-1", 1))
		var ns *NotSessionError
		var tu *guard.ToolUsageError
		switch name {
		case "cancel":
			if !errors.As(err, &tu) || !strings.Contains(err.Error(), "not a session") {
				t.Errorf("cancel of a cell target naming a run = %v; want it refused as not a session", err)
			}
		case "wait":
			// A cell's wait asks the session for the cell, and only the session answers it.
			if len(run.updates) != 1 || run.updates[0].UpdateName != contract.UpdateAwaitCell {
				t.Errorf("wait for a cell target sent %+v; want one %s update", run.updates, contract.UpdateAwaitCell)
			}
		default:
			if !errors.As(err, &ns) {
				t.Errorf("%s of a cell target naming a run = %v; want a *NotSessionError (the cell's path)", name, err)
			}
		}
	}
}

func newDoorClient(t *testing.T, f *doorFake) *Client {
	t.Helper()
	c, err := New(Options{Temporal: f, Namespace: "ns", Reviewer: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOneDoorSendsTheTargetsUpdate: a denial, a cancel and a wait reach Temporal as the update
// their target's kind takes, with its arguments: a run's decide goes to its current run, a
// cell's decide-cell is pinned to the session's run it read and names the cell (the waiting
// one, found, for the session's target).
func TestOneDoorSendsTheTargetsUpdate(t *testing.T) {
	bob := reviewertest.New(t, "bob").Signer
	ctx := context.Background()
	run, session := newDoorFakes(t)
	rc, sc := newDoorClient(t, run), newDoorClient(t, session)

	if _, err := rc.Deny(ctx, Run("sandbox-1"), bob, "no"); !errors.Is(err, errUpdateSeen) {
		t.Fatalf("Deny of the run = %v; want its update sent", err)
	}
	u := run.updates[0]
	if d, ok := u.Args[0].(contract.Decision); u.UpdateName != contract.UpdateDecide || u.RunID != "" || !ok || d.Approve || d.Reviewer != "bob" {
		t.Errorf("the run's denial sent %s to run %q with %+v; want %s to the current run, a denial by bob", u.UpdateName, u.RunID, u.Args[0], contract.UpdateDecide)
	}
	for _, tg := range []Target{Cell("session-a", 3), Session("session-a")} {
		session.updates = nil
		out, err := sc.Deny(ctx, tg, bob, "no")
		if !errors.Is(err, errUpdateSeen) || out.Cell != 3 {
			t.Fatalf("Deny of %s = %+v, %v; want cell 3's update sent", tg, out, err)
		}
		u := session.updates[0]
		cd, ok := u.Args[0].(contract.CellDecision)
		if u.UpdateName != contract.UpdateDecideCell || u.RunID != "run-a" || !ok || cd.Cell != 3 || cd.Decision.Approve || cd.Wait {
			t.Errorf("the denial of %s sent %s to run %q with %+v; want %s to run-a for cell 3", tg, u.UpdateName, u.RunID, u.Args[0], contract.UpdateDecideCell)
		}
	}

	run.updates, session.updates = nil, nil
	if _, err := rc.Cancel(ctx, Run("sandbox-1"), "stop"); err == nil {
		t.Fatal("the fake answered a cancel")
	}
	if _, err := sc.Cancel(ctx, Cell("session-a", 3), "stop"); err == nil {
		t.Fatal("the fake answered a cancel")
	}
	if _, ok := run.updates[0].Args[0].(contract.CancelRequest); run.updates[0].UpdateName != contract.UpdateCancel || !ok {
		t.Errorf("the run's cancel sent %s %+v; want %s", run.updates[0].UpdateName, run.updates[0].Args[0], contract.UpdateCancel)
	}
	if cc, ok := session.updates[0].Args[0].(contract.CancelCell); session.updates[0].UpdateName != contract.UpdateCancelCell || !ok || cc.Cell != 3 {
		t.Errorf("the cell's cancel sent %s %+v; want %s of cell 3", session.updates[0].UpdateName, session.updates[0].Args[0], contract.UpdateCancelCell)
	}

	session.updates = nil
	if _, err := sc.WaitResult(ctx, Cell("session-a", 3), 0); !errors.Is(err, errUpdateSeen) {
		t.Fatalf("WaitResult of cell 3 = %v; want its update sent", err)
	}
	if ac, ok := session.updates[0].Args[0].(contract.AwaitCell); session.updates[0].UpdateName != contract.UpdateAwaitCell || !ok || ac.Cell != 3 {
		t.Errorf("the cell's wait sent %s %+v; want %s of cell 3", session.updates[0].UpdateName, session.updates[0].Args[0], contract.UpdateAwaitCell)
	}
	// A cancel or a wait names its cell: the waiting one is not guessed.
	for name, err := range map[string]error{
		"cancel": func() error { _, err := sc.Cancel(ctx, Session("session-a"), "stop"); return err }(),
		"wait":   func() error { _, err := sc.WaitResult(ctx, Session("session-a"), 0); return err }(),
	} {
		var tu *guard.ToolUsageError
		if !errors.As(err, &tu) {
			t.Errorf("%s of the session's waiting cell = %v; want a ToolUsageError asking for the cell", name, err)
		}
	}
}
