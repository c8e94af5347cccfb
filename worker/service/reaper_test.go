package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
)

type countingReaper struct{ calls atomic.Int32 }

func (r *countingReaper) Reap(context.Context, time.Duration) (int, error) {
	r.calls.Add(1)
	return 0, errors.New("daemon down")
}

func TestReapEveryRunsAtOnceRetriesAndStops(t *testing.T) {
	r := &countingReaper{}
	ctx, cancel := context.WithCancel(context.Background())
	done := reapEvery(ctx, r, 20*time.Millisecond, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	deadline := time.Now().Add(5 * time.Second)
	for r.calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := r.calls.Load(); got < 2 {
		t.Errorf("reaps: got %d; want one at once and more on the interval, a failure notwithstanding", got)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reaper did not stop after its context ended")
	}
}

// describer is a hand-written workflowDescriber: the status of each run, or err.
type describer struct {
	status map[string]enumspb.WorkflowExecutionStatus
	err    error
}

func (d describer) DescribeWorkflowExecution(_ context.Context, _, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if d.err != nil {
		return nil, d.err
	}
	st, ok := d.status[runID]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: st}}, nil
}

func TestSessionEndedAsksTemporal(t *testing.T) {
	d := describer{status: map[string]enumspb.WorkflowExecutionStatus{
		"running":   enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		"completed": enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		"failed":    enumspb.WORKFLOW_EXECUTION_STATUS_FAILED,
		"reset":     enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
	}}
	for run, want := range map[string]bool{"running": false, "completed": true, "failed": true, "reset": true, "unknown": true} {
		got, err := sessionEnded(d)(context.Background(), "session-1", run)
		if err != nil || got != want {
			t.Errorf("run %s: ended %v, %v; want %v", run, got, err, want)
		}
	}
	ended, err := sessionEnded(describer{err: serviceerror.NewUnavailable("down")})(context.Background(), "session-1", "running")
	if err == nil || ended {
		t.Errorf("Temporal unreachable: ended %v, %v; want an error and the container kept", ended, err)
	}
}
