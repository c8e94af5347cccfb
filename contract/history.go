package contract

import (
	"context"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// ReadInput returns the Input a run was started with, decoded by dc from the first event of its
// history (runID empty: the latest run of workflowID). Values the status query never carries (env
// values, input file contents) are read this way, by a reviewer who asks for them.
//
// namespace is the namespace tc was dialled for: with it, only the start event is fetched (one
// event, however long the history); empty, the history's first page is (the SDK's iterator,
// which knows the namespace but fetches up to a thousand events: a long session's every cell).
func ReadInput(ctx context.Context, tc tclient.Client, dc converter.DataConverter, namespace, workflowID, runID string) (Input, error) {
	in, _, err := ReadInputRun(ctx, tc, dc, namespace, workflowID, runID)
	return in, err
}

// ReadInputRun is ReadInput, with the run id the start event was written for (its
// original_execution_run_id, which the server writes): the run read, or, for a run a reset made,
// the run it was reset from, whose start event (and input) it copied.
func ReadInputRun(ctx context.Context, tc tclient.Client, dc converter.DataConverter, namespace, workflowID, runID string) (Input, string, error) {
	var in Input
	startRun, err := readStart(ctx, tc, dc, namespace, workflowID, runID, "", &in)
	return in, startRun, err
}

// ReadSessionInput returns the SessionInput a Session was started with, as ReadInput does for a
// run: the settings with their file contents and env values. A run started as another workflow
// type is refused.
func ReadSessionInput(ctx context.Context, tc tclient.Client, dc converter.DataConverter, namespace, workflowID, runID string) (SessionInput, error) {
	var in SessionInput
	_, err := readStart(ctx, tc, dc, namespace, workflowID, runID, SessionWorkflowName, &in)
	return in, err
}

// WorkflowTypeError says that a workflow id names a workflow of another type than the one asked
// for (a RunCode run read as a Session, or the reverse).
type WorkflowTypeError struct {
	WorkflowID, Type, Want string
}

func (e *WorkflowTypeError) Error() string {
	return fmt.Sprintf("%s was started as a %s, not a %s", e.WorkflowID, e.Type, e.Want)
}

// ReadStart decodes the input of the first event of the history of run runID of workflowID
// (empty: the latest run) into in, as ReadInput does, refusing a run started as another type than
// wantType (a *WorkflowTypeError; empty wantType: any), and returns the run id the start event was
// written for (see ReadInputRun).
func ReadStart(ctx context.Context, tc tclient.Client, dc converter.DataConverter, namespace, workflowID, runID, wantType string, in any) (string, error) {
	return readStart(ctx, tc, dc, namespace, workflowID, runID, wantType, in)
}

// readStart decodes the input of the first event of workflowID's history into in, refusing a run
// started as another type than wantType (empty: any), and returns the run id the event was
// written for.
func readStart(ctx context.Context, tc tclient.Client, dc converter.DataConverter, namespace, workflowID, runID, wantType string, in any) (string, error) {
	ev, err := firstEvent(ctx, tc, namespace, workflowID, runID)
	if err != nil {
		return "", err
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return "", fmt.Errorf("the first event of %s is not its start", workflowID)
	}
	if typ := attrs.GetWorkflowType().GetName(); wantType != "" && typ != wantType {
		return "", &WorkflowTypeError{WorkflowID: workflowID, Type: typ, Want: wantType}
	}
	if err := dc.FromPayloads(attrs.GetInput(), in); err != nil {
		return "", fmt.Errorf("decode the input of %s: %w", workflowID, err)
	}
	return attrs.GetOriginalExecutionRunId(), nil
}

// firstEvent is the first event of the history of run runID of workflowID (see ReadInput for
// namespace).
func firstEvent(ctx context.Context, tc tclient.Client, namespace, workflowID, runID string) (*historypb.HistoryEvent, error) {
	if namespace == "" {
		iter := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if !iter.HasNext() {
			return nil, fmt.Errorf("history of %s is empty", workflowID)
		}
		ev, err := iter.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", workflowID, err)
		}
		return ev, nil
	}
	resp, err := tc.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
		Namespace:              namespace,
		Execution:              &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID},
		MaximumPageSize:        1,
		HistoryEventFilterType: enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT,
	})
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", workflowID, err)
	}
	events := resp.GetHistory().GetEvents()
	if len(events) == 0 {
		return nil, fmt.Errorf("history of %s is empty", workflowID)
	}
	return events[0], nil
}
