//go:build integration

package workflows_test

import (
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/tracing"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// TestIntegrationCancelledRunsReplay cancels one run while it waits and one while its code runs,
// with the update "cancel", on a real server, and replays both histories with the workflow code
// and the tracing interceptor: they replay without a nondeterminism error, and the replay records
// none of sandboxflow's workflow spans again.
func TestIntegrationCancelledRunsReplay(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	cancelRun := func(id string) contract.CancelResult {
		t.Helper()
		h, err := it.c.UpdateWorkflow(it.ctx(10*time.Second), client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: contract.UpdateCancel,
			UpdateID: "cancel-" + id, Args: []any{contract.CancelRequest{By: "ops", Reason: "test"}}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			t.Fatalf("cancel %s: %v", id, err)
		}
		var out contract.CancelResult
		if err := h.Get(it.ctx(10*time.Second), &out); err != nil {
			t.Fatalf("cancel %s: %v", id, err)
		}
		return out
	}

	const waiting, running = "it-cancel-replay-wait", "it-cancel-replay-run"
	runW := it.start(waiting, it.queue, guard.Request{Code: "print('never')"})
	it.waitState(waiting, contract.StatusAwaitingApproval)
	cancelRun(waiting)
	_, err := it.result(runW)
	var c *guard.Cancelled
	if !errors.As(contract.FromFailure(err), &c) || c.By != "ops" {
		t.Fatalf("waiting run: %v; want Cancelled by ops", err)
	}

	mark := t.TempDir() + "/mark"
	runR := it.start(running, it.queue, guard.Request{Code: markCode, Settings: guard.Settings{Env: map[string]string{"MARK": mark, "SLEEP": "60"}, Limits: guard.Limits{Timeout: 90 * time.Second}}})
	it.waitState(running, contract.StatusAwaitingApproval)
	it.signal(running, it.signed(running, true))
	waitLines(t, mark, 1)
	if out := cancelRun(running); out.State != contract.StatusRunning {
		t.Fatalf("cancel while running answered %+v", out)
	}
	res, err := it.result(runR)
	if err != nil || res.Outcome != guard.OutcomeCancelled || res.Cancelled == nil || res.Cancelled.By != "ops" {
		t.Fatalf("running run: %+v, %v; want a cancelled result by ops", res, err)
	}

	exp := tracetest.NewInMemoryExporter()
	icpt, err := tracing.NewInterceptor(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: []interceptor.WorkerInterceptor{icpt}})
	if err != nil {
		t.Fatal(err)
	}
	workflows.Register(r)
	for _, id := range []string{waiting, running} {
		hist := &historypb.History{Events: it.history(id)}
		runID := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
		if err := r.ReplayWorkflowHistoryWithOptions(nil, hist, worker.ReplayWorkflowHistoryOptions{
			OriginalExecution: workflow.Execution{ID: id, RunID: runID}}); err != nil {
			t.Errorf("replay of %s: %v", id, err)
		}
	}
	for _, s := range exp.GetSpans() {
		if s.Name == tracing.SpanWait {
			t.Errorf("the replay recorded %s again", s.Name)
		}
	}
}
