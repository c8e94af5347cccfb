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
	iter := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return in, fmt.Errorf("history of %s is empty", workflowID)
	}
	ev, err := iter.Next()
	if err != nil {
		return in, fmt.Errorf("history of %s: %w", workflowID, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return in, fmt.Errorf("the first event of %s is not its start", workflowID)
	}
	if err := dc.FromPayloads(attrs.GetInput(), &in); err != nil {
		return in, fmt.Errorf("decode the input of %s: %w", workflowID, err)
	}
	return in, nil
}
