package workflows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// testLateWait is the late-result wait the tests' check records.
const testLateWait = 2 * time.Minute

// lateRun is a run whose sandbox activity the server times out after a host claimed the
// approval, and what the tests need to play that host.
type lateRun struct {
	*harness
	host   *hosttest.Host
	digest string
	// activityID is the timed-out activity's id, once it ran.
	activityID string
	// claim and released are commitments of claims signalled before the approval: claim stays
	// held, released is released by its host.
	claim, released string
	// versions counts how often the workflow asked lateResultChange.
	versions int
	// calls counts the sandbox activities; after, when set, answers those after the first.
	calls int
	after func(activityID string) (guard.Result, error)
}

// commitment returns the commitment of secret and the claim's release.
func commitment(secret string) (string, contract.SandboxClaim) {
	sum := sha256.Sum256([]byte(secret))
	c := "sha256:" + hex.EncodeToString(sum[:])
	return c, contract.SandboxClaim{RunID: testRunID, ApprovalID: id1, Commitment: c, Secret: hex.EncodeToString([]byte(secret))}
}

// newLateRun makes a run whose check records host's hosts file (unless noHosts) and wait as the
// late-result wait, whose sandbox activity ends with a timeout of the given type, and whose
// history holds a claim (unless noClaim) and a released claim before the approval, at 1 minute.
func newLateRun(t *testing.T, wait time.Duration, timeout enumspb.TimeoutType, noHosts, noClaim bool) *lateRun {
	t.Helper()
	cfg := activities.Config{ReviewersFile: reviewertest.WriteAllowedSigners(t, t.TempDir(), testReviewer()), Policy: testPolicy, Backend: okBackend()}
	r := &lateRun{host: hosttest.New(t, "host-a")}
	if !noHosts {
		withHost(r.host)(&cfg)
	}
	r.harness = newHarness(t, okBackend(), cfg)
	checker, err := activities.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.env.OnActivity(contract.CheckActivityName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.CheckInput) (contract.CheckResult, error) {
			res, err := checker.SandboxCheck(ctx, in)
			res.Run.LateResultWait = wait
			return res, err
		})
	r.env.OnActivity(contract.RunActivityName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, _ contract.RunInput) (guard.Result, error) {
			r.calls++
			if r.calls > 1 && r.after != nil {
				return r.after(activity.GetInfo(ctx).ActivityID)
			}
			r.activityID = activity.GetInfo(ctx).ActivityID
			return guard.Result{}, temporal.NewTimeoutError(timeout, nil)
		})
	r.env.OnGetVersion(lateResultChange, workflow.DefaultVersion, 2).Run(func(mock.Arguments) { r.versions++ }).Return(workflow.Version(2))
	r.digest = r.harness.digest(pyRequest())
	var release contract.SandboxClaim
	r.claim, _ = commitment("the held claim's secret")
	r.released, release = commitment("the released claim's secret")
	r.at(30*time.Second, func() {
		if !noClaim {
			r.env.SignalWorkflow(contract.SignalSandboxClaim, contract.SandboxClaim{RunID: testRunID, ApprovalID: id1, Commitment: r.claim})
		}
		r.env.SignalWorkflow(contract.SignalSandboxClaim, contract.SandboxClaim{RunID: testRunID, ApprovalID: id1, Commitment: r.released})
		r.env.SignalWorkflow(contract.SignalSandboxClaim, release)
	})
	r.at(time.Minute, func() { r.signal(decision(id1, r.digest, true)) })
	return r
}

// lateResult is the late result signer's key signs for run: the result the host ran, with its
// receipt; change, if set, alters the statement before it is signed.
func (r *lateRun) lateResult(signer *hosttest.Host, change func(*receipt.Run)) contract.LateResult {
	r.t.Helper()
	st := r.status()
	res := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("late-output\n"), Duration: time.Second,
		Digest: r.digest, Backend: "fake", ApprovalID: id1, Reviewer: st.Decision.Reviewer}
	started := time.Now()
	approvals := []receipt.Approval{{ID: id1, Reviewer: st.Decision.Reviewer, Fingerprint: st.Decision.Fingerprint}}
	run := receipt.Run{WorkflowID: testWorkflowID, RunID: testRunID, ActivityID: r.activityID, Digest: r.digest, Approvals: approvals,
		Host: signer.Receipt(), Backend: "fake", Started: started, Ended: started.Add(2 * time.Second), Claim: r.claim}
	if change != nil {
		change(&run)
	}
	rec, err := receipt.Sign(signer.Signer, receipt.New(run, res))
	if err != nil {
		r.t.Fatal(err)
	}
	res.Receipt = &rec
	return contract.LateResult{RunID: testRunID, ActivityID: r.activityID, Result: res}
}

