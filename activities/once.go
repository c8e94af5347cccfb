package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// An approval runs code once. The workflow schedules one sandbox activity, and a fresh one only
// after a failure that says the code never started; but any namespace writer can poll the
// workflow task queue and answer a RunCode run's workflow tasks itself, scheduling SandboxRun as
// often as it likes with the run's genuine signed input, and can fail a running activity by its
// id. So the sandbox host checks, before anything starts:
//   - in the run's history (written by the server, in order), that every SandboxRun scheduled
//     before this one ended in a failure from before the code could start: none is still
//     waiting or running, none completed, timed out, was cancelled or failed otherwise;
//   - in its own ledger, that it has not started code for this approval already (a failure sent
//     by id while the code still ran here looks like a failure from before the start).

// HistoryReader reads a run's history; a Temporal client is one.
type HistoryReader interface {
	GetWorkflowHistory(ctx context.Context, workflowID, runID string, isLongPoll bool, filterType enumspb.HistoryEventFilterType) tclient.HistoryEventIterator
}

// historyReadTimeout bounds the history read before a run.
const historyReadTimeout = 30 * time.Second

// sandboxActivity is one SandboxRun scheduled in a run's history, and how it ended so far.
type sandboxActivity struct {
	id  string
	end string // one of the end* values
}

const (
	endOpen       = "scheduled and not ended"
	endNotStarted = "failed before the code could start"
)

// firstUse returns nil when no sandbox activity scheduled in this run before the one info names
// may have used the approval; otherwise a ConfigError naming the one that may have. It fails
// with a retryable IntegrationError (nothing started) when the history cannot be read.
func firstUse(ctx context.Context, h HistoryReader, info activity.Info) error {
	ctx, cancel := context.WithTimeout(ctx, historyReadTimeout)
	defer cancel()
	runs, err := sandboxActivities(h.GetWorkflowHistory(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT))
	if err != nil {
		return &guard.IntegrationError{Op: "sandbox activity: read the run's history", Err: err}
	}
	mine := -1
	for i, r := range runs {
		if r.id == info.ActivityID && r.end == endOpen {
			mine = i
		}
	}
	if mine < 0 {
		return &guard.ConfigError{Msg: fmt.Sprintf("sandbox activity: refused, nothing ran: the run's history schedules no sandbox activity %q", info.ActivityID)}
	}
	for _, r := range runs[:mine] {
		if r.end != endNotStarted {
			return &guard.ConfigError{Msg: fmt.Sprintf("sandbox activity: refused, nothing ran: the approval was already used in this run by sandbox activity %q (%s); an approval runs code once", r.id, r.end)}
		}
	}
	return nil
}

// sandboxActivities lists the SandboxRun activities of a history in the order they were scheduled.
func sandboxActivities(iter tclient.HistoryEventIterator) ([]sandboxActivity, error) {
	var runs []sandboxActivity
	bySchedule := map[int64]int{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return nil, err
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			if a.GetActivityType().GetName() == contract.RunActivityName {
				bySchedule[ev.GetEventId()] = len(runs)
				runs = append(runs, sandboxActivity{id: a.GetActivityId(), end: endOpen})
			}
			continue
		}
		if scheduled, end := activityEnd(ev); end != "" {
			if i, ok := bySchedule[scheduled]; ok {
				runs[i].end = end
			}
		}
	}
	return runs, nil
}

// activityEnd returns the scheduled event id and the end of an event that ends an activity, or
// "" for any other event.
func activityEnd(ev *historypb.HistoryEvent) (scheduled int64, end string) {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		return ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), "completed"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		a := ev.GetActivityTaskFailedEventAttributes()
		// The failure's type and retryability are plain fields (a payload codec encodes only
		// messages and details). contract.ToFailure makes an IntegrationError retryable exactly
		// when the code could not have started.
		if app := a.GetFailure().GetApplicationFailureInfo(); app.GetType() == guard.TypeIntegrationError && !app.GetNonRetryable() {
			return a.GetScheduledEventId(), endNotStarted
		}
		return a.GetScheduledEventId(), "failed"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		return ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), "timed out"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		return ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId(), "cancelled"
	}
	return 0, ""
}

// ledgerKeep is how long past its expiry the ledger keeps an approval. An activity scheduled
// before the expiry still verifies when it starts later (the statement is checked at the time
// the activity was scheduled), so the ledger outlives the expiry by more than any sandbox
// activity's schedule-to-start timeout.
const ledgerKeep = 24 * time.Hour

// ledger remembers the approvals this worker started code for, until ledgerKeep past their
// expiry. It lives in memory: see the README's known limits.
type ledger struct {
	mu     sync.Mutex
	used   map[string]time.Time // run and approval → until when it is kept
	pruned time.Time
}

// ledgerKey names an approval of one run.
func ledgerKey(info activity.Info, approvalID string) string {
	return info.WorkflowExecution.ID + "\x00" + info.WorkflowExecution.RunID + "\x00" + approvalID
}

// claim records key as used until ledgerKeep past expires (or past now, if later) and reports
// true, or reports false if it was already used.
func (l *ledger) claim(key string, expires, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used == nil {
		l.used = map[string]time.Time{}
	}
	if now.Sub(l.pruned) > time.Minute {
		for k, until := range l.used {
			if now.After(until) {
				delete(l.used, k)
			}
		}
		l.pruned = now
	}
	if _, ok := l.used[key]; ok {
		return false
	}
	if expires.Before(now) {
		expires = now // an expired statement verified at its scheduled time: keep it from now
	}
	l.used[key] = expires.Add(ledgerKeep)
	return true
}

// release forgets key: the code did not start, so a fresh activity may use the approval.
func (l *ledger) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.used, key)
}
