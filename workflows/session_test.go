package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
	"github.com/sandboxflow/sandboxflow/metrics"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// testHostQueue is the sandbox host's own task queue in the session tests.
const testHostQueue = "sandboxflow-host-test"

var sessionPolicy = guard.Policy{ApprovalTimeout: approvalTimeout, Languages: []string{guard.Python, guard.Shell}}

// sessionHarness runs Session in a test environment with the real activities around a
// sessiontest backend.
type sessionHarness struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	backend *sessiontest.Backend
	policy  guard.Policy
	sink    *activities.MemorySink
	metrics *metrics.Metrics

	mu        sync.Mutex
	n         int
	statuses  []string
	started   []string // activity types, in order
	cancelled []string // activity types cancelled, in order
	holdSet   bool
	checks    []func() // run after the workflow ended, when every update's outcome is known
	// conversations lists each upsert of SandboxConversation as "value, with status S".
	conversations []string
}

func newSessionHarness(t *testing.T, policy guard.Policy) *sessionHarness {
	t.Helper()
	return newSessionHarnessWith(t, policy, nil)
}

// newSessionHarnessWith is newSessionHarness with the activities' configuration changed by mod.
func newSessionHarnessWith(t *testing.T, policy guard.Policy, mod func(*activities.Config)) *sessionHarness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	h := &sessionHarness{t: t, backend: &sessiontest.Backend{}, policy: policy, sink: &activities.MemorySink{}, metrics: metrics.New()}
	suite.SetLogger(&captureLogger{})
	h.env = suite.NewTestWorkflowEnvironment()
	h.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{h.metrics.WorkerInterceptor()}})
	cfg := activities.Config{
		Policy:           policy,
		Backend:          h.backend,
		Sink:             h.sink,
		History:          &historytest.Log{ScheduleCaller: true, CallerType: contract.SessionCellActivityName},
		ReviewersFile:    reviewertest.WriteAllowedSigners(t, t.TempDir(), testReviewer()),
		HostTaskQueue:    testHostQueue,
		HeartbeatTimeout: 2 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	acts, err := activities.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	Register(h.env)
	acts.Register(h.env)
	acts.RegisterHost(h.env)
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		v, ok := sa.GetKeyword(contract.StatusKey)
		if ok {
			h.mu.Lock()
			h.statuses = append(h.statuses, v)
			h.mu.Unlock()
		}
		if conv, ok := sa.GetKeyword(contract.ConversationKey); ok {
			h.mu.Lock()
			h.conversations = append(h.conversations, conv+", with status "+v)
			h.mu.Unlock()
		}
	}).Return(nil)
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.started = append(h.started, info.ActivityType.Name)
	})
	h.env.SetOnActivityCanceledListener(func(info *activity.Info) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.cancelled = append(h.cancelled, info.ActivityType.Name)
	})
	// The test environment moves its clock only while no activity runs, and resolves a
	// cancelled activity at once without cancelling it; so the hold is a mock that lasts on the
	// workflow's clock (the real hold is tested in activities/).
	return h
}

// holdFor makes SessionHold end after d on the workflow's clock with err.
func (h *sessionHarness) holdFor(d time.Duration, err error) {
	h.holdSet = true
	h.env.OnActivity(contract.SessionHoldActivityName, mock.Anything, mock.Anything).After(d).Return(err)
}

// holdCancelled reports whether SessionHold was cancelled.
func (h *sessionHarness) holdCancelled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.cancelled {
		if c == contract.SessionHoldActivityName {
			return true
		}
	}
	return false
}

func (h *sessionHarness) at(d time.Duration, fn func()) { h.env.RegisterDelayedCallback(fn, d) }

// settings is the checked session the test policy gives req.
func (h *sessionHarness) settings(req guard.SessionRequest) guard.CheckedSession {
	h.t.Helper()
	s, err := h.policy.CheckSession(req, sessiontest.Name)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// outcome is what became of an update.
type outcome struct {
	mu       sync.Mutex
	accepted bool
	rejected error
	done     bool
	value    any
	err      error
}

func (o *outcome) get() (accepted bool, rejected error, done bool, value any, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.accepted, o.rejected, o.done, o.value, o.err
}

// update sends an update; its result is decoded into a value of out's type.
func (h *sessionHarness) update(name string, arg any, decode func(converter.EncodedValue) (any, error)) *outcome {
	h.mu.Lock()
	h.n++
	id := fmt.Sprintf("update-%d", h.n)
	h.mu.Unlock()
	o := &outcome{}
	h.env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
		OnAccept: func() { o.mu.Lock(); o.accepted = true; o.mu.Unlock() },
		OnReject: func(err error) { o.mu.Lock(); o.rejected = err; o.done = true; o.mu.Unlock() },
		OnComplete: func(v any, err error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.done, o.value, o.err = true, v, err
		},
	}, arg)
	return o
}

