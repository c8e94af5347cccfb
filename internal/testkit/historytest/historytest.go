// Package historytest gives unit tests the history of a run without a Temporal server: a list of
// events that reads like a server's, and signals added to it, for the sandbox activity's claim
// and check that an approval is used once (activities.Config.History).
package historytest

import (
	"context"
	"errors"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"

	"github.com/sandboxflow/sandboxflow/contract"
)

// Events is a history, returned for any run.
type Events []*historypb.HistoryEvent

// GetWorkflowHistory returns an iterator over e.
func (e Events) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) tclient.HistoryEventIterator {
	return &iterator{events: e}
}

// Log is a server's histories: each run's history is Events, then (with ScheduleCaller) the
// sandbox activity that reads it, then the signals sent to that run through WorkflowService.
type Log struct {
	Events Events
	// ScheduleCaller schedules the sandbox activity that reads a history (named by the activity
	// context) in it, as event 5: the history of a run with one sandbox activity.
	ScheduleCaller bool
	// CallerType is the activity type ScheduleCaller schedules the caller as. Optional:
	// contract.RunActivityName.
	CallerType string
	// SignalErr, when set, fails every signal after the first SignalErrAfter (nothing is
	// recorded).
	SignalErr      error
	SignalErrAfter int

	// HiddenReads is how many reads do not show the signals yet, as when the server holds
	// them while a workflow task is in flight.
	HiddenReads int

	// HeartbeatAnswer and HeartbeatErr are the server's answer to every activity heartbeat
	// sent through WorkflowService (nil and nil: the attempt lives, nothing asked of it).
	HeartbeatAnswer *workflowservice.RecordActivityTaskHeartbeatResponse
	HeartbeatErr    error
	heartbeats      int

	mu      sync.Mutex
	reads   int
	sent    int
	signals map[[2]string]Events
}

// GetWorkflowHistory returns the run's history.
func (l *Log) GetWorkflowHistory(ctx context.Context, workflowID, runID string, longPoll bool, filter enumspb.HistoryEventFilterType) tclient.HistoryEventIterator {
	events := append(Events{}, l.Events...)
	if l.ScheduleCaller {
		typ := l.CallerType
		if typ == "" {
			typ = contract.RunActivityName
		}
		events = append(events, ScheduledAs(5, activity.GetInfo(ctx).ActivityID, typ))
	}
	l.mu.Lock()
	if l.reads >= l.HiddenReads {
		events = append(events, l.signals[[2]string{workflowID, runID}]...)
	}
	l.reads++
	l.mu.Unlock()
	return events.GetWorkflowHistory(ctx, workflowID, runID, longPoll, filter)
}

// Reads returns how many times a history was read.
func (l *Log) Reads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reads
}

// Signals returns the signals sent to a run.
func (l *Log) Signals(workflowID, runID string) Events {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append(Events{}, l.signals[[2]string{workflowID, runID}]...)
}

// Heartbeats returns how many activity heartbeats were sent through WorkflowService.
func (l *Log) Heartbeats() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heartbeats
}

// WorkflowService returns a service whose SignalWorkflowExecution adds to the log and whose
// RecordActivityTaskHeartbeat answers as HeartbeatAnswer and HeartbeatErr say; its other
// methods are not there (they panic).
func (l *Log) WorkflowService() workflowservice.WorkflowServiceClient { return service{log: l} }

type service struct {
	workflowservice.WorkflowServiceClient
	log *Log
}

func (s service) SignalWorkflowExecution(_ context.Context, req *workflowservice.SignalWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.SignalWorkflowExecutionResponse, error) {
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.SignalErr != nil && l.sent >= l.SignalErrAfter {
		return nil, l.SignalErr
	}
	l.sent++
	if l.signals == nil {
		l.signals = map[[2]string]Events{}
	}
	key := [2]string{req.GetWorkflowExecution().GetWorkflowId(), req.GetWorkflowExecution().GetRunId()}
	l.signals[key] = append(l.signals[key], Signaled(int64(100+len(l.signals[key])), req.GetSignalName(), req.GetInput()))
	return &workflowservice.SignalWorkflowExecutionResponse{}, nil
}

func (s service) RecordActivityTaskHeartbeat(context.Context, *workflowservice.RecordActivityTaskHeartbeatRequest, ...grpc.CallOption) (*workflowservice.RecordActivityTaskHeartbeatResponse, error) {
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	l.heartbeats++
	if l.HeartbeatErr != nil {
		return nil, l.HeartbeatErr
	}
	if l.HeartbeatAnswer != nil {
		return l.HeartbeatAnswer, nil
	}
	return &workflowservice.RecordActivityTaskHeartbeatResponse{}, nil
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
	return ScheduledAs(id, activityID, contract.RunActivityName)
}

// ScheduledAs is event id scheduling an activity of type typ as activityID.
func ScheduledAs(id int64, activityID, typ string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
		Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityId: activityID, ActivityType: &commonpb.ActivityType{Name: typ},
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

// Signaled is event id, the signal name with input.
func Signaled(id int64, name string, input *commonpb.Payloads) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{
			SignalName: name, Input: input,
		}}}
}

// Claimed is event id, a sandbox host's claim signal (or release, with Secret) as JSON.
func Claimed(id int64, claim contract.SandboxClaim) *historypb.HistoryEvent {
	input, err := converter.GetDefaultDataConverter().ToPayloads(claim)
	if err != nil {
		panic(err)
	}
	return Signaled(id, contract.SignalSandboxClaim, input)
}
