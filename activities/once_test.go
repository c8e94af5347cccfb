package activities

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/historytest"
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
		{"after a timed-out one", historytest.Events{historytest.Scheduled(5, "a"), historytest.Ended(7, 5, timedOut), mine}, `"a" (timed out)`},
		{"after a cancelled one", historytest.Events{historytest.Scheduled(5, "a"), historytest.Ended(7, 5, canceled), mine}, `"a" (cancelled)`},
		{"its id reused after a completed one", historytest.Events{historytest.Scheduled(5, "mine"), historytest.Ended(7, 5, completed), mine}, `"mine" (completed)`},
		{"not in the history", historytest.Events{historytest.Scheduled(5, "a")}, `schedules no sandbox activity "mine"`},
		{"only closed in the history", historytest.Events{historytest.Scheduled(5, "mine"), historytest.Ended(7, 5, completed)}, `schedules no sandbox activity "mine"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := firstUse(context.Background(), tc.history, activity.Info{ActivityID: "mine"})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("firstUse: %v; want it to run", err)
			case tc.want == "":
			case err == nil || guard.TypeOf(err) != guard.TypeConfigError || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing ran"):
				t.Fatalf("firstUse: %v; want a ConfigError saying nothing ran, naming %s", err, tc.want)
			}
		})
	}
}

// A history that cannot be read leaves the approval unused: the workflow tries a fresh activity.
func TestFirstUseUnreadableHistoryIsRetryable(t *testing.T) {
	err := firstUse(context.Background(), historytest.Unreadable{}, activity.Info{ActivityID: "mine"})
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
		History: historytest.Events{historytest.Scheduled(5, "a"), historytest.Ended(7, 5, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED),
			historytest.Scheduled(11, testActivityID)}})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	_, err = runActivity(t, a, approved(t, c, fields(c.Digest)))
	if guard.TypeOf(contract.FromFailure(err)) != guard.TypeConfigError || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("run: %v; want a ConfigError saying the approval was already used", err)
	}
	if len(b.ran) != 0 || len(sink.Events()) != 0 {
		t.Errorf("backend ran %d times, %d events; want nothing", len(b.ran), len(sink.Events()))
	}
}

// A failure sent by id while the code still runs looks like one from before the start; the
// worker's ledger still refuses the fresh activity that follows it. A failure that really was
// from before the start leaves the approval to the next activity.
func TestRunLedgerRefusesASecondStartOnThisWorker(t *testing.T) {
	b := &echoBackend{Err: &guard.IntegrationError{Op: "connect", Err: context.DeadlineExceeded}}
	a, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t)})
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
	_, err = runActivity(t, a, in)
	if guard.TypeOf(contract.FromFailure(err)) != guard.TypeConfigError || !strings.Contains(err.Error(), "already started code for approval") {
		t.Fatalf("third run: %v; want a ConfigError from the ledger", err)
	}
	if len(b.ran) != 2 {
		t.Errorf("the backend was called %d times; want 2 (the failure, then the one run)", len(b.ran))
	}
}

func TestLedgerForgetsLongExpiredApprovals(t *testing.T) {
	var l ledger
	now := time.Now()
	if !l.claim("a", now, now) || l.claim("a", now, now) {
		t.Fatal("claim: want the first claim to succeed and the second to fail")
	}
	later := now.Add(ledgerKeep + 2*time.Minute)
	if !l.claim("b", later, later) || len(l.used) != 1 {
		t.Fatalf("after the keep: %d entries; want only b (a pruned)", len(l.used))
	}
	if !l.claim("a", later, later) {
		t.Error("a long-expired approval is still held")
	}
	// A statement that expired after its activity was scheduled is kept from the claim on.
	if !l.claim("c", time.Time{}, later) || l.claim("c", time.Time{}, later.Add(2*time.Minute)) {
		t.Error("an approval with an expiry in the past was dropped at the next prune")
	}
}