func (h *sessionHarness) submit(code string) *outcome {
	return h.update(contract.UpdateSubmitCell, contract.CellRequest{Code: code}, nil)
}

func (h *sessionHarness) decide(cell int, d contract.Decision) *outcome {
	return h.update(contract.UpdateDecideCell, contract.CellDecision{Cell: cell, Decision: d}, nil)
}

func (h *sessionHarness) closeSession() *outcome {
	return h.update(contract.UpdateCloseSession, contract.CloseSession{Reason: "done"}, nil)
}

func (h *sessionHarness) status() contract.SessionStatus {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(contract.QuerySessionStatus)
	if err != nil {
		h.t.Fatalf("query session status: %v", err)
	}
	var st contract.SessionStatus
	if err := v.Get(&st); err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *sessionHarness) run(req guard.SessionRequest) {
	h.t.Helper()
	if !h.holdSet {
		h.holdFor(1000*time.Hour, nil)
	}
	h.env.ExecuteWorkflow(contract.SessionWorkflowName, contract.SessionInput{Request: req})
	if !h.env.IsWorkflowCompleted() {
		h.t.Fatal("session did not complete")
	}
	for _, check := range h.checks {
		check()
	}
}

func (h *sessionHarness) result() (contract.SessionResult, error) {
	var res contract.SessionResult
	err := h.env.GetWorkflowError()
	if err == nil {
		err = h.env.GetWorkflowResult(&res)
	}
	return res, err
}

func (h *sessionHarness) startedCount(typ string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.started {
		if s == typ {
			n++
		}
	}
	return n
}

// cellDecision is alice's decision for a cell digest, signed for the given session run and host.
func cellDecision(workflowID, runID, digest, queue string, approve bool) contract.Decision {
	f := reviewertest.Fields(workflowID, runID, digest, queue, approve)
	f.Reviewer = "alice"
	f.Expires = time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	d, err := testReviewer().Sign(f)
	if err != nil {
		panic(err)
	}
	return d
}

// approve is alice's approval of digest for the test session.
func approve(digest string) contract.Decision {
	return cellDecision(testWorkflowID, testRunID, digest, testHostQueue, true)
}

// expectAccepted checks, once the workflow ended, that the update was accepted and completed
// without error.
func (h *sessionHarness) expectAccepted(what string, o *outcome) {
	h.checks = append(h.checks, func() {
		accepted, rejected, done, _, err := o.get()
		if !accepted || rejected != nil || !done || err != nil {
			h.t.Errorf("%s: accepted %v, rejected %v, done %v, err %v; want accepted and done", what, accepted, rejected, done, err)
		}
	})
}

// expectRejected checks, once the workflow ended, that the update was refused with a
// DecisionRejected of reason.
func (h *sessionHarness) expectRejected(what string, o *outcome, reason contract.RejectReason) {
	h.checks = append(h.checks, func() {
		_, rejected, _, _, err := o.get()
		if rejected == nil {
			rejected = err
		}
		rej, ok := contract.RejectionOf(rejected)
		if !ok || rej.Reason != reason {
			h.t.Errorf("%s: %v; want a rejection of reason %s", what, rejected, reason)
		}
	})
}

func sessionRequest() guard.SessionRequest {
	return guard.SessionRequest{Settings: guard.Settings{Env: map[string]string{"GREETING": "hi"}}}
}

