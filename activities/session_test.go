package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
)

// sessionHost is one sandbox host with a session open on it, for the test environment's run.
type sessionHost struct {
	t       *testing.T
	a       *Activities
	backend *sessiontest.Backend
	log     *historytest.Log
	sink    *MemorySink
	session guard.CheckedSession
	opened  contract.SessionOpened
	chain   string // the chain the test computes from the results the host returned
	index   int
}

func newSessionHost(t *testing.T) *sessionHost {
	t.Helper()
	h := &sessionHost{t: t, backend: &sessiontest.Backend{}, sink: &MemorySink{},
		log: &historytest.Log{ScheduleCaller: true, CallerType: contract.SessionCellActivityName}}
	a, err := New(Config{Backend: h.backend, Sink: h.sink, ReviewersFile: reviewersFile(t), History: h.log,
		HostTaskQueue: testTaskQueue, Policy: guard.Policy{Languages: []string{guard.Python, guard.Shell}}})
	if err != nil {
		t.Fatal(err)
	}
	h.a = a
	check, err := a.SessionCheck(context.Background(), contract.SessionCheckInput{Request: guard.SessionRequest{Settings: guard.Settings{Env: map[string]string{"A": "1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.session = check.Session
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	a.Register(env)
	v, err := env.ExecuteActivity(contract.SessionOpenActivityName, contract.SessionOpenInput{Session: h.session})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := v.Get(&h.opened); err != nil {
		t.Fatal(err)
	}
	h.chain = guard.ChainStart(h.session.Digest)
	t.Cleanup(func() {
		if hs := a.sessions.get(sessionKey{testWorkflowID, testRunID}); hs != nil {
			a.endSession(hs, "test over")
		}
	})
	return h
}

// cell is cell index of code, as the workflow would send it over chain, with alice's approval of
// its digest signed over f (changed by edit, when not nil).
func (h *sessionHost) cell(index int, code, chain string, edit func(*approval.Fields)) contract.CellRunInput {
	h.t.Helper()
	c, err := h.a.policy.CheckCell(h.session, index, "", code)
	if err != nil {
		h.t.Fatal(err)
	}
	f := reviewertest.Fields(testWorkflowID, testRunID, guard.CellDigest(h.session.Digest, index, c.CodeDigest, chain), testTaskQueue, true)
	if edit != nil {
		edit(&f)
	}
	return contract.CellRunInput{Cell: c, Chain: chain, Decision: testReviewer().Decision(h.t, f)}
}

// run runs SessionCell in a test activity environment of the test run.
func (h *sessionHost) run(in contract.CellRunInput) (guard.Result, error) {
	h.t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	h.a.RegisterHost(env)
	v, err := env.ExecuteActivity(contract.SessionCellActivityName, in)
	if err != nil {
		return guard.Result{}, err
	}
	var res guard.Result
	if err := v.Get(&res); err != nil {
		h.t.Fatal(err)
	}
	return res, nil
}

// next runs the next cell of code, approved, and moves the test's chain on from its result.
func (h *sessionHost) next(code string) guard.Result {
	h.t.Helper()
	h.index++
	res, err := h.run(h.cell(h.index, code, h.chain, nil))
	if err != nil {
		h.t.Fatalf("cell %d: %v", h.index, err)
	}
	h.chain = guard.ChainNext(h.chain, res.Digest, guard.ResultDigest(res))
	return res
}

func wantRefused(t *testing.T, what string, err error, reason guard.RefusedReason) {
	t.Helper()
	var ar *guard.ApprovalRefused
	if !errors.As(contract.FromFailure(err), &ar) || ar.Reason != reason {
		t.Errorf("%s: %v; want an ApprovalRefused (%s)", what, err, reason)
	}
}

func TestSessionCellRunsApprovedCellsInOneSandbox(t *testing.T) {
	h := newSessionHost(t)
	if h.opened.HostTaskQueue != testTaskQueue || h.opened.SandboxID != "sandbox-1" || h.opened.ImageID != "sha256:sessiontest-image" {
		t.Fatalf("opened %+v; want this host's queue and sandbox-1", h.opened)
	}
	h.next("x = 41")
	res := h.next("print(x + 1)")
	want := guard.CellDigest(h.session.Digest, 2, guard.CellCodeDigest(guard.Python, "print(x + 1)"),
		guard.ChainNext(guard.ChainStart(h.session.Digest), guard.CellDigest(h.session.Digest, 1, guard.CellCodeDigest(guard.Python, "x = 41"), guard.ChainStart(h.session.Digest)), guard.ResultDigest(guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("cell 1: x = 41\n")})))
	if res.Digest != want || res.Reviewer != "alice" || res.Backend != sessiontest.Name {
		t.Errorf("cell 2 result digest %s by %s on %s; want %s by alice on %s", res.Digest, res.Reviewer, res.Backend, want, sessiontest.Name)
	}
	if !strings.Contains(string(res.Stdout), "remembers cell 1: x = 41") {
		t.Errorf("cell 2 printed %q; want it to run in cell 1's sandbox", res.Stdout)
	}
	var cells int
	for _, e := range h.sink.Events() {
		if e.Type == contract.EventSandboxFinished && e.Data["cell"] != nil {
			cells++
		}
	}
	if cells != 2 {
		t.Errorf("%d sandbox.finished events with a cell index; want 2", cells)
	}
}

// TestSessionCellRefusals: each forged or replayed cell input is refused by the host before
// anything runs, and the sandbox still takes the genuine next cell.
func TestSessionCellRefusals(t *testing.T) {
	h := newSessionHost(t)
	first := h.cell(1, "x = 1", h.chain, nil)
	res, err := h.run(first)
	if err != nil {
		t.Fatal(err)
	}
	start := h.chain
	h.chain = guard.ChainNext(h.chain, res.Digest, guard.ResultDigest(res))
	h.index = 1
	other := func(f *approval.Fields) { f.ApprovalID = first.Decision.ApprovalID }
	forgedDigest := h.cell(2, "print(x)", h.chain, nil)
	forgedDigest.Cell.CodeDigest = guard.CellCodeDigest(guard.Python, "print('innocent')")
	for _, tc := range []struct {
		name   string
		in     contract.CellRunInput
		reason guard.RefusedReason
	}{
		// The orchestrator hides cell 1's output from the reviewer: the cell is signed over the
		// chain before cell 1.
		{"wrong chain", h.cell(2, "print(x)", start, nil), guard.RefusedMismatch},
		{"reused approval id", h.cell(2, "print(x)", h.chain, other), guard.RefusedAlreadyUsed},
		{"index not above the last", h.cell(1, "print(x)", h.chain, nil), guard.RefusedAlreadyUsed},
		{"the same cell again", first, guard.RefusedAlreadyUsed},
		{"decision for another run", h.cell(2, "print(x)", h.chain, func(f *approval.Fields) { f.RunID = "other-run" }), guard.RefusedNotVerified},
		{"decision for another session", h.cell(2, "print(x)", h.chain, func(f *approval.Fields) { f.WorkflowID = "other-session" }), guard.RefusedNotVerified},
		{"decision for another host", h.cell(2, "print(x)", h.chain, func(f *approval.Fields) { f.SandboxTaskQueue = "other-host" }), guard.RefusedNotVerified},
		{"code digest that is not the code's", forgedDigest, guard.RefusedMismatch},
		{"a denial", h.cell(2, "print(x)", h.chain, func(f *approval.Fields) { f.Approve = false }), guard.RefusedNoApproval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.run(tc.in)
			wantRefused(t, tc.name, err, tc.reason)
		})
	}
	if ran := h.backend.Sandboxes()[0].Ran(); len(ran) != 1 {
		t.Fatalf("the sandbox ran %d cells; want only the first", len(ran))
	}
	var refused int
	for _, e := range h.sink.Events() {
		if e.Type == contract.EventSandboxRefused && e.Data["cell"] != nil {
			refused++
		}
	}
	if refused != 9 {
		t.Errorf("%d sandbox.refused events; want 9", refused)
	}
	h.next("print(x)") // the genuine cell 2 still runs
}

// TestSessionCellScheduledAgainIsRefused: a namespace writer's SessionCell for a cell that ran
// (a copy of its activity, or its decision for the next index) is refused by the host's own
// record of the sandbox; the history is not read for it, so what a writer put there (a claim
// signal of the cell or of its approval, another cell activity left open) neither refuses a
// genuine cell nor lets a copy through.
func TestSessionCellScheduledAgainIsRefused(t *testing.T) {
	claim := func(cell int, approvalID string) contract.SandboxClaim {
		return contract.SandboxClaim{RunID: testRunID, ApprovalID: approvalID, ActivityID: "cell-earlier", Cell: cell, Commitment: "sha256:0a0b"}
	}
	for _, tc := range []struct {
		name   string
		events func(in contract.CellRunInput) historytest.Events
	}{
		{"nothing else in the history", func(contract.CellRunInput) historytest.Events { return nil }},
		{"a writer's claim of the same cell", func(contract.CellRunInput) historytest.Events {
			return historytest.Events{historytest.Claimed(3, claim(1, uuid.NewString()))}
		}},
		{"a writer's claim of the same approval", func(in contract.CellRunInput) historytest.Events {
			return historytest.Events{historytest.Claimed(3, claim(7, in.Decision.ApprovalID))}
		}},
		{"another cell activity left open", func(contract.CellRunInput) historytest.Events {
			return historytest.Events{historytest.ScheduledAs(3, "cell-open", contract.SessionCellActivityName)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSessionHost(t)
			in := h.cell(1, "x = 1", h.chain, nil)
			h.log.Events = tc.events(in)
			res, err := h.run(in)
			if err != nil {
				t.Fatalf("cell 1: %v; want it to run", err)
			}
			_, err = h.run(in)
			wantRefused(t, "a copy of cell 1's activity", err, guard.RefusedAlreadyUsed)
			next := in
			next.Cell, err = h.a.policy.CheckCell(h.session, 2, "", "x = 1")
			if err != nil {
				t.Fatal(err)
			}
			next.Chain = guard.ChainNext(h.chain, res.Digest, guard.ResultDigest(res))
			_, err = h.run(next)
			wantRefused(t, "cell 1's decision for cell 2", err, guard.RefusedAlreadyUsed)
			if n := h.backend.Cells(); n != 1 {
				t.Errorf("%d cells ran; want 1", n)
			}
		})
	}
}

// retryingCell runs SessionOpen and then SessionCell with Temporal retries allowed, as a
// namespace writer or a misconfigured workflow could.
func retryingCell(ctx workflow.Context, s guard.CheckedSession, in contract.CellRunInput) (guard.Result, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, InitialInterval: time.Second},
	})
	var opened contract.SessionOpened
	if err := workflow.ExecuteActivity(ctx, contract.SessionOpenActivityName, contract.SessionOpenInput{Session: s}).Get(ctx, &opened); err != nil {
		return guard.Result{}, err
	}
	var res guard.Result
	err := workflow.ExecuteActivity(ctx, contract.SessionCellActivityName, in).Get(ctx, &res)
	return res, err
}

func TestSessionCellRefusesASecondAttempt(t *testing.T) {
	h := newSessionHost(t)
	h.a.endSession(h.a.sessions.get(sessionKey{testWorkflowID, testRunID}), "reopened by the test workflow")
	h.backend.CellErr = &guard.IntegrationError{Op: "sessiontest: exec", Err: errors.New("connection reset")}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(retryingCell)
	h.a.Register(env)
	h.a.RegisterHost(env)
	in := h.cell(1, "x = 1", guard.ChainStart(h.session.Digest), func(f *approval.Fields) { f.WorkflowID, f.RunID = "default-test-workflow-id", "default-test-run-id" })
	env.ExecuteWorkflow(retryingCell, h.session, in)
	var ie *guard.IntegrationError
	if err := env.GetWorkflowError(); !errors.As(contract.FromFailure(err), &ie) || !ie.CodeMayHaveStarted || !strings.Contains(ie.Op, "attempt 2") {
		t.Fatalf("workflow error %v; want the second attempt refused as an IntegrationError whose cell may have started", err)
	}
	if n := h.backend.Cells(); n != 1 {
		t.Errorf("the sandboxes saw %d cells; want 1 (the first attempt)", n)
	}
}

// TestSessionHoldRemovesTheSandbox: cancelling the hold removes the sandbox and forgets it; a
// sandbox that ends by itself ends its hold with a SandboxLost.
func TestSessionHoldRemovesTheSandbox(t *testing.T) {
	h := newSessionHost(t)
	hs := h.a.sessions.get(sessionKey{testWorkflowID, testRunID})
	ctx, cancel := context.WithCancel(context.Background())
	beats := make(chan struct{}, 100)
	done := make(chan error, 1)
	go func() { done <- h.a.hold(ctx, hs, 10*time.Millisecond, func() { beats <- struct{}{} }) }()
	<-beats
	<-beats
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("hold after cancel: %v; want the cancellation", err)
	}
	if !h.backend.Sandboxes()[0].Closed() || h.a.OpenSessions() != 0 {
		t.Errorf("after the hold's cancellation: closed %v, %d open; want closed, none", h.backend.Sandboxes()[0].Closed(), h.a.OpenSessions())
	}
	if _, err := h.run(h.cell(1, "x = 1", h.chain, nil)); err == nil || guard.TypeOf(contract.FromFailure(err)) != guard.TypeSandboxLost {
		t.Errorf("a cell after the session ended: %v; want a SandboxLost", err)
	}
	var opened, ended int
	for _, e := range h.sink.Events() {
		switch e.Type {
		case contract.EventSessionOpened:
			opened++
		case contract.EventSessionEnded:
			if _, ok := e.Data["lifetime_ms"].(int64); !ok || e.Data["reason"] != "closed" {
				t.Errorf("session.ended data %v; want lifetime_ms (int64) and reason closed", e.Data)
			}
			ended++
		}
	}
	if opened != 1 || ended != 1 {
		t.Errorf("%d session.opened and %d session.ended events; want 1 and 1", opened, ended)
	}

	h2 := newSessionHost(t)
	hs2 := h2.a.sessions.get(sessionKey{testWorkflowID, testRunID})
	go func() { done <- h2.a.hold(context.Background(), hs2, 10*time.Millisecond, func() {}) }()
	h2.backend.Sandboxes()[0].Lose()
	var lost *guard.SandboxLost
	if err := <-done; !errors.As(contract.FromFailure(err), &lost) {
		t.Errorf("hold of a sandbox that died: %v; want a SandboxLost", err)
	}
}

