package workflows

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// fakeBackend is a hand-written backend: it counts runs, fails the first FailFirst calls with
// FailErr, and otherwise returns Result after Delay (or when its context ends).
type fakeBackend struct {
	FailFirst int
	FailErr   error
	Result    guard.Result
	Delay     time.Duration
	// OnRun, if set, is called at the start of every call that gets past the failures.
	OnRun func()

	mu    sync.Mutex
	calls int
	runs  int
}

func (f *fakeBackend) Name() string { return "fake" }

func (f *fakeBackend) Run(ctx context.Context, c guard.Checked) (guard.Result, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if n <= f.FailFirst {
		return guard.Result{}, f.FailErr
	}
	f.mu.Lock()
	f.runs++
	f.mu.Unlock()
	if f.OnRun != nil {
		f.OnRun()
	}
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-ctx.Done():
			return guard.Result{}, ctx.Err()
		}
	}
	return f.Result, nil
}

// counts returns how many times Run was called and how many of those reached the code.
func (f *fakeBackend) counts() (calls, runs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.runs
}

// logRecord is one line written through the workflow's logger.
type logRecord struct {
	level, msg string
	keyvals    []any
}

// captureLogger is a hand-written go.temporal.io/sdk/log.Logger that keeps every record.
type captureLogger struct {
	mu      sync.Mutex
	records []logRecord
}

func (l *captureLogger) add(level, msg string, kv []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, logRecord{level, msg, kv})
}
func (l *captureLogger) Debug(msg string, kv ...any) { l.add("DEBUG", msg, kv) }
func (l *captureLogger) Info(msg string, kv ...any)  { l.add("INFO", msg, kv) }
func (l *captureLogger) Warn(msg string, kv ...any)  { l.add("WARN", msg, kv) }
func (l *captureLogger) Error(msg string, kv ...any) { l.add("ERROR", msg, kv) }

// events returns the workflow events (records with an "event" key) of the given type.
func (l *captureLogger) events(typ contract.EventType) []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, r := range l.records {
		for i := 0; i+1 < len(r.keyvals); i += 2 {
			if r.keyvals[i] == "event" && r.keyvals[i+1] == string(typ) {
				out = append(out, r)
			}
		}
	}
	return out
}

const approvalTimeout = time.Hour

var testPolicy = guard.Policy{ApprovalTimeout: approvalTimeout, Languages: []string{guard.Python, guard.Shell}}

// harness runs RunCode in a test environment with the real activities around a fake backend.
type harness struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	backend *fakeBackend
	sink    *activities.MemorySink
	logs    *captureLogger

	mu       sync.Mutex
	statuses []string          // SandboxStatus values in the order they were set
	attrs    map[string]string // last value of every search attribute
	timers   []time.Duration
	started  []*activity.Info
	beats    int
	updates  int
}

func newHarness(t *testing.T, backend *fakeBackend, cfg activities.Config) *harness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	h := &harness{t: t, backend: backend, sink: &activities.MemorySink{}, logs: &captureLogger{}, attrs: map[string]string{}}
	suite.SetLogger(h.logs)
	h.env = suite.NewTestWorkflowEnvironment()
	cfg.Backend = backend
	cfg.Sink = h.sink
	cfg.History = &historytest.Log{ScheduleCaller: true}
	if cfg.ReviewersFile == "" {
		cfg.ReviewersFile = reviewertest.WriteAllowedSigners(t, t.TempDir(), testReviewer())
	}
	if cfg.Policy.ApprovalTimeout == 0 {
		cfg.Policy = testPolicy
	}
	acts, err := activities.New(cfg)
	if err != nil {
		t.Fatalf("activities.New: %v", err)
	}
	Register(h.env)
	acts.Register(h.env)
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, k := range []temporal.SearchAttributeKeyKeyword{contract.StatusKey, contract.DigestKey, contract.LanguageKey, contract.BackendKey, contract.ReviewerKey} {
			if v, ok := sa.GetKeyword(k); ok {
				h.attrs[k.GetName()] = v
				if k == contract.StatusKey {
					h.statuses = append(h.statuses, v)
				}
			}
		}
	}).Return(nil)
	h.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.timers = append(h.timers, d)
	})
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.started = append(h.started, info)
	})
	h.env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.beats++
	})
	return h
}

func pyRequest() guard.Request {
	return guard.Request{Code: "print('hello')", Settings: guard.Settings{Env: map[string]string{"GREETING": "secret-value"}}}
}

// digest is the digest Check gives req under the test policy.
func (h *harness) digest(req guard.Request) string {
	h.t.Helper()
	c, err := testPolicy.Check(req, "fake")
	if err != nil {
		h.t.Fatalf("check %+v: %v", req, err)
	}
	return c.Digest
}

// at runs fn when the workflow's clock has advanced by d.
func (h *harness) at(d time.Duration, fn func()) { h.env.RegisterDelayedCallback(fn, d) }

func (h *harness) signal(d contract.Decision) { h.env.SignalWorkflow(contract.SignalApproval, d) }

// updateOutcome is what became of an update.
type updateOutcome struct {
	accepted bool
	rejected error
	result   contract.DecideResult
}