// TestSessionThreeCellsInOrder runs three approved cells in one sandbox: each cell's digest and
// chain are the ones guard computes from the settings digest, the index, the code and the
// results before it, and the host runs each once, in order, in the one sandbox.
func TestSessionThreeCellsInOrder(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	req := sessionRequest()
	settings := h.settings(req)
	codes := []string{"x = 41", "import json", "print(x + 1)"}
	chain := guard.ChainStart(settings.Digest)
	var digests []string
	for i, code := range codes {
		base := time.Duration(3*i+1) * time.Minute
		h.at(base, func() {
			st := h.status()
			if st.Chain != chain {
				t.Errorf("cell %d: status chain %s; want %s", i+1, st.Chain, chain)
			}
			h.submit(code)
		})
		h.at(base+time.Minute, func() {
			d := guard.CellDigest(settings.Digest, i+1, guard.CellCodeDigest(guard.Python, code), chain)
			digests = append(digests, d)
			st := h.status()
			if got := st.Cells[i].Digest; got != d {
				t.Errorf("cell %d digest %s; want %s", i+1, got, d)
			}
			h.expectAccepted(fmt.Sprintf("approve cell %d", i+1), h.decide(i+1, approve(d)))
		})
		h.at(base+2*time.Minute, func() {
			st := h.status()
			c := st.Cells[i]
			if c.State != contract.StatusSucceeded || c.Result == nil {
				t.Fatalf("cell %d: %s; want succeeded with a result", i+1, c.State)
			}
			chain = guard.ChainNext(chain, c.Digest, guard.ResultDigest(*c.Result))
		})
	}
	h.at(10*time.Minute, func() { h.closeSession() })
	h.run(req)

	res, err := h.result()
	if err != nil {
		t.Fatal(err)
	}
	if res.End != contract.EndClosed || len(res.Cells) != 3 || res.Chain != chain || res.SettingsDigest != settings.Digest {
		t.Fatalf("result: end %s, %d cells, chain %s; want closed, 3 cells, chain %s", res.End, len(res.Cells), res.Chain, chain)
	}
	boxes := h.backend.Sandboxes()
	if len(boxes) != 1 || !h.holdCancelled() {
		t.Fatalf("%d sandboxes (hold cancelled: %v); want one, its hold cancelled", len(boxes), h.holdCancelled())
	}
	ran := boxes[0].Ran()
	if len(ran) != 3 {
		t.Fatalf("sandbox ran %d cells; want 3", len(ran))
	}
	for i, c := range ran {
		if c.Index != i+1 || c.Code != codes[i] {
			t.Errorf("cell %d ran as %+v; want index %d, code %q", i+1, c, i+1, codes[i])
		}
		if res.Cells[i].Digest != digests[i] || res.Cells[i].Result.Digest != digests[i] || res.Cells[i].Result.ApprovalID == "" {
			t.Errorf("cell %d: digest %s, result digest %s; want %s and an approval id", i+1, res.Cells[i].Digest, res.Cells[i].Result.Digest, digests[i])
		}
	}
	if out := string(res.Cells[2].Result.Stdout); !strings.Contains(out, "remembers cell 1: x = 41") {
		t.Errorf("cell 3 printed %q; want it to remember cell 1 (one sandbox)", out)
	}
	if n := h.startedCount(contract.SessionCellActivityName); n != 3 {
		t.Errorf("%d SessionCell activities; want 3", n)
	}
}

// TestSessionDecisionFitsOneCellOfOneSession: cell 2's approval is refused for cell 3, and cell
// 3's approval signed for another workflow id or run id or host is refused; the right one runs.
func TestSessionDecisionFitsOneCellOfOneSession(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	req := sessionRequest()
	var d2 contract.Decision
	h.at(time.Minute, func() { h.submit("a = 1") })
	h.at(2*time.Minute, func() { h.expectAccepted("approve 1", h.decide(1, approve(h.status().Cells[0].Digest))) })
	h.at(3*time.Minute, func() { h.submit("b = 2") })
	h.at(4*time.Minute, func() {
		d2 = approve(h.status().Cells[1].Digest)
		h.expectAccepted("approve 2", h.decide(2, d2))
	})
	h.at(5*time.Minute, func() { h.submit("print(a + b)") })
	h.at(6*time.Minute, func() {
		d3 := h.status().Cells[2].Digest
		h.expectRejected("cell 2's approval for cell 3", h.decide(3, d2), contract.RejectWrongDigest)
		h.expectRejected("cell 2's approval again for cell 2", h.decide(2, d2), contract.RejectAlreadyDecided)
		h.expectRejected("another workflow id", h.decide(3, cellDecision("other-session", testRunID, d3, testHostQueue, true)), contract.RejectOther)
		h.expectRejected("another run id", h.decide(3, cellDecision(testWorkflowID, "other-run", d3, testHostQueue, true)), contract.RejectOther)
		h.expectRejected("another host", h.decide(3, cellDecision(testWorkflowID, testRunID, d3, "another-host", true)), contract.RejectOther)
		if st := h.status(); st.Cells[2].State != contract.StatusAwaitingApproval {
			t.Errorf("cell 3 is %s after the refused decisions; want still waiting", st.Cells[2].State)
		}
		h.expectAccepted("approve 3", h.decide(3, approve(d3)))
	})
	h.at(8*time.Minute, func() { h.closeSession() })
	h.run(req)
	res, err := h.result()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cells) != 3 || res.Cells[2].State != contract.StatusSucceeded || h.backend.Cells() != 3 {
		t.Fatalf("cells %+v, %d ran; want 3 succeeded", res.Cells, h.backend.Cells())
	}
	// The five refusals are counted as the validator's, by reason.
	for reason, want := range map[contract.RejectReason]float64{contract.RejectWrongDigest: 1, contract.RejectAlreadyDecided: 1, contract.RejectOther: 3} {
		if got := refusals(t, h.metrics, string(reason)); got != want {
			t.Errorf("decision_refusals_total{reason=%s} = %v; want %v", reason, got, want)
		}
	}
}

