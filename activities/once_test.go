package activities

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
)

// What a namespace writer that answers a run's workflow tasks itself can make of its history: the
// sandbox activity runs only when no sandbox activity scheduled before it may have used the
// approval.
func TestFirstUseReadsTheRunsHistory(t *testing.T) {
	const (
		completed = enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
		timedOut  = enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT
		canceled  = enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED
	)
	mine := historytest.Scheduled(20, "mine")
	secretA := []byte("the secret of a's host")
	claimOfA := historytest.Claimed(6, contract.SandboxClaim{ActivityID: "a", Commitment: commitment(secretA)})
	releaseOfA := historytest.Claimed(8, contract.SandboxClaim{ActivityID: "a", Commitment: commitment(secretA), Secret: hex.EncodeToString(secretA)})
	claimOfB := historytest.Claimed(6, contract.SandboxClaim{ActivityID: "b", Commitment: "sha256:b"})
	for _, tc := range []struct {
		name    string
		history historytest.Events
		want    string // "" to run
	}{
		{"the only one", historytest.Events{historytest.Other(5, "x"), mine}, ""},
		{"after failures from before the start", historytest.Events{
			historytest.Scheduled(5, "a"), historytest.Failed(7, 5, guard.TypeIntegrationError, true),
			historytest.Scheduled(11, "b"), historytest.Failed(13, 11, guard.TypeIntegrationError, true), mine}, ""},
		{"one scheduled after it", historytest.Events{mine, historytest.Scheduled(21, "later")}, ""},
		{"after a completed one", historytest.Events{historytest.Scheduled(5, "a"), historytest.Ended(7, 5, completed), mine}, `"a" (completed)`},
		{"beside one still open", historytest.Events{historytest.Scheduled(5, "a"), mine}, `"a" (scheduled and not ended)`},
		{"after one whose code may have started", historytest.Events{historytest.Scheduled(5, "a"), historytest.Failed(7, 5, guard.TypeIntegrationError, false), mine}, `"a" (failed)`},
		{"after a refused one", historytest.Events{historytest.Scheduled(5, "a"), historytest.Failed(7, 5, guard.TypeConfigError, false), mine}, `"a" (failed)`},
		{"after a retryable failure of another type", historytest.Events{historytest.Scheduled(5, "a"), historytest.Failed(7, 5, "Forged", true), mine}, `"a" (failed)`},
		// A timed-out one's code started only if it claimed before its end and kept the claim.
		{"after a timed-out one that claimed", historytest.Events{historytest.Scheduled(5, "a"), claimOfA, historytest.Ended(7, 5, timedOut), mine}, `"a" (timed out)`},
		{"after a timed-out one whose claim was released", historytest.Events{historytest.Scheduled(5, "a"), claimOfA, historytest.Ended(7, 5, timedOut), releaseOfA, mine}, ""},
		{"after a timed-out one that never claimed", historytest.Events{historytest.Scheduled(5, "a"), historytest.Ended(7, 5, timedOut), mine}, ""},
		{"after a timed-out one that claimed after its end", historytest.Events{historytest.Scheduled(5, "a"), historytest.Ended(7, 5, timedOut), claimOfA, mine}, ""},
		{"after a timed-out one whose other activity claimed", historytest.Events{historytest.Scheduled(5, "a"), claimOfB, historytest.Ended(7, 5, timedOut), mine}, `activity "b" claimed`},
		{"after a cancelled one", historytest.Events{historytest.Scheduled(5, "a"), historytest.Ended(7, 5, canceled), mine}, `"a" (cancelled)`},
		{"its id reused after a completed one", historytest.Events{historytest.Scheduled(5, "mine"), historytest.Ended(7, 5, completed), mine}, `"mine" (completed)`},
		{"not in the history", historytest.Events{historytest.Scheduled(5, "a")}, `schedules no sandbox activity "mine"`},
		{"only closed in the history", historytest.Events{historytest.Scheduled(5, "mine"), historytest.Ended(7, 5, completed)}, `schedules no sandbox activity "mine"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			history := append(tc.history, historytest.Claimed(30, contract.SandboxClaim{ActivityID: "mine", Commitment: "sha256:mine"}))
			wantFirstUse(t, firstUse(context.Background(), history, activity.Info{ActivityID: "mine"}, "sha256:mine"), tc.want)
		})
	}
}

// wantFirstUse checks firstUse's answer: nil when want is "", else an ApprovalRefused (the
// approval already used, or not scheduled) naming want.
func wantFirstUse(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("firstUse: %v; want it to run", err)
	case want == "":
	case err == nil || guard.TypeOf(err) != guard.TypeApprovalRefused || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nothing ran"):
		t.Fatalf("firstUse: %v; want an ApprovalRefused saying nothing ran, naming %s", err, want)
	}
}

// A history that cannot be read leaves the approval unused: the workflow tries a fresh activity.
func TestFirstUseUnreadableHistoryIsRetryable(t *testing.T) {
	err := firstUse(context.Background(), historytest.Unreadable{}, activity.Info{ActivityID: "mine"}, "sha256:mine")
	if !guard.Retryable(err) {
		t.Fatalf("firstUse: %v; want a retryable IntegrationError (the code did not start)", err)
	}
}

// The sandbox activity refuses before the backend is called when the history says the approval
// was used.
func TestRunRefusesAnApprovalUsedEarlierInTheRun(t *testing.T) {
	b := &echoBackend{Result: guard.Result{ExitCode: 0}}
	sink := &MemorySink{}
	a, err := New(Config{Backend: b, Sink: sink, ReviewersFile: reviewersFile(t),
		History: &historytest.Log{Events: historytest.Events{historytest.Scheduled(5, "a"), historytest.Ended(7, 5, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED),
			historytest.Scheduled(11, testActivityID)}}})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	_, err = runActivity(t, a, approved(t, c, fields(c.Digest)))
	var ar *guard.ApprovalRefused
	if !errors.As(contract.FromFailure(err), &ar) || ar.Reason != guard.RefusedAlreadyUsed || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("run: %v; want an ApprovalRefused (already_used) saying the approval was already used", err)
	}
	evs := sink.Events()
	if len(b.ran) != 0 || len(evs) != 1 || evs[0].Type != contract.EventSandboxRefused || evs[0].Data["reason"] != guard.RefusedAlreadyUsed {
		t.Errorf("backend ran %d times, events %v; want no run and only sandbox.refused (already_used)", len(b.ran), evs)
	}
}

// What anyone who can signal a run can make of the claims in its history: the sandbox activity
// runs only when every claim before its own was released with the secret it committed to.
func TestFirstUseNeedsEveryEarlierClaimReleased(t *testing.T) {
	secret := []byte("the secret of a's host")
	other := []byte("another secret")
	claimA := historytest.Claimed(6, contract.SandboxClaim{ActivityID: "a", Commitment: commitment(secret)})
	release := func(id int64, secret []byte) *historypb.HistoryEvent {
		return historytest.Claimed(id, contract.SandboxClaim{ActivityID: "a", Commitment: commitment(secret), Secret: hex.EncodeToString(secret)})
	}
	scheduled := historytest.Events{historytest.Scheduled(5, "a"), historytest.Failed(7, 5, guard.TypeIntegrationError, true), historytest.Scheduled(20, "mine")}
	mine := historytest.Claimed(30, contract.SandboxClaim{ActivityID: "mine", Commitment: "sha256:mine"})
	encrypted := historytest.Claimed(8, contract.SandboxClaim{ActivityID: "x", Commitment: "sha256:x"})
	encrypted.GetWorkflowExecutionSignaledEventAttributes().Input.Payloads[0].Metadata["encoding"] = []byte("binary/encrypted")
	for _, tc := range []struct {
		name   string
		claims historytest.Events
		want   string // "" to run
	}{
		{"its own only", historytest.Events{mine}, ""},
		{"after a released claim", historytest.Events{claimA, release(9, secret), mine}, ""},
		{"after a claim released after its own", historytest.Events{claimA, mine, release(31, secret)}, ""},
		{"before a later claim", historytest.Events{mine, claimA}, ""},
		{"after a claim a reset copied from another run", historytest.Events{
			historytest.Claimed(6, contract.SandboxClaim{RunID: "the run before the reset", ActivityID: "a", Commitment: commitment(secret)}), mine}, ""},
		{"after signals that are no claim", historytest.Events{
			historytest.Signaled(6, "approval", mine.GetWorkflowExecutionSignaledEventAttributes().Input),
			historytest.Signaled(7, contract.SignalSandboxClaim, nil), encrypted, mine}, ""},
		{"after a claim never released", historytest.Events{claimA, mine}, `sandbox activity "a" claimed the approval`},
		{"after a claim released with another secret", historytest.Events{claimA, release(9, other), mine}, `sandbox activity "a" claimed`},
		{"after a release that names the claim but not its secret", historytest.Events{claimA,
			historytest.Claimed(9, contract.SandboxClaim{ActivityID: "a", Commitment: commitment(secret), Secret: hex.EncodeToString(other)}), mine}, `sandbox activity "a" claimed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFirstUse(t, firstUse(context.Background(), append(append(historytest.Events{}, scheduled...), tc.claims...), activity.Info{ActivityID: "mine"}, "sha256:mine"), tc.want)
		})
	}
	// A history that never shows the host's own claim (its workflow tasks held in flight) is a
	// failure from before the start.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := firstUse(ctx, scheduled, activity.Info{ActivityID: "mine"}, "sha256:mine"); !guard.Retryable(err) {
		t.Errorf("firstUse without its claim: %v; want a retryable IntegrationError", err)
	}
}