// update sends d as the update and returns a function that reports its outcome once it is known.
func (h *harness) update(d contract.Decision) func() updateOutcome {
	var (
		mu  sync.Mutex
		out updateOutcome
	)
	h.mu.Lock()
	h.updates++
	updateID := fmt.Sprintf("update-%d", h.updates)
	h.mu.Unlock()
	h.env.UpdateWorkflow(contract.UpdateDecide, updateID, &testsuite.TestUpdateCallback{
		OnAccept: func() { mu.Lock(); out.accepted = true; mu.Unlock() },
		OnReject: func(err error) { mu.Lock(); out.rejected = err; mu.Unlock() },
		OnComplete: func(v any, err error) {
			mu.Lock()
			defer mu.Unlock()
			if r, ok := v.(contract.DecideResult); ok {
				out.result = r
			}
		},
	}, d)
	return func() updateOutcome {
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}

func (h *harness) status() contract.Status {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(contract.QueryStatus)
	if err != nil {
		h.t.Fatalf("query status: %v", err)
	}
	var st contract.Status
	if err := v.Get(&st); err != nil {
		h.t.Fatalf("decode status: %v", err)
	}
	return st
}

func (h *harness) run(req guard.Request) {
	h.runInput(contract.Input{Request: req})
}

func (h *harness) runInput(in contract.Input) {
	h.env.ExecuteWorkflow(contract.WorkflowName, in)
	if !h.env.IsWorkflowCompleted() {
		h.t.Fatal("workflow did not complete")
	}
}

func (h *harness) result() (guard.Result, error) {
	var res guard.Result
	err := h.env.GetWorkflowError()
	if err == nil {
		err = h.env.GetWorkflowResult(&res)
	}
	return res, err
}

func (h *harness) lastStatuses() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.statuses...)
}

func (h *harness) attr(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.attrs[name]
}

func (h *harness) wantRuns(want int) {
	h.t.Helper()
	if _, runs := h.backend.counts(); runs != want {
		h.t.Errorf("backend ran the code %d times; want %d", runs, want)
	}
}

func (h *harness) wantStatuses(want ...string) {
	h.t.Helper()
	if got := h.lastStatuses(); strings.Join(got, ",") != strings.Join(want, ",") {
		h.t.Errorf("SandboxStatus went %v; want %v", got, want)
	}
}

// The test environment's run: the statement a decision signs names it.
const (
	testWorkflowID = "default-test-workflow-id"
	testRunID      = "default-test-run-id"
	testTaskQueue  = "default-test-taskqueue"
)

// testReviewer is the reviewers file's one key; it may sign for alice, bob and carol.
var testReviewer = sync.OnceValue(func() *reviewertest.Reviewer {
	r, err := reviewertest.NewKey("alice,bob,carol")
	if err != nil {
		panic(err)
	}
	return r
})

// decision is alice's decision, signed for the test environment's run.
func decision(id, digest string, approve bool) contract.Decision {
	return signed(contract.Decision{ApprovalID: id, Digest: digest, Approve: approve, Reviewer: "alice"}, digest)
}

// signed signs d for the test environment's run over digest (d.Digest, when set, wins). A
// decision whose fields cannot make a statement (a bad id or digest) comes back unsigned.
func signed(d contract.Decision, digest string) contract.Decision {
	return signedFor(d, digest, testTaskQueue)
}

// signedFor is signed for a run whose sandbox activity runs on queue.
func signedFor(d contract.Decision, digest, queue string) contract.Decision {
	if d.Digest != "" {
		digest = d.Digest
	}
	f := d.Fields(testWorkflowID, testRunID, digest, queue)
	f.Version = approval.StatementVersion // the reviewer d names is signed
	f.Expires = time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	sd, err := testReviewer().Sign(f)
	if err != nil {
		return d
	}
	sd.Digest, sd.Reviewer, sd.Reason = d.Digest, d.Reviewer, d.Reason
	return sd
}

const (
	id1 = "8a6e0804-2bd0-4672-b79d-d97027f9071a"
	id2 = "5f1d2c6e-9b3a-4e8f-a1c7-0d4b6e2f9a13"
)

func okBackend() *fakeBackend {
	return &fakeBackend{Result: guard.Result{ExitCode: 0, Stdout: []byte("hello-output\n")}}
}

func TestApproveBySignalRunsOnce(t *testing.T) {
	h := newHarness(t, okBackend(), activities.Config{})
	req := pyRequest()
	dg := h.digest(req)
	h.at(time.Minute, func() {
		if st := h.status(); st.State != contract.StatusAwaitingApproval || st.Request.Digest != dg {
			t.Errorf("status before the decision = %s/%s; want %s/%s", st.State, st.Request.Digest, contract.StatusAwaitingApproval, dg)
		}
		h.signal(decision(id1, dg, true))
	})
	h.run(req)

	res, err := h.result()
	if err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	if !res.OK || string(res.Stdout) != "hello-output\n" || res.ApprovalID != id1 || res.Reviewer != "alice" || res.Digest != dg || res.Backend != "fake" {
		t.Errorf("result = %+v; want ok, stdout, approval %s by alice, digest %s, backend fake", res, id1, dg)
	}
	h.wantRuns(1)
	h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusRunning, contract.StatusSucceeded)
	for name, want := range map[string]string{contract.AttrDigest: dg, contract.AttrLanguage: "python", contract.AttrBackend: "fake", contract.AttrReviewer: "alice"} {
		if got := h.attr(name); got != want {
			t.Errorf("search attribute %s = %q; want %q", name, got, want)
		}
	}
	st := h.status()
	if st.State != contract.StatusSucceeded || st.Decision == nil || st.Decision.ApprovalID != id1 || st.Decision.Via != contract.ViaSignal || st.RunAttempts != 1 {
		t.Errorf("final status = %+v; want succeeded, decision %s via signal, 1 run attempt", st, id1)
	}
	if got := len(h.logs.events(contract.EventApprovalRequested)); got != 1 {
		t.Errorf("%d approval.requested events; want 1", got)
	}
	if got := len(h.logs.events(contract.EventApprovalGranted)); got != 1 {
		t.Errorf("%d approval.granted events; want 1", got)
	}
}