// TestSessionDenialLeavesItOpen: a denied cell does not run and leaves the chain as it was; the
// next cell is numbered after it and runs over the unchanged chain.
func TestSessionDenialLeavesItOpen(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	req := sessionRequest()
	settings := h.settings(req)
	chain0 := guard.ChainStart(settings.Digest)
	h.at(time.Minute, func() { h.submit("import os; os.system('rm -rf /work')") })
	h.at(2*time.Minute, func() {
		d := h.status().Cells[0].Digest
		h.expectAccepted("deny 1", h.decide(1, cellDecision(testWorkflowID, testRunID, d, testHostQueue, false)))
	})
	h.at(3*time.Minute, func() {
		st := h.status()
		if st.State != contract.SessionOpen || st.Cells[0].State != contract.StatusDenied || st.Chain != chain0 {
			t.Errorf("after the denial: session %s, cell %s, chain %s; want open, denied, %s", st.State, st.Cells[0].State, st.Chain, chain0)
		}
		h.submit("print('fine')")
	})
	h.at(4*time.Minute, func() {
		want := guard.CellDigest(settings.Digest, 2, guard.CellCodeDigest(guard.Python, "print('fine')"), chain0)
		if got := h.status().Cells[1].Digest; got != want {
			t.Errorf("cell 2 digest %s; want %s (over the unchanged chain)", got, want)
		}
		h.expectAccepted("approve 2", h.decide(2, approve(want)))
	})
	h.at(6*time.Minute, func() { h.closeSession() })
	h.run(req)
	res, err := h.result()
	if err != nil {
		t.Fatal(err)
	}
	ran := h.backend.Sandboxes()[0].Ran()
	if len(ran) != 1 || ran[0].Index != 2 || res.Cells[0].State != contract.StatusDenied || res.Cells[1].State != contract.StatusSucceeded {
		t.Fatalf("ran %+v, cells %s/%s; want only cell 2, denied then succeeded", ran, res.Cells[0].State, res.Cells[1].State)
	}
}

// TestSessionCellApprovalTimeout: a cell with no decision expires; the session stays open and
// takes the next cell.
func TestSessionCellApprovalTimeout(t *testing.T) {
	p := sessionPolicy
	p.ApprovalTimeout = 5 * time.Minute
	h := newSessionHarness(t, p)
	req := sessionRequest()
	h.at(time.Minute, func() { h.submit("print(1)") })
	h.at(7*time.Minute, func() {
		st := h.status()
		if st.State != contract.SessionOpen || st.Cells[0].State != contract.StatusExpired {
			t.Errorf("after the approval timeout: session %s, cell %s; want open, expired", st.State, st.Cells[0].State)
		}
		h.submit("print(2)")
	})
	h.at(8*time.Minute, func() { h.expectAccepted("approve 2", h.decide(2, approve(h.status().Cells[1].Digest))) })
	h.at(9*time.Minute, func() { h.closeSession() })
	h.run(req)
	res, err := h.result()
	if err != nil {
		t.Fatal(err)
	}
	if res.Cells[0].State != contract.StatusExpired || res.Cells[1].State != contract.StatusSucceeded || h.backend.Cells() != 1 {
		t.Fatalf("cells %s/%s, %d ran; want expired, succeeded, 1 ran", res.Cells[0].State, res.Cells[1].State, h.backend.Cells())
	}
}

