//go:build integration

package docker

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The floor of a row is what the same dev server, in the same run and under the same load, takes
// for the fewest round trips a decision recorded before the code and a result recorded after it
// need, with nothing of sandboxflow in them: a workflow whose update schedules one activity that
// returns "1\n" at once. It is the part of approve→result no change to sandboxflow's own code can
// take away while the decision and the result stay in the run's history (issue 33's "where a
// target is missed"): for a run, the update's workflow task (accepted, the activity scheduled),
// the activity's dispatch and completion, the workflow task that completes the workflow and the
// result's long poll; for a cell, the same with the update answered by the workflow task after the
// activity instead of the workflow's completion. sandboxflow adds to it the claim in the history,
// the checks on both sides, the container and the code.

const (
	floorWorkflow = "BenchFloor"
	floorActivity = "BenchFloorActivity"
	floorApprove  = "approve"
	floorCell     = "cell"
	floorClose    = "close"
)

// benchFloorWorkflow is the floor's workflow: with cells false it waits for one approve update
// and then runs the activity and returns its result (a run); with cells true every cell update
// runs the activity and answers with its result, until a close update (a session).
func benchFloorWorkflow(ctx workflow.Context, cells bool) (string, error) {
	opts := workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second}
	if cells {
		closed := false
		if err := workflow.SetUpdateHandler(ctx, floorCell, func(ctx workflow.Context) (string, error) {
			var out string
			err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), floorActivity).Get(ctx, &out)
			return out, err
		}); err != nil {
			return "", err
		}
		if err := workflow.SetUpdateHandler(ctx, floorClose, func(workflow.Context) error { closed = true; return nil }); err != nil {
			return "", err
		}
		if err := workflow.Await(ctx, func() bool { return closed && workflow.AllHandlersFinished(ctx) }); err != nil {
			return "", err
		}
		return "", nil
	}
	approved := false
	if err := workflow.SetUpdateHandler(ctx, floorApprove, func(workflow.Context) error { approved = true; return nil }); err != nil {
		return "", err
	}
	if err := workflow.Await(ctx, func() bool { return approved }); err != nil {
		return "", err
	}
	var out string
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), floorActivity).Get(ctx, &out)
	return out, err
}

func benchFloorActivity(context.Context) (string, error) { return "1\n", nil }

// benchFloor is the floor's worker, in the benchmark's process, on a queue of its own on the
// row's dev server.
type benchFloor struct {
	tc      tclient.Client
	queue   string
	w       worker.Worker
	session string // the live floor session's workflow id
	cells   int
}

func startBenchFloor(b *testing.B, tc tclient.Client) *benchFloor {
	f := &benchFloor{tc: tc, queue: "bench-floor-" + suiteID}
	f.w = worker.New(tc, f.queue, worker.Options{})
	f.w.RegisterWorkflowWithOptions(benchFloorWorkflow, workflow.RegisterOptions{Name: floorWorkflow})
	f.w.RegisterActivityWithOptions(benchFloorActivity, activity.RegisterOptions{Name: floorActivity})
	if err := f.w.Start(); err != nil {
		b.Fatalf("start the floor's worker: %v", err)
	}
	return f
}

// run times a floor run: the approve update, then the workflow's result, the long poll for it
// sent with the update as ApproveAndWait does (the workflow started untimed).
func (f *benchFloor) run(ctx context.Context, b *testing.B) time.Duration {
	wr, err := f.tc.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{TaskQueue: f.queue}, floorWorkflow, false)
	if err != nil {
		b.Fatalf("start a floor run: %v", err)
	}
	start := time.Now()
	got := make(chan error, 1)
	var out string
	go func() { got <- wr.Get(ctx, &out) }()
	h, err := f.tc.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{
		WorkflowID: wr.GetID(), RunID: wr.GetRunID(), UpdateName: floorApprove, WaitForStage: tclient.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err == nil {
		err = <-got
	}
	d := time.Since(start)
	if err != nil || out != "1\n" {
		b.Fatalf("floor run %s: %q, %v", wr.GetID(), out, err)
	}
	return d
}

// cell times a floor cell: one cell update answered with the activity's result, in a live
// session (opened untimed, with one cell, and replaced as the benchmark's sessions are).
func (f *benchFloor) cell(ctx context.Context, b *testing.B) time.Duration {
	if f.session == "" || f.cells >= benchSessionCells {
		f.close(ctx, b)
		wr, err := f.tc.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{TaskQueue: f.queue}, floorWorkflow, true)
		if err != nil {
			b.Fatalf("start a floor session: %v", err)
		}
		f.session, f.cells = wr.GetID(), 0
		f.updateCell(ctx, b) // warm-up, not counted
	}
	f.cells++
	return f.updateCell(ctx, b)
}

func (f *benchFloor) updateCell(ctx context.Context, b *testing.B) time.Duration {
	start := time.Now()
	var out string
	h, err := f.tc.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{
		WorkflowID: f.session, UpdateName: floorCell, WaitForStage: tclient.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, &out)
	}
	d := time.Since(start)
	if err != nil || out != "1\n" {
		b.Fatalf("floor cell in %s: %q, %v", f.session, out, err)
	}
	return d
}

func (f *benchFloor) close(ctx context.Context, b *testing.B) {
	if f.session == "" {
		return
	}
	h, err := f.tc.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{
		WorkflowID: f.session, UpdateName: floorClose, WaitForStage: tclient.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		b.Fatalf("close the floor session %s: %v", f.session, err)
	}
	f.session = ""
}

func (f *benchFloor) stop(ctx context.Context, b *testing.B) {
	f.close(ctx, b)
	f.w.Stop()
}