func TestApproveByUpdateRunsOnce(t *testing.T) {
	h := newHarness(t, okBackend(), activities.Config{})
	req := pyRequest()
	dg := h.digest(req)
	var outcome func() updateOutcome
	h.at(time.Minute, func() { outcome = h.update(decision(id1, dg, true)) })
	h.run(req)

	res, err := h.result()
	if err != nil || !res.OK || res.ApprovalID != id1 {
		t.Fatalf("result = %+v, %v; want ok with approval %s", res, err, id1)
	}
	o := outcome()
	acc, rej, dr := o.accepted, o.rejected, o.result
	if !acc || rej != nil {
		t.Errorf("update accepted=%t rejected=%v; want accepted", acc, rej)
	}
	if want := (contract.DecideResult{ApprovalID: id1, Approve: true, Reviewer: "alice", Digest: dg, State: contract.StatusRunning, Approvals: 1, Quorum: 1}); dr != want {
		t.Errorf("update result = %+v; want %+v", dr, want)
	}
	h.wantRuns(1)
	if st := h.status(); st.Decision == nil || st.Decision.Via != contract.ViaUpdate {
		t.Errorf("decision = %+v; want via update", st.Decision)
	}
}

func TestDenyNeverRuns(t *testing.T) {
	for _, via := range []string{contract.ViaSignal, contract.ViaUpdate} {
		t.Run(via, func(t *testing.T) {
			h := newHarness(t, okBackend(), activities.Config{})
			req := pyRequest()
			d := signed(contract.Decision{ApprovalID: id1, Reviewer: "bob", Reason: "no network scans"}, h.digest(req))
			h.at(time.Minute, func() {
				if via == contract.ViaSignal {
					h.signal(d)
				} else {
					h.update(d)
				}
			})
			h.run(req)
			_, err := h.result()
			var denied *guard.ApprovalDenied
			if !errors.As(contract.FromFailure(err), &denied) {
				t.Fatalf("error = %v; want ApprovalDenied", err)
			}
			if denied.Reason != guard.DeniedByReviewer || denied.Reviewer != "bob" || denied.Message != "no network scans" {
				t.Errorf("denial = %+v; want denied by bob with the reason", denied)
			}
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != guard.TypeApprovalDenied || !appErr.NonRetryable() {
				t.Errorf("error %v is not a non-retryable %s application error", err, guard.TypeApprovalDenied)
			}
			if calls, _ := h.backend.counts(); calls != 0 {
				t.Errorf("backend called %d times; want 0", calls)
			}
			if len(h.started) != 0 {
				t.Errorf("%d activities started; want none", len(h.started))
			}
			h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusDenied)
			if got := h.attr(contract.AttrReviewer); got != "bob" {
				t.Errorf("SandboxReviewer = %q; want bob", got)
			}
			if got := len(h.logs.events(contract.EventApprovalDenied)); got != 1 {
				t.Errorf("%d approval.denied events; want 1", got)
			}
		})
	}
}

func TestNoDecisionExpiresAtTheApprovalTimeout(t *testing.T) {
	h := newHarness(t, okBackend(), activities.Config{})
	start := h.env.Now()
	h.run(pyRequest())
	_, err := h.result()
	var denied *guard.ApprovalDenied
	if !errors.As(contract.FromFailure(err), &denied) || denied.Reason != guard.DeniedExpired {
		t.Fatalf("error = %v; want ApprovalDenied (expired)", err)
	}
	if got := h.env.Now().Sub(start); got != approvalTimeout {
		t.Errorf("workflow ended after %s; want the approval timeout %s", got, approvalTimeout)
	}
	if len(h.timers) != 1 || h.timers[0] != approvalTimeout {
		t.Errorf("timers %v; want one of %s", h.timers, approvalTimeout)
	}
	h.wantRuns(0)
	h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusExpired)
	if got := len(h.logs.events(contract.EventApprovalExpired)); got != 1 {
		t.Errorf("%d approval.expired events; want 1", got)
	}
}

func TestWrongDigestIsRejectedThenARightOneRuns(t *testing.T) {
	h := newHarness(t, okBackend(), activities.Config{})
	req := pyRequest()
	dg := h.digest(req)
	wrong := "sha256:" + strings.Repeat("0", 64)
	h.at(time.Minute, func() { h.signal(decision(id1, wrong, true)) })
	h.at(2*time.Minute, func() {
		st := h.status()
		if st.State != contract.StatusAwaitingApproval || st.RejectedDecisions != 1 || !strings.Contains(st.LastRejection, "wrong digest") {
			t.Errorf("after a wrong digest: state %s, rejected %d (%q); want still awaiting, 1 rejected for the wrong digest",
				st.State, st.RejectedDecisions, st.LastRejection)
		}
		h.wantRuns(0)
		h.signal(decision(id2, dg, true))
	})
	h.run(req)
	res, err := h.result()
	if err != nil || res.ApprovalID != id2 {
		t.Fatalf("result %+v, %v; want a run approved by %s", res, err, id2)
	}
	h.wantRuns(1)
	if got := len(h.logs.events(contract.EventApprovalRejected)); got != 1 {
		t.Errorf("%d approval.rejected events; want 1", got)
	}
}

func TestTwoApprovalsRunOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		second   string
		sameTask bool
	}{
		{"same id, together", id1, true},
		{"different ids, together", id2, true},
		{"same id, while running", id1, false},
		{"different ids, while running", id2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := okBackend()
			b.Delay = 200 * time.Millisecond
			h := newHarness(t, b, activities.Config{})
			req := pyRequest()
			dg := h.digest(req)
			h.at(time.Minute, func() {
				h.signal(decision(id1, dg, true))
				if tc.sameTask {
					h.signal(decision(tc.second, dg, true))
				}
			})
			if !tc.sameTask {
				var once sync.Once
				b.OnRun = func() { once.Do(func() { h.signal(decision(tc.second, dg, true)) }) }
			}
			h.run(req)
			res, err := h.result()
			if err != nil || res.ApprovalID != id1 {
				t.Fatalf("result %+v, %v; want the run approved by the first decision %s", res, err, id1)
			}
			h.wantRuns(1)
			if calls, _ := h.backend.counts(); calls != 1 {
				t.Errorf("backend called %d times; want 1", calls)
			}
			if st := h.status(); st.IgnoredDecisions != 1 {
				t.Errorf("ignored decisions = %d; want 1", st.IgnoredDecisions)
			}
		})
	}
}

