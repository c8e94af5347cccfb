package contract

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// ReadInput returns the Input a run was started with, decoded by dc from the first event of its
// history (runID empty: the latest run of workflowID). Values the status query never carries (env
// values, input file contents) are read this way, by a reviewer who asks for them.
func ReadInput(ctx context.Context, tc tclient.Client, dc converter.DataConverter, workflowID, runID string) (Input, error) {
	var in Input
	err := readStart(ctx, tc, dc, workflowID, runID, "", &in)
	return in, err
}

// ReadSessionInput returns the SessionInput a Session was started with, as ReadInput does for a
// run: the settings with their file contents and env values. A run started as another workflow
// type is refused.
func ReadSessionInput(ctx context.Context, tc tclient.Client, dc converter.DataConverter, workflowID, runID string) (SessionInput, error) {
	var in SessionInput
	err := readStart(ctx, tc, dc, workflowID, runID, SessionWorkflowName, &in)
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

// readStart decodes the input of the first event of workflowID's history into in, refusing a run
// started as another type than wantType (empty: any).
func readStart(ctx context.Context, tc tclient.Client, dc converter.DataConverter, workflowID, runID, wantType string, in any) error {
	iter := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return fmt.Errorf("history of %s is empty", workflowID)
	}
	ev, err := iter.Next()
	if err != nil {
		return fmt.Errorf("history of %s: %w", workflowID, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return fmt.Errorf("the first event of %s is not its start", workflowID)
	}
	if typ := attrs.GetWorkflowType().GetName(); wantType != "" && typ != wantType {
		return &WorkflowTypeError{WorkflowID: workflowID, Type: typ, Want: wantType}
	}
	if err := dc.FromPayloads(attrs.GetInput(), in); err != nil {
		return fmt.Errorf("decode the input of %s: %w", workflowID, err)
	}
	return nil
}
