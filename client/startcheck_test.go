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

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// uwsFake is a server for Start's update-with-start: the update fails with uwsErr (block: it
// waits until its context ends), or its answer is getErr or the summary "sha256:11". A plain
// start (ExecuteWorkflow) and the status query (queryFake, digest "sha256:00") are counted;
// the run is described as a running RunCode run.
type uwsFake struct {
	queryFake
	uwsErr error
	block  bool
	getErr error
	plain  int
}

func (f *uwsFake) NewWithStartWorkflowOperation(opts tclient.StartWorkflowOptions, wf any, args ...any) tclient.WithStartWorkflowOperation {
	return failedStart{}
}

func (f *uwsFake) UpdateWithStartWorkflow(ctx context.Context, opts tclient.UpdateWithStartWorkflowOptions) (tclient.WorkflowUpdateHandle, error) {
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f.uwsErr != nil {
		return nil, f.uwsErr
	}
	return fakeHandle{err: f.getErr}, nil
}

func (f *uwsFake) ExecuteWorkflow(ctx context.Context, opts tclient.StartWorkflowOptions, wf any, args ...any) (tclient.WorkflowRun, error) {
	f.plain++
	return fakeRun{id: opts.ID}, nil
}

func (f *uwsFake) DescribeWorkflowExecution(ctx context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflow.WorkflowExecutionInfo{
		Type: &commonpb.WorkflowType{Name: contract.WorkflowName}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "r"},
	}}, nil
}

type fakeHandle struct{ err error }

func (h fakeHandle) WorkflowID() string { return "w" }
func (h fakeHandle) RunID() string      { return "r" }
func (h fakeHandle) UpdateID() string   { return "u" }
func (h fakeHandle) Get(ctx context.Context, ptr any) error {
	if h.err != nil {
		return h.err
	}
	*ptr.(*guard.Summary) = guard.Summary{Digest: "sha256:11"}
	return nil
}

type fakeRun struct{ id string }

func (r fakeRun) GetID() string                  { return r.id }
func (r fakeRun) GetRunID() string               { return "r" }
func (r fakeRun) GetFirstExecutionRunID() string { return "r" }
func (r fakeRun) Get(ctx context.Context, ptr any) error {
	panic("a run's result is never waited for")
}
func (r fakeRun) GetWithOptions(ctx context.Context, ptr any, _ tclient.WorkflowRunGetOptions) error {
	return r.Get(ctx, ptr)
}

// Issue 33: Start takes the check's outcome from the update that starts the run, and polls the
// status only when the server refuses update-with-start or the workflow gives the update no
// answer; it never waits past CheckWait for an answer.
func TestStartWithTheCheckUpdate(t *testing.T) {
	req := guard.Request{Code: "print(1)"}
	start := func(t *testing.T, f *uwsFake, wait time.Duration) (Started, error) {
		t.Helper()
		c, err := New(Options{Temporal: f, CheckPoll: time.Millisecond, CheckWait: wait})
		if err != nil {
			t.Fatal(err)
		}
		return c.Start(context.Background(), req, StartOptions{SkipWorkerCheck: true, WorkflowID: "w"})
	}
	t.Run("the update's answer, no query", func(t *testing.T) {
		f := &uwsFake{}
		got, err := start(t, f, time.Minute)
		if err != nil || got.Digest != "sha256:11" || got.RunID != "r" || f.queries != 0 || f.plain != 0 {
			t.Fatalf("Start = %+v, %v after %d queries and %d plain starts; want the update's digest alone", got, err, f.queries, f.plain)
		}
	})
	t.Run("the check's typed error, no query", func(t *testing.T) {
		f := &uwsFake{getErr: contract.ToFailure(&guard.ToolUsageError{Msg: "language \"cobol\" is not offered"})}
		_, err := start(t, f, time.Minute)
		var tu *guard.ToolUsageError
		if !errors.As(err, &tu) || f.queries != 0 {
			t.Fatalf("Start = %v after %d queries; want the ToolUsageError alone", err, f.queries)
		}
	})
	for name, refusal := range map[string]error{
		"a server without update-with-start": serviceerror.NewUnimplemented("unknown method ExecuteMultiOperation"),
		"updates turned off":                 serviceerror.NewPermissionDenied("UpdateWorkflowExecution operation is disabled on this namespace.", ""),
	} {
		t.Run(name, func(t *testing.T) {
			f := &uwsFake{uwsErr: refusal}
			got, err := start(t, f, time.Minute)
			if err != nil || got.Digest != "sha256:00" || f.plain != 1 || f.queries == 0 {
				t.Fatalf("Start = %+v, %v after %d plain starts and %d queries; want a plain start and the polled digest", got, err, f.plain, f.queries)
			}
		})
	}
	t.Run("a worker without the update", func(t *testing.T) {
		f := &uwsFake{getErr: errors.New("unknown update await-check. KnownUpdates=[decide cancel]")}
		got, err := start(t, f, time.Minute)
		if err != nil || got.Digest != "sha256:00" || f.plain != 0 || f.queries == 0 {
			t.Fatalf("Start = %+v, %v after %d plain starts and %d queries; want the polled digest of the started run", got, err, f.plain, f.queries)
		}
	})
	t.Run("no answer within CheckWait", func(t *testing.T) {
		f := &uwsFake{block: true}
		begin := time.Now()
		got, err := start(t, f, 50*time.Millisecond)
		var cu *CheckUnansweredError
		if !errors.As(err, &cu) || cu.WorkflowID != "w" || cu.RunID != "r" || got.RunID != "r" || f.queries != 0 {
			t.Fatalf("Start = %+v, %v after %d queries; want a *CheckUnansweredError naming the started run", got, err, f.queries)
		}
		if d := time.Since(begin); d > 5*time.Second {
			t.Fatalf("Start took %s; want about CheckWait (50ms)", d)
		}
	})
}