func TestDecisionWhileRunningIsIgnored(t *testing.T) {
	b := okBackend()
	b.Delay = 300 * time.Millisecond
	h := newHarness(t, b, activities.Config{})
	req := pyRequest()
	dg := h.digest(req)
	var once sync.Once
	b.OnRun = func() {
		once.Do(func() {
			h.signal(decision(id2, dg, true))
			h.signal(contract.Decision{ApprovalID: id2, Reviewer: "mallory"})
		})
	}
	h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
	h.run(req)
	res, err := h.result()
	if err != nil || res.ApprovalID != id1 || !res.OK {
		t.Fatalf("result %+v, %v; want ok approved by %s", res, err, id1)
	}
	h.wantRuns(1)
	st := h.status()
	if st.IgnoredDecisions != 2 || st.State != contract.StatusSucceeded {
		t.Errorf("status %+v; want 2 ignored decisions and succeeded", st)
	}
}

func TestUpdateValidatorRefusesBadDecisions(t *testing.T) {
	req := pyRequest()
	h := newHarness(t, okBackend(), activities.Config{})
	dg := h.digest(req)
	cases := []struct {
		name string
		d    contract.Decision
		why  string
	}{
		{"wrong digest", decision(id1, "sha256:"+strings.Repeat("1", 64), true), "wrong digest"},
		{"approval without digest", decision(id1, "", true), "digest is missing"},
		{"deny with wrong digest", decision(id1, "sha256:abc", false), "wrong digest"},
		{"unsigned", contract.Decision{ApprovalID: id1, Digest: dg, Approve: true}, "unsigned"},
		{"blank reviewer", relayedAs(decision(id1, dg, true), "  "), "statement_mismatch"},
		{"reviewer changed after signing", relayedAs(decision(id1, dg, true), "bob"), "statement_mismatch"},
		{"reviewer the key may not sign for", signed(contract.Decision{ApprovalID: id1, Digest: dg, Approve: true, Reviewer: "mallory"}, dg), "principal_mismatch"},
		{"control character in reviewer", contract.Decision{ApprovalID: id1, Digest: dg, Approve: true, Reviewer: "al\nice"}, "control characters"},
		{"long reviewer", contract.Decision{ApprovalID: id1, Digest: dg, Approve: true, Reviewer: strings.Repeat("a", contract.MaxReviewerBytes+1)}, "reviewer is"},
		{"long reason", contract.Decision{ApprovalID: id1, Digest: dg, Reviewer: "a", Reason: strings.Repeat("r", contract.MaxReasonBytes+1)}, "reason is"},
		{"missing id", decision("", dg, true), "approval_id is missing"},
		{"id not a UUID", decision("approve-please", dg, true), "not a UUID"},
		{"nil UUID", decision("00000000-0000-0000-0000-000000000000", dg, true), "not a UUID"},
		{"UUID in braces", decision("{"+id1+"}", dg, true), "not a UUID"},
	}
	outcomes := make([]func() updateOutcome, len(cases))
	h.at(time.Minute, func() {
		for i, tc := range cases {
			outcomes[i] = h.update(tc.d)
		}
	})
	var good, late func() updateOutcome
	h.at(2*time.Minute, func() {
		if st := h.status(); st.State != contract.StatusAwaitingApproval {
			t.Errorf("state after refused updates = %s; want %s", st.State, contract.StatusAwaitingApproval)
		}
		good = h.update(signed(contract.Decision{ApprovalID: id1, Reviewer: "carol", Reason: "not today"}, dg))
	})
	h.at(3*time.Minute, func() { late = h.update(decision(id2, dg, true)) })
	h.run(req)

	for i, tc := range cases {
		o := outcomes[i]()
		acc, rej := o.accepted, o.rejected
		var appErr *temporal.ApplicationError
		switch {
		case acc || rej == nil:
			t.Errorf("%s: accepted=%t rejected=%v; want rejected", tc.name, acc, rej)
		case !strings.Contains(rej.Error(), tc.why):
			t.Errorf("%s: rejected with %q; want a reason containing %q", tc.name, rej, tc.why)
		case !errors.As(rej, &appErr) || appErr.Type() != contract.DecisionRejectedType:
			t.Errorf("%s: rejection %v is not a %s application error", tc.name, rej, contract.DecisionRejectedType)
		}
	}
	if o := good(); !o.accepted || o.rejected != nil {
		t.Errorf("valid denial: accepted=%t rejected=%v; want accepted", o.accepted, o.rejected)
	}
	// The workflow ended with the denial, so the late update cannot reach it: it must not have
	// been accepted.
	if late != nil {
		if late().accepted {
			t.Error("an update after the decision was accepted")
		}
	}
	_, err := h.result()
	var denied *guard.ApprovalDenied
	if !errors.As(contract.FromFailure(err), &denied) || denied.Reviewer != "carol" {
		t.Errorf("error %v; want ApprovalDenied by carol", err)
	}
	h.wantRuns(0)
}