// TestSessionsNotOfferedByARunBackend: a backend that keeps no sandbox between runs refuses
// sessions at the check and at the open, with a ConfigError that says so.
func TestSessionsNotOfferedByARunBackend(t *testing.T) {
	a, err := New(Config{Backend: &echoBackend{}, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), HostTaskQueue: testTaskQueue})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.SessionCheck(context.Background(), contract.SessionCheckInput{})
	var ce *guard.ConfigError
	if !errors.As(contract.FromFailure(err), &ce) || !strings.Contains(ce.Msg, "sessions are not offered by the echo backend") {
		t.Errorf("check: %v; want a ConfigError saying echo offers no sessions", err)
	}
	s, err := guard.Policy{}.CheckSession(guard.SessionRequest{}, "echo")
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	a.Register(env)
	_, err = env.ExecuteActivity(contract.SessionOpenActivityName, contract.SessionOpenInput{Session: s})
	if !errors.As(contract.FromFailure(err), &ce) || !strings.Contains(ce.Msg, "sessions are not offered") {
		t.Errorf("open: %v; want a ConfigError saying echo offers no sessions", err)
	}
}

// TestSessionHostRemovesSandboxesByItself: a sandbox whose hold never starts (its workflow is
// gone) and one that outlives its session's lifetime (plus the longest cell) are removed by the
// host, whatever the workflow does.
func TestSessionHostRemovesSandboxesByItself(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(a *Activities)
		hold bool
		why  string
	}{
		{"never held", func(a *Activities) { a.holdStart = 50 * time.Millisecond }, false, "never held"},
		{"past its lifetime", func(a *Activities) { a.lifetimeExtra = -time.Hour + 100*time.Millisecond }, true, "lifetime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &sessiontest.Backend{}
			sink := &MemorySink{}
			a, err := New(Config{Backend: b, Sink: sink, ReviewersFile: reviewersFile(t), HostTaskQueue: testTaskQueue})
			if err != nil {
				t.Fatal(err)
			}
			tc.set(a)
			s, err := a.policy.CheckSession(guard.SessionRequest{}, sessiontest.Name) // lifetime 1 h
			if err != nil {
				t.Fatal(err)
			}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			a.Register(env)
			if _, err := env.ExecuteActivity(contract.SessionOpenActivityName, contract.SessionOpenInput{Session: s}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			if tc.hold {
				hs := a.sessions.get(sessionKey{testWorkflowID, testRunID})
				hs.holdMu.Lock()
				hs.holding = true
				hs.holdMu.Unlock()
				go func() { done <- a.hold(context.Background(), hs, 10*time.Millisecond, func() {}) }()
			}
			deadline := time.Now().Add(5 * time.Second)
			for a.OpenSessions() != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if a.OpenSessions() != 0 || !b.Sandboxes()[0].Closed() {
				t.Fatalf("the sandbox is still kept (%d open, closed %v)", a.OpenSessions(), b.Sandboxes()[0].Closed())
			}
			if tc.hold {
				var lost *guard.SandboxLost
				if err := <-done; !errors.As(contract.FromFailure(err), &lost) {
					t.Errorf("the hold ended with %v; want a SandboxLost", err)
				}
			}
			var why any
			for _, e := range sink.Events() {
				if e.Type == contract.EventSessionEnded {
					why = e.Data["reason"]
				}
			}
			if why != tc.why {
				t.Errorf("session.ended reason %v; want %q", why, tc.why)
			}
		})
	}
}