// TestSessionEnds: the idle timeout, the lifetime and the cell cap end the session with its
// sandbox removed (SessionHold cancelled) and a waiting cell dropped.
func TestSessionEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   guard.SessionRequest
		steps func(h *sessionHarness)
		end   string
		after time.Duration
	}{
		{name: "idle", req: guard.SessionRequest{IdleTimeout: 3 * time.Minute}, end: contract.EndIdle, after: 3 * time.Minute},
		{name: "lifetime", req: guard.SessionRequest{Lifetime: 4 * time.Minute},
			steps: func(h *sessionHarness) { h.at(time.Minute, func() { h.submit("print(1)") }) }, end: contract.EndLifetime, after: 4 * time.Minute},
		{name: "max cells", req: guard.SessionRequest{MaxCells: 2}, steps: func(h *sessionHarness) {
			for i := range 2 {
				h.at(time.Duration(2*i+1)*time.Minute, func() { h.submit(fmt.Sprintf("print(%d)", i)) })
				h.at(time.Duration(2*i+2)*time.Minute, func() {
					d := h.status().Cells[i].Digest
					h.decide(i+1, cellDecision(testWorkflowID, testRunID, d, testHostQueue, false))
				})
			}
		}, end: contract.EndMaxCells, after: 4 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSessionHarness(t, sessionPolicy)
			if tc.steps != nil {
				tc.steps(h)
			}
			h.run(tc.req)
			res, err := h.result()
			if err != nil {
				t.Fatal(err)
			}
			if res.End != tc.end {
				t.Errorf("end %s; want %s", res.End, tc.end)
			}
			if !h.holdCancelled() {
				t.Errorf("the hold was not cancelled at the end (the host removes the sandbox then)")
			}
			if st := h.status(); st.State != contract.SessionClosed || st.End != tc.end {
				t.Errorf("status %s/%s; want %s/%s", st.State, st.End, contract.SessionClosed, tc.end)
			}
			if tc.name == "lifetime" && (len(res.Cells) != 1 || res.Cells[0].State != contract.CellDropped) {
				t.Errorf("cells %+v; want the waiting cell dropped", res.Cells)
			}
			if h.backend.Cells() != 0 {
				t.Errorf("%d cells ran; want none", h.backend.Cells())
			}
		})
	}
}

// TestSessionLostSandbox: the sandbox ends by itself while a cell waits: the session fails with
// a SandboxLost and never schedules the cell.
func TestSessionLostSandbox(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	h.holdFor(2*time.Minute, contract.ToFailure(&guard.SandboxLost{Msg: "sandbox-1 ended"}))
	var digest string
	h.at(time.Minute, func() { h.submit("x = 1") })
	h.at(90*time.Second, func() { digest = h.status().Cells[0].Digest })
	h.at(3*time.Minute, func() {
		if st := h.status(); st.State != contract.SessionError || st.End != contract.EndLost || st.Cells[0].State != contract.CellDropped {
			t.Errorf("status after the loss: %s/%s, cell %s; want %s/%s, dropped", st.State, st.End, st.Cells[0].State, contract.SessionError, contract.EndLost)
		}
		h.expectRejected("approval after the loss", h.decide(1, approve(digest)), contract.RejectNotWaiting)
	})
	h.run(sessionRequest())
	err := h.env.GetWorkflowError()
	var lost *guard.SandboxLost
	if !errors.As(contract.FromFailure(err), &lost) {
		t.Fatalf("workflow error %v; want a SandboxLost", err)
	}
	if n := h.startedCount(contract.SessionCellActivityName); n != 0 || h.backend.Cells() != 0 {
		t.Errorf("%d SessionCell activities, %d cells ran; want none", n, h.backend.Cells())
	}
}

// TestSessionSandboxLostDuringCell: a cell whose sandbox dies under it ends the session with a
// SandboxLost, and no later cell is scheduled.
func TestSessionSandboxLostDuringCell(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	h.backend.Result = func(cell guard.Cell, _ []guard.Cell) guard.Result {
		return guard.Result{Outcome: guard.OutcomeSucceeded}
	}
	h.at(time.Minute, func() { h.submit("x = 1") })
	h.at(90*time.Second, func() { h.backend.Sandboxes()[0].Lose() })
	h.at(2*time.Minute, func() { h.expectAccepted("approve 1", h.decide(1, approve(h.status().Cells[0].Digest))) })
	h.run(sessionRequest())
	var lost *guard.SandboxLost
	if err := h.env.GetWorkflowError(); !errors.As(contract.FromFailure(err), &lost) {
		t.Fatalf("workflow error %v; want a SandboxLost", err)
	}
	if h.backend.Cells() != 0 {
		t.Errorf("%d cells ran in a lost sandbox", h.backend.Cells())
	}
}