func TestUpdateAfterADecisionIsRefused(t *testing.T) {
	b := okBackend()
	b.Delay = 300 * time.Millisecond
	h := newHarness(t, b, activities.Config{})
	req := pyRequest()
	dg := h.digest(req)
	var late func() updateOutcome
	var once sync.Once
	b.OnRun = func() { once.Do(func() { late = h.update(decision(id2, dg, true)) }) }
	h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
	h.run(req)
	if _, err := h.result(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	o := late()
	acc, rej := o.accepted, o.rejected
	if acc || rej == nil || !strings.Contains(rej.Error(), "already decided") {
		t.Errorf("update while running: accepted=%t rejected=%v; want rejected as already decided", acc, rej)
	}
	h.wantRuns(1)
}

func TestRefusalOutsideTheWait(t *testing.T) {
	dg := "sha256:" + strings.Repeat("a", 64)
	good := decision(id1, dg, true)
	for _, tc := range []struct {
		state string
		want  string
	}{
		{contract.StatusChecking, "still being checked"},
		{contract.StatusRunning, "not waiting"},
		{contract.StatusExpired, "not waiting"},
		{contract.StatusError, "not waiting"},
	} {
		r := &runCode{status: contract.Status{State: tc.state}, checked: guard.Checked{Digest: dg}}
		// Outside the wait the refusal comes before anything reads the workflow context.
		_, err := r.refusal(nil, good)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("refusal in state %s = %v; want %q", tc.state, err, tc.want)
		}
	}
	r := &runCode{status: contract.Status{State: contract.StatusAwaitingApproval}, checked: guard.Checked{Digest: dg}, ballot: ballot{decision: &good}}
	if _, err := r.refusal(nil, decision(id2, dg, true)); err == nil || !strings.Contains(err.Error(), "already decided") {
		t.Errorf("refusal after a decision = %v; want already decided", err)
	}
}

func TestCancelWhileWaitingRunsNothing(t *testing.T) {
	h := newHarness(t, okBackend(), activities.Config{})
	req := pyRequest()
	dg := h.digest(req)
	h.at(time.Minute, func() { h.env.CancelWorkflow() })
	h.at(2*time.Minute, func() { h.signal(decision(id1, dg, true)) })
	h.run(req)
	_, err := h.result()
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("error = %v; want cancelled", err)
	}
	if calls, _ := h.backend.counts(); calls != 0 {
		t.Errorf("backend called %d times; want 0", calls)
	}
	h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusCancelled)
}

// TestCancelWhileRunning shows the workflow ends cancelled when cancelled during the run. The test
// environment does not pass the cancellation on to the activity's context; the integration test
// TestIntegrationCancelWhileRunningStopsTheCode shows the code is stopped.
func TestCancelWhileRunning(t *testing.T) {
	b := okBackend()
	b.Delay = time.Second
	h := newHarness(t, b, activities.Config{})
	req := pyRequest()
	dg := h.digest(req)
	var once sync.Once
	b.OnRun = func() { once.Do(func() { h.env.CancelWorkflow() }) }
	h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
	h.run(req)
	_, err := h.result()
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("error = %v; want cancelled", err)
	}
	h.wantRuns(1)
	h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusRunning, contract.StatusCancelled)
}

func TestBadRequestFailsBeforeAnyWait(t *testing.T) {
	for _, tc := range []struct {
		name     string
		req      guard.Request
		wantType string
	}{
		{"empty code", guard.Request{Code: "  "}, guard.TypeToolUsageError},
		{"language not offered", guard.Request{Code: "x", Language: "ruby"}, guard.TypeToolUsageError},
		{"denied env", guard.Request{Code: "x", Settings: guard.Settings{Env: map[string]string{"LD_PRELOAD": "/x.so"}}}, guard.TypeToolUsageError},
		{"bad file name", guard.Request{Code: "x", Settings: guard.Settings{Files: map[string][]byte{"../etc/passwd": nil}}}, guard.TypeToolUsageError},
		{"timeout over the policy", guard.Request{Code: "x", Settings: guard.Settings{Limits: guard.Limits{Timeout: time.Hour}}}, guard.TypeConfigError},
		{"network forbidden", guard.Request{Code: "x", Settings: guard.Settings{Network: true}}, guard.TypeConfigError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, okBackend(), activities.Config{})
			h.run(tc.req)
			_, err := h.result()
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != tc.wantType || !appErr.NonRetryable() {
				t.Fatalf("error = %v; want a non-retryable %s", err, tc.wantType)
			}
			if got := guard.TypeOf(contract.FromFailure(err)); got != tc.wantType {
				t.Errorf("GuardError type = %q; want %q", got, tc.wantType)
			}
			if len(h.timers) != 0 {
				t.Errorf("timers %v were started; want none (no wait)", h.timers)
			}
			if len(h.started) != 0 {
				t.Errorf("%d activities started; want none", len(h.started))
			}
			h.wantStatuses(contract.StatusError)
			if got := len(h.logs.events(contract.EventApprovalRequested)); got != 0 {
				t.Errorf("%d approval.requested events; want 0", got)
			}
		})
	}
}

func TestFinalStatusFollowsTheResult(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result guard.Result
		want   string
	}{
		{"exit 0", guard.Result{ExitCode: 0}, contract.StatusSucceeded},
		{"exit 3", guard.Result{ExitCode: 3}, contract.StatusFailed},
		{"limit killed", guard.Result{ExitCode: 137, Outcome: guard.OutcomeMemoryLimit}, contract.StatusFailed},
		{"timed out", guard.Result{TimedOut: true}, contract.StatusTimedOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, &fakeBackend{Result: tc.result}, activities.Config{})
			req := pyRequest()
			dg := h.digest(req)
			h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
			h.run(req)
			res, err := h.result()
			if err != nil {
				t.Fatalf("workflow error %v; a run's outcome is a result, not an error", err)
			}
			if tc.result.TimedOut && (res.ExitCode != -1 || res.OK) {
				t.Errorf("timed-out result = %+v; want exit -1, not ok", res)
			}
			h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusRunning, tc.want)
		})
	}
}