// A failure sent by id while the code still runs looks like one from before the start; the claim
// its host never released still refuses the fresh activity that follows it, on this host or any
// other. A failure that really was from before the start releases the claim for the next one.
func TestRunClaimRefusesASecondStartOnAnyHost(t *testing.T) {
	b := &echoBackend{Err: &guard.IntegrationError{Op: "connect", Err: context.DeadlineExceeded}}
	log := &historytest.Log{ScheduleCaller: true}
	a, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), History: log})
	if err != nil {
		t.Fatal(err)
	}
	other := &echoBackend{}
	host2, err := New(Config{Backend: other, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), History: log})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	in := approved(t, c, fields(c.Digest))
	if _, err := runActivity(t, a, in); !guard.Retryable(contract.FromFailure(err)) {
		t.Fatalf("first run: %v; want the backend's retryable failure", err)
	}
	b.Err = nil
	if _, err := runActivity(t, a, in); err != nil {
		t.Fatalf("run after a failure from before the start: %v; want it to run", err)
	}
	for name, host := range map[string]*Activities{"this host": a, "another host": host2} {
		_, err = runActivity(t, host, in)
		var ar *guard.ApprovalRefused
		if !errors.As(contract.FromFailure(err), &ar) || ar.Reason != guard.RefusedAlreadyUsed || !strings.Contains(err.Error(), "never released it") {
			t.Fatalf("a third run on %s: %v; want an ApprovalRefused (already_used) naming the unreleased claim", name, err)
		}
	}
	if len(b.ran) != 2 || len(other.ran) != 0 {
		t.Errorf("the backends were called %d and %d times; want 2 (the failure, then the one run) and 0", len(b.ran), len(other.ran))
	}
	// Claim, release, claim, then the two refused hosts' claims and their releases: all plain JSON,
	// which any host reads whatever payload codec its workers use.
	signals := log.Signals(testWorkflowID, testRunID)
	if len(signals) != 7 {
		t.Fatalf("%d signals in the run; want 7", len(signals))
	}
	for _, ev := range signals {
		p := ev.GetWorkflowExecutionSignaledEventAttributes().GetInput().GetPayloads()[0]
		if string(p.GetMetadata()["encoding"]) != "json/plain" {
			t.Errorf("a claim's payload is %q; want json/plain", p.GetMetadata()["encoding"])
		}
	}
}

