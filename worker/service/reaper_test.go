package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
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

// namespaceService answers DescribeNamespace with info, or err; its other methods are not called.
type namespaceService struct {
	workflowservice.WorkflowServiceClient
	info *namespacepb.NamespaceInfo
	err  error
}

func (s namespaceService) DescribeNamespace(_ context.Context, req *workflowservice.DescribeNamespaceRequest, _ ...grpc.CallOption) (*workflowservice.DescribeNamespaceResponse, error) {
	if s.err != nil {
		return nil, s.err
	}
	return &workflowservice.DescribeNamespaceResponse{NamespaceInfo: s.info}, nil
}

func TestNamespaceID(t *testing.T) {
	id, err := namespaceID(context.Background(), namespaceService{info: &namespacepb.NamespaceInfo{Name: "default", Id: "5b0f3c1e-2a4d-4e6f-8a9b-0c1d2e3f4a5b"}}, "default")
	if err != nil || id != "5b0f3c1e-2a4d-4e6f-8a9b-0c1d2e3f4a5b" {
		t.Errorf("got %q, %v; want the namespace's id", id, err)
	}
	if _, err := namespaceID(context.Background(), namespaceService{info: &namespacepb.NamespaceInfo{Name: "default"}}, "default"); err == nil {
		t.Error("a namespace without an id: got no error")
	}
	if _, err := namespaceID(context.Background(), namespaceService{err: serviceerror.NewNamespaceNotFound("nope")}, "nope"); err == nil || !strings.Contains(err.Error(), "describe namespace nope") {
		t.Errorf("an unknown namespace: got %v; want the describe error", err)
	}
}

// The Docker backend's config carries the namespace id Serve found.
func TestDockerConfigCarriesNamespaceID(t *testing.T) {
	o := &Options{Backend: "docker", TaskQueue: "q", namespaceID: "5b0f3c1e-2a4d-4e6f-8a9b-0c1d2e3f4a5b"}
	dc, err := dockerConfig(o, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if dc.NamespaceID != o.namespaceID || dc.Deployment != "default/q" {
		t.Errorf("docker config: namespace id %q, deployment %q; want %q and default/q", dc.NamespaceID, dc.Deployment, o.namespaceID)
	}
}