func TestBackendUnreachableBeforeStartIsRetried(t *testing.T) {
	b := okBackend()
	b.FailFirst = 2
	b.FailErr = &guard.IntegrationError{Op: "fake: connect", Err: errors.New("connection refused")}
	h := newHarness(t, b, activities.Config{StartBackoff: 3 * time.Second, MaxStartBackoff: 4 * time.Second})
	req := pyRequest()
	dg := h.digest(req)
	h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
	h.run(req)
	res, err := h.result()
	if err != nil || !res.OK {
		t.Fatalf("result %+v, %v; want ok after retries", res, err)
	}
	calls, runs := b.counts()
	if calls != 3 || runs != 1 {
		t.Errorf("backend calls %d, runs %d; want 3 calls and 1 run", calls, runs)
	}
	if st := h.status(); st.RunAttempts != 3 {
		t.Errorf("run attempts = %d; want 3", st.RunAttempts)
	}
	// The approval timer, then the two backoffs, doubling up to the maximum.
	if want := []time.Duration{approvalTimeout, 3 * time.Second, 4 * time.Second}; fmt.Sprint(h.timers) != fmt.Sprint(want) {
		t.Errorf("timers %v; want %v", h.timers, want)
	}
}

func TestBackendUnreachableGivesUpAfterStartAttempts(t *testing.T) {
	b := okBackend()
	b.FailFirst = 100
	b.FailErr = &guard.IntegrationError{Op: "fake: connect", Err: errors.New("connection refused")}
	h := newHarness(t, b, activities.Config{StartAttempts: 3, StartBackoff: time.Second})
	req := pyRequest()
	dg := h.digest(req)
	h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
	h.run(req)
	_, err := h.result()
	var ie *guard.IntegrationError
	if !errors.As(contract.FromFailure(err), &ie) || ie.CodeMayHaveStarted {
		t.Fatalf("error = %v; want an IntegrationError from before the code could start", err)
	}
	if calls, runs := b.counts(); calls != 3 || runs != 0 {
		t.Errorf("backend calls %d, runs %d; want 3 calls and no run", calls, runs)
	}
	h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusRunning, contract.StatusError)
}

func TestFailureAfterStartIsNeverRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"typed, may have started", &guard.IntegrationError{Op: "fake: read result", Err: errors.New("garbled"), CodeMayHaveStarted: true}},
		{"untyped", errors.New("something broke")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := okBackend()
			b.FailFirst = 1
			b.FailErr = tc.err
			h := newHarness(t, b, activities.Config{})
			req := pyRequest()
			dg := h.digest(req)
			h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
			h.run(req)
			wantOutcomeUnknown(t, h)
			if calls, _ := b.counts(); calls != 1 {
				t.Errorf("backend called %d times; want 1", calls)
			}
			h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusRunning, contract.StatusError)
		})
	}
}

// wantOutcomeUnknown fails t unless the run ended as an IntegrationError whose code may have
// started: the approval was used and nothing runs again.
func wantOutcomeUnknown(t *testing.T, h *harness) {
	t.Helper()
	_, err := h.result()
	var ie *guard.IntegrationError
	if !errors.As(contract.FromFailure(err), &ie) || !ie.CodeMayHaveStarted || !strings.Contains(err.Error(), "outcome unknown; the approval was used") {
		t.Fatalf("error = %v; want IntegrationError, outcome unknown", err)
	}
}

// A sandbox activity that failed in a way the workflow cannot classify, or that the server
// timed out while a host's claim on the approval was held, may have run the code: the run ends
// "outcome unknown" and nothing runs again.
func TestLostWorkerEndsAsOutcomeUnknown(t *testing.T) {
	for _, tt := range []struct {
		name  string
		err   error
		claim bool
	}{
		{"heartbeat timeout with a claim held", temporal.NewHeartbeatTimeoutError(), true},
		{"panic", temporal.NewApplicationError("worker panicked", "PanicError"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, okBackend(), activities.Config{})
			req := pyRequest()
			dg := h.digest(req)
			var calls int
			h.env.OnActivity(contract.RunActivityName, mock.Anything, mock.Anything).Return(
				func(context.Context, contract.RunInput) (guard.Result, error) {
					calls++
					return guard.Result{}, tt.err
				})
			h.at(time.Minute, func() {
				if tt.claim {
					h.env.SignalWorkflow(contract.SignalSandboxClaim, contract.SandboxClaim{RunID: testRunID, ApprovalID: id1, Commitment: "sha256:held"})
				}
				h.signal(decision(id1, dg, true))
			})
			h.run(req)
			wantOutcomeUnknown(t, h)
			if calls != 1 {
				t.Errorf("sandbox activity ran %d times; want 1", calls)
			}
			h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusRunning, contract.StatusError)
		})
	}
}