// The server holds a signal that arrives while a workflow task is in flight until the task
// completes: the host reads the history again until its claim shows, then runs the code.
func TestRunWaitsForItsClaimToShow(t *testing.T) {
	b := &echoBackend{}
	log := &historytest.Log{ScheduleCaller: true, HiddenReads: 3}
	a, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), History: log})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	if _, err := runActivity(t, a, approved(t, c, fields(c.Digest))); err != nil || len(b.ran) != 1 {
		t.Fatalf("run: %v, backend called %d times; want one run once the claim showed", err, len(b.ran))
	}
	if log.Reads() != 4 {
		t.Errorf("%d history reads; want 4 (three without the claim, then the one with it)", log.Reads())
	}
}

// A claim that cannot be signalled leaves the approval for the workflow's fresh activity; nothing
// runs.
func TestRunClaimNotMadeIsRetryable(t *testing.T) {
	b := &echoBackend{}
	a, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t),
		History: &historytest.Log{ScheduleCaller: true, SignalErr: errors.New("unavailable")}})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	_, err = runActivity(t, a, approved(t, c, fields(c.Digest)))
	if !guard.Retryable(contract.FromFailure(err)) || len(b.ran) != 0 {
		t.Errorf("run: %v, backend called %d times; want a retryable failure and no call", err, len(b.ran))
	}
}