func (r *lateRun) send(lr contract.LateResult) { r.env.SignalWorkflow(contract.SignalLateResult, lr) }

// TestLateResultIsTakenAfterATimeout: after the server timed out the sandbox activity of a run
// whose host claimed the approval, the host's late result, signed with that claim, ends the run
// as its result, marked recovered with the activity and the kind of timeout; a forged one
// before it is refused and the wait goes on.
func TestLateResultIsTakenAfterATimeout(t *testing.T) {
	for _, tc := range []struct {
		timeout enumspb.TimeoutType
		want    string
	}{
		{enumspb.TIMEOUT_TYPE_HEARTBEAT, "heartbeat"},
		{enumspb.TIMEOUT_TYPE_START_TO_CLOSE, "start_to_close"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			r := newLateRun(t, testLateWait, tc.timeout, false, false)
			r.at(time.Minute+20*time.Second, func() { r.send(r.lateResult(hosttest.New(t, "host-a"), nil)) })
			r.at(time.Minute+30*time.Second, func() {
				if st := r.status(); st.State != contract.StatusRunning || st.LateResultDeadline.IsZero() {
					t.Errorf("status while waiting: %s, deadline %v; want running with a late-result deadline", st.State, st.LateResultDeadline)
				}
				r.send(r.lateResult(r.host, nil))
			})
			r.run(pyRequest())
			res, err := r.result()
			if err != nil || string(res.Stdout) != "late-output\n" || res.Receipt == nil {
				t.Fatalf("result %+v, %v; want the late result", res, err)
			}
			want := guard.Recovered{How: guard.RecoveredLateResult, ActivityID: r.activityID, Timeout: tc.want}
			if rc := res.Recovered; rc == nil || rc.At.IsZero() || rc.How != want.How || rc.ActivityID != want.ActivityID || rc.Timeout != want.Timeout {
				t.Errorf("recovered %+v; want %+v", rc, want)
			}
			r.wantStatuses(contract.StatusAwaitingApproval, contract.StatusRunning, contract.StatusSucceeded)
			if st := r.status(); st.RejectedLateResults != 1 || st.State != contract.StatusSucceeded {
				t.Errorf("status %s with %d rejected late results; want succeeded with 1", st.State, st.RejectedLateResults)
			}
			if n := len(r.logs.events(contract.EventSandboxRecovered)); n != 1 || r.versions != 1 {
				t.Errorf("%d %s events, %s asked %d times; want 1 and 1", n, contract.EventSandboxRecovered, lateResultChange, r.versions)
			}
		})
	}
}