func TestRunActivityOptions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfgQueue  string
		inQueue   string
		wantQueue string
	}{
		{"same queue", "", "", "default-test-taskqueue"},
		{"worker's sandbox queue", "sandboxes", "", "sandboxes"},
		{"input's queue wins", "sandboxes", "gpu-sandboxes", "gpu-sandboxes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, okBackend(), activities.Config{SandboxTaskQueue: tc.cfgQueue, HeartbeatTimeout: 7 * time.Second, ReportMargin: 2 * time.Second})
			req := pyRequest()
			req.Limits.Timeout = 12 * time.Second
			dg := h.digest(req)
			h.at(time.Minute, func() {
				if st := h.status(); st.SandboxTaskQueue != tc.wantQueue {
					t.Errorf("status shows sandbox task queue %q; want %q", st.SandboxTaskQueue, tc.wantQueue)
				}
				h.signal(signedFor(contract.Decision{ApprovalID: id1, Digest: dg, Approve: true}, dg, tc.wantQueue))
			})
			h.runInput(contract.Input{Request: req, SandboxTaskQueue: tc.inQueue})
			if _, err := h.result(); err != nil {
				t.Fatalf("workflow error: %v", err)
			}
			if len(h.started) != 1 {
				t.Fatalf("%d activities started; want 1", len(h.started))
			}
			info := h.started[0]
			if info.TaskQueue != tc.wantQueue {
				t.Errorf("task queue = %q; want %q", info.TaskQueue, tc.wantQueue)
			}
			if want := 12*time.Second + guard.DefaultGrace + 2*time.Second; info.StartToCloseTimeout != want {
				t.Errorf("StartToCloseTimeout = %s; want timeout + grace + margin = %s", info.StartToCloseTimeout, want)
			}
			if info.HeartbeatTimeout != 7*time.Second {
				t.Errorf("HeartbeatTimeout = %s; want 7s", info.HeartbeatTimeout)
			}

		})
	}
}

func TestRunHeartbeatsWhileTheCodeRuns(t *testing.T) {
	b := okBackend()
	b.Delay = 2500 * time.Millisecond
	h := newHarness(t, b, activities.Config{HeartbeatTimeout: time.Second})
	req := pyRequest()
	dg := h.digest(req)
	h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
	h.run(req)
	// Without heartbeats the test environment times the activity out after 1 s.
	if res, err := h.result(); err != nil || !res.OK {
		t.Fatalf("result %+v, %v; want ok", res, err)
	}
	h.mu.Lock()
	beats := h.beats
	h.mu.Unlock()
	if beats < 3 {
		t.Errorf("%d heartbeats in 2.5 s with a 1 s heartbeat timeout; want at least 3", beats)
	}
}

// retryingWorkflow schedules the sandbox activity with a Temporal retry policy, which RunCode
// never does, to show the activity refuses a second attempt.
func retryingWorkflow(ctx workflow.Context, in contract.RunInput) (guard.Result, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, InitialInterval: time.Second},
	})
	var res guard.Result
	err := workflow.ExecuteActivity(ctx, contract.RunActivityName, in).Get(ctx, &res)
	return res, err
}

func TestRunActivityRefusesASecondAttempt(t *testing.T) {
	b := okBackend()
	b.FailFirst = 1
	b.FailErr = &guard.IntegrationError{Op: "fake: connect", Err: errors.New("refused")}
	h := newHarness(t, b, activities.Config{})
	h.env.RegisterWorkflow(retryingWorkflow)
	c, err := testPolicy.Check(pyRequest(), "fake")
	if err != nil {
		t.Fatal(err)
	}
	h.env.ExecuteWorkflow(retryingWorkflow, contract.RunInput{Checked: c, Decision: decision(id1, c.Digest, true)})
	err = h.env.GetWorkflowError()
	var ie *guard.IntegrationError
	if !errors.As(contract.FromFailure(err), &ie) || !ie.CodeMayHaveStarted {
		t.Fatalf("error = %v; want IntegrationError refusing the second attempt", err)
	}
	if calls, _ := b.counts(); calls != 1 {
		t.Errorf("backend called %d times; want 1", calls)
	}
}

func TestEventsCarryContentOnlyWhenAsked(t *testing.T) {
	const code = "print('the-secret-code')"
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprint("capture_content=", capture), func(t *testing.T) {
			h := newHarness(t, &fakeBackend{Result: guard.Result{Stdout: []byte("the-secret-output")}}, activities.Config{})
			req := guard.Request{Code: code, Settings: guard.Settings{Env: map[string]string{"TOKEN": "the-secret-env"}, CaptureContent: capture}}
			dg := h.digest(req)
			h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
			h.at(time.Minute, func() { h.signal(decision(id2, "sha256:bad", true)) })
			h.run(req)
			if _, err := h.result(); err != nil {
				t.Fatalf("workflow error: %v", err)
			}
			var all strings.Builder
			for _, typ := range []contract.EventType{contract.EventApprovalRequested, contract.EventApprovalGranted, contract.EventApprovalRejected} {
				recs := h.logs.events(typ)
				if len(recs) == 0 {
					t.Errorf("no %s event", typ)
				}
				for _, r := range recs {
					fmt.Fprintf(&all, "%s %v\n", r.msg, r.keyvals)
				}
			}
			evs := h.sink.Events()
			if len(evs) != 2 || evs[0].Type != contract.EventSandboxStarted || evs[1].Type != contract.EventSandboxFinished {
				t.Fatalf("sink events %v; want sandbox.started, sandbox.finished", evs)
			}
			for _, e := range evs {
				fmt.Fprintf(&all, "%s %v\n", e.Type, e.Data)
			}
			for _, secret := range []string{"the-secret-code", "the-secret-env", "the-secret-output"} {
				if got := strings.Contains(all.String(), secret); got != capture {
					t.Errorf("events contain %q: %t; want %t", secret, got, capture)
				}
			}
			if !strings.Contains(all.String(), dg) {
				t.Errorf("events do not carry the digest %s", dg)
			}
		})
	}
}