// TestSessionStatementVersion: a session's cells are signed with statement version 2.
func TestSessionStatementVersion(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	h.at(time.Minute, func() {
		if v := h.status().StatementVersion; v != approval.StatementVersion {
			t.Errorf("statement version %d; want %d", v, approval.StatementVersion)
		}
		h.closeSession()
	})
	h.run(sessionRequest())
	if _, err := h.result(); err != nil {
		t.Fatal(err)
	}
}

// TestSessionCellFailures: a cell that failed before it could start ends in error and the session
// takes the next cell; a cell whose code may have started ends the session in error.
func TestSessionCellFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		endsRun bool
	}{
		{"before the start", &guard.IntegrationError{Op: "exec", Err: errors.New("daemon unreachable")}, false},
		{"after the start", &guard.IntegrationError{Op: "exec", Err: errors.New("connection reset"), CodeMayHaveStarted: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSessionHarness(t, sessionPolicy)
			h.at(time.Minute, func() {
				h.backend.CellErr = tc.err
				h.submit("print(1)")
			})
			h.at(2*time.Minute, func() { h.expectAccepted("approve 1", h.decide(1, approve(h.status().Cells[0].Digest))) })
			h.at(3*time.Minute, func() {
				if tc.endsRun {
					return
				}
				st := h.status()
				if st.State != contract.SessionOpen || st.Cells[0].State != contract.StatusError || st.Chain != guard.ChainStart(st.Settings.Digest) {
					t.Errorf("after the failure: %s, cell %s, chain %s; want open, error, the chain unchanged", st.State, st.Cells[0].State, st.Chain)
				}
				h.submit("print(2)")
			})
			h.at(4*time.Minute, func() {
				if !tc.endsRun {
					h.expectAccepted("approve 2", h.decide(2, approve(h.status().Cells[1].Digest)))
				}
			})
			h.at(5*time.Minute, func() {
				if !tc.endsRun {
					h.closeSession()
				}
			})
			h.run(sessionRequest())
			res, err := h.result()
			if tc.endsRun {
				var ie *guard.IntegrationError
				if !errors.As(contract.FromFailure(err), &ie) || !ie.CodeMayHaveStarted {
					t.Fatalf("workflow error %v; want the IntegrationError whose code may have started", err)
				}
				return
			}
			if err != nil || len(res.Cells) != 2 || res.Cells[1].State != contract.StatusSucceeded {
				t.Fatalf("result %+v, %v; want cell 2 succeeded", res, err)
			}
		})
	}
}