// TestForgedLateResultsAreRefused: late results that are not the timed-out activity's host's
// are each refused, counted and logged, and the run ends "outcome unknown" at the wait's end.
func TestForgedLateResultsAreRefused(t *testing.T) {
	r := newLateRun(t, testLateWait, enumspb.TIMEOUT_TYPE_HEARTBEAT, false, false)
	other := hosttest.New(t, "host-a")
	forgeries := []struct {
		field string
		lr    func() contract.LateResult
	}{
		{receipt.FieldHostKey, func() contract.LateResult { return r.lateResult(other, nil) }},
		{"run_id", func() contract.LateResult {
			return r.lateResult(r.host, func(run *receipt.Run) { run.RunID = "another-run-id" })
		}},
		{"stdout", func() contract.LateResult {
			lr := r.lateResult(r.host, nil)
			lr.Result.Stdout[0] ^= 1
			return lr
		}},
		{"claim", func() contract.LateResult {
			return r.lateResult(r.host, func(run *receipt.Run) { run.Claim = r.released })
		}},
		{"activity_id", func() contract.LateResult {
			return r.lateResult(r.host, func(run *receipt.Run) { run.ActivityID = r.activityID + "0" })
		}},
	}
	for i, f := range forgeries {
		r.at(time.Minute+time.Duration(i+1)*10*time.Second, func() { r.send(f.lr()) })
	}
	r.run(pyRequest())
	wantOutcomeUnknown(t, r.harness)
	if _, err := r.result(); !strings.Contains(err.Error(), "no late result within "+heartbeatLateWait(t, pyRequest()).String()) {
		t.Errorf("error %v; want it to say no late result came within the wait", err)
	}
	refused := r.logs.events(contract.EventReceiptRefused)
	if len(refused) != len(forgeries) {
		t.Fatalf("%d receipt.refused events; want %d", len(refused), len(forgeries))
	}
	for i, f := range forgeries {
		if msg := keyval(refused[i], "error"); !strings.Contains(msg, "("+f.field+")") {
			t.Errorf("forgery %d refused with %q; want a refusal of %s", i, msg, f.field)
		}
	}
	if st := r.status(); st.RejectedLateResults != len(forgeries) || !strings.Contains(st.LastLateRejection, "(activity_id)") {
		t.Errorf("status counts %d rejected late results, last %q; want %d, the activity id's", st.RejectedLateResults, st.LastLateRejection, len(forgeries))
	}
	if n := len(r.logs.events(contract.EventSandboxRecovered)); n != 0 {
		t.Errorf("%d %s events; want none", n, contract.EventSandboxRecovered)
	}
}

// heartbeatLateWait is the late-result wait after a heartbeat timeout of req's run: the time its
// code may still run (its timeout and the grace), then the recorded wait.
func heartbeatLateWait(t *testing.T, req guard.Request) time.Duration {
	t.Helper()
	c, err := testPolicy.Check(req, "fake")
	if err != nil {
		t.Fatal(err)
	}
	return c.Limits.Timeout + guard.DefaultGrace + testLateWait
}

// keyval returns the value of key in rec, or "".
func keyval(rec logRecord, key string) string {
	for i := 0; i+1 < len(rec.keyvals); i += 2 {
		if rec.keyvals[i] == key {
			s, _ := rec.keyvals[i+1].(string)
			return s
		}
	}
	return ""
}

// TestNoLateResultEndsOutcomeUnknownAfterTheWait: with no late result, the run waits the
// recorded wait (a workflow timer) and ends "outcome unknown"; a signal that is no late result
// at all does not hold the wait past its deadline.
func TestNoLateResultEndsOutcomeUnknownAfterTheWait(t *testing.T) {
	r := newLateRun(t, testLateWait, enumspb.TIMEOUT_TYPE_HEARTBEAT, false, false)
	r.at(time.Minute+30*time.Second, func() { r.env.SignalWorkflow(contract.SignalLateResult, "not a late result") })
	r.run(pyRequest())
	wantOutcomeUnknown(t, r.harness)
	want := heartbeatLateWait(t, pyRequest())
	if _, err := r.result(); !strings.Contains(err.Error(), "no late result within "+want.String()) {
		t.Errorf("error %v; want it to name the wait", err)
	}
	if timers := r.timers; len(timers) != 2 || timers[1] != want {
		t.Errorf("timers %v; want the approval timeout's, then one of %s", timers, want)
	}
	r.wantStatuses(contract.StatusAwaitingApproval, contract.StatusRunning, contract.StatusError)
}

// TestNoLateResultWait: without a recorded wait or without hosts' keys the run ends "outcome
// unknown" at once, as before late results, and records no version marker. (Without a held
// claim nothing started: TestLostAttemptWithoutAClaimRunsAgain.)
func TestNoLateResultWait(t *testing.T) {
	for _, tc := range []struct {
		name             string
		wait             time.Duration
		noHosts, noClaim bool
	}{
		{"no wait", 0, false, false},
		{"no hosts", testLateWait, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLateRun(t, tc.wait, enumspb.TIMEOUT_TYPE_HEARTBEAT, tc.noHosts, tc.noClaim)
			r.run(pyRequest())
			wantOutcomeUnknown(t, r.harness)
			if _, err := r.result(); strings.Contains(err.Error(), "late result") {
				t.Errorf("error %v; want no word of a late result", err)
			}
			if r.versions != 0 || len(r.timers) != 1 {
				t.Errorf("%s asked %d times, timers %v; want none, and only the approval timeout's", lateResultChange, r.versions, r.timers)
			}
		})
	}
}