func TestNoSandboxWorkerEndsWithTheApprovalUnused(t *testing.T) {
	h := newHarness(t, okBackend(), activities.Config{})
	req := pyRequest()
	dg := h.digest(req)
	var calls int
	h.env.OnActivity(contract.RunActivityName, mock.Anything, mock.Anything).Return(
		func(context.Context, contract.RunInput) (guard.Result, error) {
			calls++
			return guard.Result{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		})
	h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
	h.run(req)
	_, err := h.result()
	var ie *guard.IntegrationError
	if !errors.As(contract.FromFailure(err), &ie) || ie.CodeMayHaveStarted || !strings.Contains(ie.Error(), "approval was not used") {
		t.Fatalf("error = %v; want IntegrationError saying the approval was not used, code not started", err)
	}
	if calls != 1 {
		t.Errorf("sandbox activity scheduled %d times; want 1 (never retried)", calls)
	}
	h.wantRuns(0)
	h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusRunning, contract.StatusError)
}

// The workflow accepts a passkey decision only when made on the inbox origin its check recorded
// with the reviewer keys: one made on another port of the inbox's host, or on plain http beside
// the https inbox, is refused by the update's validator; one made on the inbox's page runs, and
// the sandbox host, checking its own counters file, lets it.
func TestPasskeyDecisionOnlyFromTheInboxOrigin(t *testing.T) {
	const origin = "https://inbox.example.com"
	alice := reviewertest.NewPasskey(t, "alice", "inbox.example.com")
	dir := t.TempDir()
	file := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(file, []byte(alice.AllowedLine(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, okBackend(), activities.Config{ReviewersFile: file, PasskeyOrigin: origin, PasskeyCountersFile: filepath.Join(dir, "counters.json")})
	req := pyRequest()
	dg := h.digest(req)
	made := func(id, page string) contract.Decision {
		f := reviewertest.Fields(testWorkflowID, testRunID, dg, testTaskQueue, true)
		f.ApprovalID = id
		return alice.Decision(t, f, page, 9)
	}
	var otherPort, plainHTTP, good func() updateOutcome
	h.at(time.Minute, func() {
		otherPort = h.update(made(id1, "https://inbox.example.com:8443"))
		plainHTTP = h.update(made(id1, "http://inbox.example.com"))
	})
	h.at(2*time.Minute, func() { good = h.update(made(id2, origin)) })
	h.run(req)
	for name, o := range map[string]func() updateOutcome{"another port": otherPort, "plain http": plainHTTP} {
		if out := o(); out.accepted || out.rejected == nil || !strings.Contains(out.rejected.Error(), string(approval.ReasonWrongOrigin)) {
			t.Errorf("%s: accepted=%t rejected=%v; want refused (%s)", name, out.accepted, out.rejected, approval.ReasonWrongOrigin)
		}
	}
	if out := good(); !out.accepted {
		t.Errorf("decision made on the inbox's page: rejected %v; want accepted", out.rejected)
	}
	if res, err := h.result(); err != nil || !res.OK {
		t.Fatalf("result = %+v, %v; want ok", res, err)
	}
	h.wantRuns(1)
}

// relayedAs is d with its reviewer changed after signing, as whoever relays it could.
func relayedAs(d contract.Decision, reviewer string) contract.Decision {
	d.Reviewer = reviewer
	return d
}

// The reviewers file's key may sign for alice, bob and carol: each is recorded as the one the
// statement signed, also when the decision itself names nobody (version 1 recorded the key's
// first principal, alice, then).
func TestTheSignedPrincipalIsTheReviewer(t *testing.T) {
	for _, as := range []string{"bob", "carol"} {
		h := newHarness(t, okBackend(), activities.Config{})
		req := pyRequest()
		dg := h.digest(req)
		d := signed(contract.Decision{ApprovalID: id1, Digest: dg, Approve: true, Reviewer: as}, dg)
		d.Reviewer = "" // the statement alone names the reviewer
		h.at(time.Minute, func() { h.signal(d) })
		h.run(req)
		res, err := h.result()
		if err != nil || res.Reviewer != as {
			t.Errorf("signed as %s: result %+v, %v; want the run approved by %s", as, res, err, as)
		}
		if st := h.status(); st.Decision == nil || st.Decision.Reviewer != as || st.StatementVersion != approval.StatementVersion2 {
			t.Errorf("signed as %s: status %+v; want the decision by %s, statement version 2", as, st, as)
		}
	}
}

// TestLostAttemptWithoutAClaimRunsAgain: the server timed out sandbox activities while no claim
// on the approval was held (none was made, or each was released: by the worker that adopted a
// dead host's spool): their code never started, so the run schedules a fresh activity, up to
// its start attempts, and ends with the result of the one that ran; with every attempt timed
// out so, it ends as an IntegrationError whose code never started (the approval unused), not
// "outcome unknown".
func TestLostAttemptWithoutAClaimRunsAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lost    int // attempts timed out before one succeeds
		wantErr bool
	}{
		{"one lost, then a result", 1, false},
		{"every attempt lost", 99, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, okBackend(), activities.Config{})
			req := pyRequest()
			dg := h.digest(req)
			var calls int
			h.env.OnActivity(contract.RunActivityName, mock.Anything, mock.Anything).Return(
				func(context.Context, contract.RunInput) (guard.Result, error) {
					calls++
					if calls <= tc.lost {
						return guard.Result{}, temporal.NewHeartbeatTimeoutError()
					}
					return guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("ran once\n")}, nil
				})
			h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
			h.run(req)
			res, err := h.result()
			if !tc.wantErr {
				if err != nil || string(res.Stdout) != "ran once\n" || calls != 2 {
					t.Fatalf("result %+v, %v after %d activities; want the second one's result", res, err, calls)
				}
				return
			}
			var ie *guard.IntegrationError
			if !errors.As(contract.FromFailure(err), &ie) || ie.CodeMayHaveStarted || !strings.Contains(err.Error(), "approval is unused") {
				t.Fatalf("error %v; want an IntegrationError whose code never started", err)
			}
			if want := activities.DefaultStartAttempts; calls != want {
				t.Errorf("%d activities; want %d (the start attempts)", calls, want)
			}
		})
	}
}