// A cell's claim is signalled into the session's history before the cell starts, and the host
// does not read the history back (its own record of the sandbox decides): one claim signal per
// cell, naming the cell and its approval, and no history read.
func TestSessionCellClaimsWithoutReadingTheHistory(t *testing.T) {
	h := newSessionHost(t)
	h.next("x = 1")
	in := h.cell(2, "print(x)", h.chain, nil)
	if _, err := h.run(in); err != nil {
		t.Fatal(err)
	}
	if n := h.log.Reads(); n != 0 {
		t.Errorf("%d history reads for two cells; want none", n)
	}
	signals := h.log.Signals(testWorkflowID, testRunID)
	if len(signals) != 2 {
		t.Fatalf("%d signals; want one claim per cell", len(signals))
	}
	var claim contract.SandboxClaim
	s := signals[1].GetWorkflowExecutionSignaledEventAttributes()
	if err := converter.GetDefaultDataConverter().FromPayloads(s.GetInput(), &claim); err != nil || s.GetSignalName() != contract.SignalSandboxClaim {
		t.Fatalf("signal %s: %v", s.GetSignalName(), err)
	}
	if claim.Cell != 2 || claim.ApprovalID != in.Decision.ApprovalID || claim.Commitment == "" || claim.Secret != "" {
		t.Errorf("cell 2's claim = %+v; want cell 2, its approval id and a commitment, unreleased", claim)
	}
}

// A claim that cannot be signalled runs nothing (the cell ends as failed before the start), and
// it uses the cell's index and approval: a copy of the activity is refused though the history
// was never read, since the claim may stand unreleased.
func TestSessionCellClaimNotMadeRunsNothing(t *testing.T) {
	h := newSessionHost(t)
	h.log.SignalErr = errors.New("unavailable")
	in := h.cell(1, "print(1)", h.chain, nil)
	_, err := h.run(in)
	var ie *guard.IntegrationError
	if !errors.As(contract.FromFailure(err), &ie) || ie.CodeMayHaveStarted || h.backend.Cells() != 0 {
		t.Fatalf("cell 1 with its claim unsent: %v, %d cells ran; want an IntegrationError from before the start and none", err, h.backend.Cells())
	}
	h.log.SignalErr = nil
	_, err = h.run(in)
	wantRefused(t, "the same cell again", err, guard.RefusedAlreadyUsed)
	if h.backend.Cells() != 0 {
		t.Errorf("%d cells ran; want none", h.backend.Cells())
	}
}
