package client

import (
	"context"
	"errors"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// queryFake answers the status query with the scripted errors, one a call, then with a run
// waiting for its decision; the run stays open. Asking for the run's result (GetWorkflow) panics
// through the nil embedded client, which fails the test: a run that waits for a person would
// keep that call waiting for up to the approval timeout.
type queryFake struct {
	tclient.Client
	errs    []error
	queries int
	status  enumspb.WorkflowExecutionStatus
}

func (f *queryFake) QueryWorkflow(ctx context.Context, id, runID, name string, args ...any) (converter.EncodedValue, error) {
	f.queries++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(contract.Status{State: contract.StatusAwaitingApproval,
		Request: guard.Summary{Digest: "sha256:00"}})
	if err != nil {
		return nil, err
	}
	return encodedValue{p: p}, nil
}

func (f *queryFake) DescribeWorkflowExecution(ctx context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflow.WorkflowExecutionInfo{Status: f.status}}, nil
}

// Issue 33: with many runs waiting, status queries failed with "deadline exceeded" and every
// starter fell through to waiting for the run's result, which for a run waiting for a person
// means up to the 24 h approval timeout. Now transient failures are asked again, and a failure
// that lasts returns a typed error at once, the run still open.
func TestAwaitCheckNeverWaitsForAnOpenRunsResult(t *testing.T) {
	busy := serviceerror.NewDeadlineExceeded("query timed out")
	t.Run("transient failures are asked again", func(t *testing.T) {
		f := &queryFake{errs: []error{busy, serviceerror.NewUnavailable("restarting"), serviceerror.NewResourceExhausted(0, "busy")},
			status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
		c, err := New(Options{Temporal: f, CheckPoll: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.awaitCheck(context.Background(), Started{WorkflowID: "w", RunID: "r"})
		if err != nil || got.Digest == "" || f.queries != 4 {
			t.Fatalf("awaitCheck = %+v, %v after %d queries; want the digest after 4", got, err, f.queries)
		}
	})
	t.Run("a lasting failure is a typed error, bounded by CheckWait", func(t *testing.T) {
		errs := make([]error, 1000)
		for i := range errs {
			errs[i] = busy
		}
		f := &queryFake{errs: errs, status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
		c, err := New(Options{Temporal: f, CheckPoll: time.Millisecond, CheckWait: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.awaitCheck(context.Background(), Started{WorkflowID: "w", RunID: "r"})
		var cu *CheckUnansweredError
		if !errors.As(err, &cu) || ErrorType(err) != TypeCheckUnanswered || cu.WorkflowID != "w" {
			t.Fatalf("awaitCheck = %v; want a *CheckUnansweredError for w", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("awaitCheck took %s; want about CheckWait (50ms)", d)
		}
	})
	t.Run("a failure asking again cannot cure returns at once", func(t *testing.T) {
		f := &queryFake{errs: []error{serviceerror.NewQueryFailed("query handler panicked")}, status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
		c, err := New(Options{Temporal: f, CheckPoll: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.awaitCheck(context.Background(), Started{WorkflowID: "w", RunID: "r"})
		var cu *CheckUnansweredError
		if !errors.As(err, &cu) || f.queries != 1 {
			t.Fatalf("awaitCheck = %v after %d queries; want a *CheckUnansweredError after 1", err, f.queries)
		}
	})
}

// encodedValue is a query answer as the SDK hands it over.
type encodedValue struct{ p *commonpb.Payloads }

func (v encodedValue) HasValue() bool { return v.p != nil }

func (v encodedValue) Get(ptr any) error {
	return converter.GetDefaultDataConverter().FromPayloads(v.p, ptr)
}
