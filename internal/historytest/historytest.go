// Package historytest gives unit tests the history of a run without a Temporal server: a list of
// events that reads like a server's, for the sandbox activity's check that an approval is used
// once (activities.Config.History).
package historytest

import (
	"context"
	"errors"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/contract"
)

// Events is a history, returned for any run.
type Events []*historypb.HistoryEvent

// GetWorkflowHistory returns an iterator over e.
func (e Events) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) tclient.HistoryEventIterator {
	return &iterator{events: e}
}

// ThisActivity is a history that schedules only the sandbox activity that reads it (named by the
// activity context): the history of a run with one sandbox activity, for tests of anything else.
type ThisActivity struct{}

// GetWorkflowHistory returns the history that schedules the calling activity as event 5.
func (ThisActivity) GetWorkflowHistory(ctx context.Context, workflowID, runID string, longPoll bool, filter enumspb.HistoryEventFilterType) tclient.HistoryEventIterator {
	return Events{Scheduled(5, activity.GetInfo(ctx).ActivityID)}.GetWorkflowHistory(ctx, workflowID, runID, longPoll, filter)
}

// Unreadable is a history whose read fails, as when the server cannot be reached.
type Unreadable struct{}

// GetWorkflowHistory returns an iterator whose first Next fails.
func (Unreadable) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) tclient.HistoryEventIterator {
	return &iterator{err: errors.New("historytest: the server is unreachable")}
}

type iterator struct {
	events Events
	err    error
}

func (it *iterator) HasNext() bool { return it.err != nil || len(it.events) > 0 }

func (it *iterator) Next() (*historypb.HistoryEvent, error) {
	if it.err != nil {
		return nil, it.err
	}
	ev := it.events[0]
	it.events = it.events[1:]
	return ev, nil
}

// Scheduled is event id scheduling the sandbox activity as activityID.
func Scheduled(id int64, activityID string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
		Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityId: activityID, ActivityType: &commonpb.ActivityType{Name: contract.RunActivityName},
		}}}
}

// Failed is event id failing the activity scheduled as event scheduled with an application
// error of type errType, retryable or not.
func Failed(id, scheduled int64, errType string, retryable bool) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
		Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{
			ScheduledEventId: scheduled,
			Failure: &failurepb.Failure{Message: errType, FailureInfo: &failurepb.Failure_ApplicationFailureInfo{
				ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: errType, NonRetryable: !retryable},
			}},
		}}}
}

// Ended is event id ending the activity scheduled as event scheduled: how is
// EVENT_TYPE_ACTIVITY_TASK_COMPLETED, _TIMED_OUT or _CANCELED (for a failure, see Failed).
func Ended(id, scheduled int64, how enumspb.EventType) *historypb.HistoryEvent {
	ev := &historypb.HistoryEvent{EventId: id, EventType: how}
	switch how {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: scheduled}}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes{ActivityTaskTimedOutEventAttributes: &historypb.ActivityTaskTimedOutEventAttributes{ScheduledEventId: scheduled}}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskCanceledEventAttributes{ActivityTaskCanceledEventAttributes: &historypb.ActivityTaskCanceledEventAttributes{ScheduledEventId: scheduled}}
	default:
		panic("historytest: Ended of " + how.String())
	}
	return ev
}

// Other is event id scheduling an activity of another type as activityID.
func Other(id int64, activityID string) *historypb.HistoryEvent {
	ev := Scheduled(id, activityID)
	ev.GetActivityTaskScheduledEventAttributes().ActivityType.Name = "SomethingElse"
	return ev
}