// A claim that cannot be released after a failure from before the start says so, and the fresh
// activity that follows is refused: without the release nobody can tell that the code never ran.
func TestRunClaimNotReleasedRefusesTheNext(t *testing.T) {
	b := &echoBackend{Err: &guard.IntegrationError{Op: "connect", Err: context.DeadlineExceeded}}
	log := &historytest.Log{ScheduleCaller: true, SignalErr: errors.New("unavailable"), SignalErrAfter: 1}
	a, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), History: log})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	in := approved(t, c, fields(c.Digest))
	if _, err := runActivity(t, a, in); !guard.Retryable(contract.FromFailure(err)) || !strings.Contains(err.Error(), "could not be released") {
		t.Fatalf("first run: %v; want a retryable failure saying the claim could not be released", err)
	}
	log.SignalErr = nil
	b.Err = nil
	if _, err = runActivity(t, a, in); guard.TypeOf(contract.FromFailure(err)) != guard.TypeApprovalRefused {
		t.Fatalf("fresh run: %v; want an ApprovalRefused", err)
	}
	if len(b.ran) != 1 {
		t.Errorf("the backend was called %d times; want 1", len(b.ran))
	}
}

// A statement that expires while the host waits for its claim to show in the run's history (the
// server holds the claim behind a workflow task) runs nothing: expiry is checked again on this
// host's clock after the history read, right before the code starts, and the claim is released.
func TestRunRefusesAnApprovalThatExpiresWhileItsClaimWaits(t *testing.T) {
	b := &echoBackend{}
	// Ten reads without the claim wait about 2.1 s (5 ms doubling, at most 500 ms).
	log := &historytest.Log{ScheduleCaller: true, HiddenReads: 10}
	a, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), History: log})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	f := fields(c.Digest)
	now := time.Now()
	f.Expires = now.Truncate(time.Second).Add(time.Second) // whole seconds, 0.3 s to 1.3 s from now
	if f.Expires.Sub(now) < 300*time.Millisecond {
		f.Expires = f.Expires.Add(time.Second)
	}
	_, err = runActivity(t, a, approved(t, c, f))
	if guard.TypeOf(contract.FromFailure(err)) != guard.TypeApprovalRefused || !strings.Contains(err.Error(), "refused ("+string(approval.ReasonExpired)+")") {
		t.Fatalf("run: %v; want an ApprovalRefused refusing the expired statement", err)
	}
	if len(b.ran) != 0 {
		t.Errorf("the backend was called %d times; want 0", len(b.ran))
	}
	if log.Reads() < 10 {
		t.Errorf("%d history reads; want the refusal only after the claim showed (10 reads or more)", log.Reads())
	}
	signals := log.Signals(testWorkflowID, testRunID)
	if len(signals) != 2 {
		t.Fatalf("%d claim signals; want 2 (the claim and its release)", len(signals))
	}
}

// The claim step checks the verified approval on this host's clock and refuses it, typed, once
// the statement expired or the key's valid-before passed; nothing is left claimed.
func TestClaimApprovalRefusesALapsedApproval(t *testing.T) {
	info := activity.Info{ActivityID: "mine"}
	info.WorkflowExecution.ID, info.WorkflowExecution.RunID = "wf", "run"
	now := time.Now()
	for _, tc := range []struct {
		name string
		v    approval.Verified
		want error // nil to claim
	}{
		{"valid", approval.Verified{Expires: now.Add(time.Hour), ValidBefore: now.Add(time.Hour)}, nil},
		{"expired", approval.Verified{Expires: now.Add(-time.Second)}, approval.ReasonExpired},
		{"key no longer valid", approval.Verified{Expires: now.Add(time.Hour), ValidBefore: now.Add(-time.Second)}, approval.ReasonKeyNotValid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &historytest.Log{Events: historytest.Events{historytest.Scheduled(5, "mine")}}
			c, err := claimApproval(context.Background(), log, info, 0, approvalID, tc.v, nil)
			switch {
			case tc.want == nil && (err != nil || c == nil):
				t.Fatalf("claim: %v; want it made", err)
			case tc.want != nil && (!errors.Is(err, tc.want) || guard.TypeOf(err) != guard.TypeApprovalRefused || c != nil):
				t.Fatalf("claim: %v; want an ApprovalRefused that is %s", err, tc.want)
			}
			if signals := log.Signals("wf", "run"); tc.want != nil && len(signals) != 2 {
				t.Errorf("%d claim signals; want 2 (the claim and its release)", len(signals))
			}
		})
	}
}