// refusals reads sandboxflow_decision_refusals_total{reason, via="update"}.
func refusals(t *testing.T, m *metrics.Metrics, reason string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "sandboxflow_decision_refusals_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["reason"] == reason && labels["via"] == contract.ViaUpdate {
				return mt.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// decideResult is an update's DecideResult, once it completed.
func decideResult(t *testing.T, o *outcome) (contract.DecideResult, error) {
	t.Helper()
	_, rejected, done, v, err := o.get()
	switch {
	case rejected != nil:
		return contract.DecideResult{}, rejected
	case err != nil:
		return contract.DecideResult{}, err
	case !done:
		return contract.DecideResult{}, errors.New("the update did not complete")
	}
	switch r := v.(type) {
	case contract.DecideResult:
		return r, nil
	case converter.EncodedValue:
		var res contract.DecideResult
		return res, r.Get(&res)
	}
	return contract.DecideResult{}, fmt.Errorf("update result %T", v)
}

// Cells under a quorum of 2 (issue 32): one approval runs nothing (the answer says 1 of 2 and
// the cell still waits); the same reviewer again, with a fresh approval id or the same one, is
// refused (duplicate_approver); a second reviewer's approval runs the cell once, with both
// approvals in its input, its result and its host's receipt (which the workflow checks names
// both). On the next cell, a denial after one approval denies it and nothing runs.
func TestSessionCellQuorum(t *testing.T) {
	bob := reviewertest.New(t, "bob")
	host := hosttest.New(t, "host-a")
	policy := sessionPolicy
	policy.Quorum = 2
	h := newSessionHarnessWith(t, policy, func(c *activities.Config) {
		c.ReviewersFile = reviewertest.WriteAllowedSigners(t, t.TempDir(), testReviewer(), bob)
		withHost(host)(c)
	})
	req := sessionRequest()
	bobs := func(digest string, approve bool) contract.Decision {
		f := reviewertest.Fields(testWorkflowID, testRunID, digest, testHostQueue, approve)
		f.Reviewer = "bob"
		f.Expires = time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
		d, err := bob.Sign(f)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var digest string
	var first, again, same, second, deny1, deny2 *outcome
	var firstD contract.Decision
	h.at(time.Minute, func() { h.submit("print('ran once')") })
	h.at(2*time.Minute, func() {
		st := h.status()
		if st.Quorum != 2 || len(st.Cells) != 1 || st.Cells[0].Quorum != 2 {
			t.Errorf("status quorum %d, cells %+v; want 2, one cell needing 2", st.Quorum, st.Cells)
		}
		digest = st.Cells[0].Digest
		firstD = approve(digest)
		first = h.decide(1, firstD)
	})
	h.at(3*time.Minute, func() {
		st := h.status()
		c := st.Cells[0]
		if c.State != contract.StatusAwaitingApproval || len(c.Approvals) != 1 || c.Approvals[0].Reviewer != "alice" || c.Decision != nil {
			t.Errorf("cell after one approval: %s, approvals %+v, decision %+v; want waiting, alice's alone, no decision", c.State, c.Approvals, c.Decision)
		}
		if n := h.startedCount(contract.SessionCellActivityName); n != 0 {
			t.Errorf("%d cell activities after one approval of two; want none", n)
		}
		again = h.decide(1, approve(digest))
		same = h.decide(1, firstD)
	})
	h.at(4*time.Minute, func() { second = h.decide(1, bobs(digest, true)) })
	h.at(6*time.Minute, func() { h.submit("print('never')") })
	h.at(7*time.Minute, func() {
		d := h.status().Cells[1].Digest
		deny1 = h.decide(2, approve(d))
	})
	h.at(8*time.Minute, func() { deny2 = h.decide(2, bobs(h.status().Cells[1].Digest, false)) })
	h.at(10*time.Minute, func() { h.closeSession() })
	h.run(req)

	res, err := decideResult(t, first)
	if err != nil || res.State != contract.StatusAwaitingApproval || res.Approvals != 1 || res.Quorum != 2 {
		t.Errorf("alice's approval: %+v, %v; want accepted, 1 of 2, still waiting", res, err)
	}
	for name, o := range map[string]*outcome{"alice again": again, "the same approval again": same} {
		_, rejected, _, _, err := o.get()
		if rejected == nil {
			rejected = err
		}
		if rej, ok := contract.RejectionOf(rejected); !ok || rej.Reason != contract.RejectDuplicate {
			t.Errorf("%s: %v; want a rejection of reason %s", name, rejected, contract.RejectDuplicate)
		}
	}
	if res, err := decideResult(t, second); err != nil || res.State != contract.StatusRunning || res.Approvals != 2 || res.Quorum != 2 || res.Reviewer != "bob" {
		t.Errorf("bob's approval: %+v, %v; want accepted, 2 of 2, running", res, err)
	}
	if res, err := decideResult(t, deny1); err != nil || res.State != contract.StatusAwaitingApproval {
		t.Errorf("alice's approval of cell 2: %+v, %v; want accepted, still waiting", res, err)
	}
	if res, err := decideResult(t, deny2); err != nil || res.State != contract.StatusDenied {
		t.Errorf("bob's denial of cell 2: %+v, %v; want accepted, denied", res, err)
	}
	out, err := h.result()
	if err != nil || len(out.Cells) != 2 {
		t.Fatalf("result %+v, %v; want two cells", out, err)
	}
	c1, c2 := out.Cells[0], out.Cells[1]
	if c1.State != contract.StatusSucceeded || c1.Result == nil || len(c1.Result.Approvals) != 2 ||
		c1.Result.Approvals[0].Reviewer != "alice" || c1.Result.Approvals[1].Reviewer != "bob" || c1.Decision == nil || c1.Decision.Reviewer != "alice" {
		t.Errorf("cell 1: %s, result %+v, decision %+v; want succeeded with alice's and bob's approvals, alice's the decision", c1.State, c1.Result, c1.Decision)
	}
	hosts, err := receipt.LoadHosts(host.File)
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := receipt.Verify(hosts, c1.Result.Receipt); err != nil || len(rs.Approvals) != 2 ||
		rs.Approvals[0].ID != c1.Approvals[0].ApprovalID || rs.Approvals[1].ID != c1.Approvals[1].ApprovalID || rs.Approvals[1].Fingerprint != c1.Approvals[1].Fingerprint {
		t.Errorf("cell 1's receipt approvals %+v, %v; want alice's and bob's, as the status records them", rs.Approvals, err)
	}
	if c2.State != contract.StatusDenied || c2.Result != nil || c2.Decision == nil || c2.Decision.Reviewer != "bob" || c2.Decision.Approve {
		t.Errorf("cell 2: %s, decision %+v; want denied by bob, nothing run", c2.State, c2.Decision)
	}
	if n := h.startedCount(contract.SessionCellActivityName); n != 1 || h.backend.Cells() != 1 {
		t.Errorf("%d cell activities, %d cells ran; want the one approved cell once", n, h.backend.Cells())
	}
}

// TestSessionRefusesCellsAfterAWrittenFileReadsAsOtherCode: once a cell's result reports a file
// that a later cell could import as other code than the views draw (a coding declaration, an
// __init__.py of a package in UTF-7, bytecode, indentation that reads two ways), the next cell is
// refused as a ToolUsageError naming the cell and the file, and never runs; a later version of
// files that only warrant a warning (a standard module's name, a lone
// carriage return in a text file) do not refuse.
func TestSessionRefusesCellsAfterAWrittenFileReadsAsOtherCode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files [][]guard.File // what cells 1, 2, ... report writing; the cell after them is checked
		want  string         // in the refusal; "" when the cell runs
	}{
		{"raw_unicode_escape", [][]guard.File{{{Name: "helper.py", Content: []byte("# coding: raw_unicode_escape\n# \\u000aimport os\n")}}}, "cell 1 left in /work a file a cell could import or run as other code than the views draw: written file helper.py line 1: coding declaration"},
		{"package in utf-7", [][]guard.File{{{Name: "pkg/__init__.py", Content: []byte("# -*- coding: utf-7 -*-\nx = 1\n")}}}, "written file pkg/__init__.py line 1"},
		{"a coding in any file", [][]guard.File{{{Name: "notes.txt", Content: []byte("# vim: set fileencoding=shift_jis :\n")}}}, "written file notes.txt line 1"},
		{"bytecode", [][]guard.File{{{Name: "json.pyc", Content: []byte{0x6f, 0x0d, 0x0d, 0x0a}}}}, "written file json.pyc: compiled bytecode"},
		{"indentation", [][]guard.File{{{Name: "m.py", Content: []byte("if 1:\n\tx = 1\nif 2:\n        y = 2\n")}}}, "written file m.py line 4"},
		{"after a clean cell", [][]guard.File{{{Name: "m.py", Content: []byte("x = 1\n")}}, {{Name: "m.py", Content: []byte("# coding: latin-1\n")}}}, "cell 2 left in /work"},
		{"warnings only", [][]guard.File{{{Name: "json.py", Content: []byte("x = 1\n")}, {Name: "log.txt", Content: []byte("10%\r20%\r")}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSessionHarness(t, sessionPolicy)
			h.backend.Result = func(c guard.Cell, _ []guard.Cell) guard.Result {
				res := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true}
				if c.Index <= len(tc.files) {
					res.Files = tc.files[c.Index-1]
				}
				return res
			}
			req := sessionRequest()
			var last *outcome
			for i := range tc.files {
				base := time.Duration(2*i+1) * time.Minute
				h.at(base, func() { h.expectAccepted(fmt.Sprintf("submit cell %d", i+1), h.submit("pass")) })
				h.at(base+time.Minute, func() {
					h.expectAccepted(fmt.Sprintf("approve cell %d", i+1), h.decide(i+1, approve(h.status().Cells[i].Digest)))
				})
			}
			h.at(time.Duration(2*len(tc.files)+1)*time.Minute, func() { last = h.submit("import helper") })
			h.at(time.Duration(2*len(tc.files)+2)*time.Minute, func() { h.closeSession() })
			h.run(req)
			_, rejected, _, _, err := last.get()
			if rejected == nil {
				rejected = err
			}
			ran := len(h.backend.Sandboxes()[0].Ran())
			if tc.want == "" {
				if rejected != nil {
					t.Fatalf("the next cell was refused: %v", rejected)
				}
				return
			}
			var app *temporal.ApplicationError
			if !errors.As(rejected, &app) || app.Type() != guard.TypeToolUsageError || !strings.Contains(app.Error(), tc.want) {
				t.Fatalf("the next cell: %v; want a ToolUsageError saying %q", rejected, tc.want)
			}
			if ran != len(tc.files) {
				t.Errorf("the sandbox ran %d cells; want %d (the refused one never)", ran, len(tc.files))
			}
		})
	}
}