// TestCancelWhileWaitingForALateResult: a cancel accepted during the wait ends it, outcome
// unknown (a claim is held: the code may have run), and a late result after it is not taken.
func TestCancelWhileWaitingForALateResult(t *testing.T) {
	r := newLateRun(t, testLateWait, enumspb.TIMEOUT_TYPE_HEARTBEAT, false, false)
	var cancel func() cancelOutcome
	r.at(time.Minute+30*time.Second, func() { cancel = r.cancelRun(contract.CancelRequest{By: "bob", Reason: "too slow"}) })
	r.run(pyRequest())
	wantOutcomeUnknown(t, r.harness)
	if _, err := r.result(); !strings.Contains(err.Error(), "cancelled while waiting for its late result") {
		t.Errorf("error %v; want it to say the wait was cancelled", err)
	}
	if c := cancel(); !c.accepted || c.result.State != contract.StatusRunning {
		t.Errorf("cancel %+v; want accepted while running", c)
	}
	r.wantStatuses(contract.StatusAwaitingApproval, contract.StatusRunning, contract.StatusError)
}

// TestLateResultWhileNothingWaitsIsDropped: a late result signalled to a run whose activity
// ends in time is read and dropped: the run ends with its host's result and completes.
func TestLateResultWhileNothingWaitsIsDropped(t *testing.T) {
	host := hosttest.New(t, "host-a")
	cfg := activities.Config{}
	withHost(host)(&cfg)
	h := newHarness(t, okBackend(), cfg)
	dg := h.digest(pyRequest())
	forged := contract.LateResult{RunID: testRunID, ActivityID: "5", Result: guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("forged\n")}}
	h.at(30*time.Second, func() { h.env.SignalWorkflow(contract.SignalLateResult, forged) })
	h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
	h.run(pyRequest())
	res, err := h.result()
	if err != nil || string(res.Stdout) != "hello-output\n" || res.Recovered != nil {
		t.Fatalf("result %+v, %v; want the host's own result, not recovered", res, err)
	}
	if st := h.status(); st.RejectedLateResults != 0 || !st.LateResultDeadline.IsZero() {
		t.Errorf("status %+v; want no late result waited for or counted", st)
	}
}

// TestReleaseDuringTheWaitRunsAgain: the server timed out the sandbox activity while a claim was
// held, and the run waits for its late result; the worker that adopted the dead host's spool
// finds the code never went and releases the claim with its secret: the wait ends and the run
// schedules a fresh activity, whose result it ends with. A release that does not match the
// claim's secret leaves the wait as it was.
func TestReleaseDuringTheWaitRunsAgain(t *testing.T) {
	r := newLateRun(t, testLateWait, enumspb.TIMEOUT_TYPE_HEARTBEAT, false, false)
	r.after = func(id string) (guard.Result, error) {
		lr := r.lateResult(r.host, func(run *receipt.Run) { run.ActivityID, run.Claim = id, "" })
		return lr.Result, nil
	}
	_, release := commitment("the held claim's secret")
	r.at(time.Minute+10*time.Second, func() {
		forged := release
		forged.Secret = hex.EncodeToString([]byte("another secret"))
		r.env.SignalWorkflow(contract.SignalSandboxClaim, forged)
	})
	r.at(time.Minute+20*time.Second, func() {
		if st := r.status(); st.State != contract.StatusRunning || st.LateResultDeadline.IsZero() || r.calls != 1 {
			t.Errorf("after a forged release: %s, deadline %v, %d activities; want still waiting after one", st.State, st.LateResultDeadline, r.calls)
		}
		r.env.SignalWorkflow(contract.SignalSandboxClaim, release)
	})
	r.run(pyRequest())
	res, err := r.result()
	if err != nil || string(res.Stdout) != "late-output\n" || res.Recovered != nil || r.calls != 2 {
		t.Fatalf("result %+v, %v after %d activities; want the fresh activity's result", res, err, r.calls)
	}
	if st := r.status(); st.RunAttempts != 2 {
		t.Errorf("run attempts %d; want 2", st.RunAttempts)
	}
}
