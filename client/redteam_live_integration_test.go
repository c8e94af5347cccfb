//go:build integration

package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
)

// Red team, where live output (issue 29) meets receipts (issue 31): live output is heartbeat
// details, which a namespace writer records for the running sandbox activity by its id
// (RecordActivityHeartbeatByID) as it likes. Watch shows them as the code's output while it runs
// (nothing can tell them apart then), but once the receipted result has come it says that what
// it showed is not the result's.
func TestIntegrationWatchSaysForgedLiveOutputIsNotTheResult(t *testing.T) {
	e := dockerEnv(t, &heartbeatSpy{}, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := "import time\nprint('real line', flush=True)\ntime.sleep(4)\nprint('real end')\n"
	started, err := e.Client.Start(ctx, guard.Request{Code: code}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Decide(t, e, started.WorkflowID, true)

	forged := []byte("forged: all tests passed\n")
	go func() {
		// The writer waits for the sandbox activity to run, then records its own details
		// every 20 ms for a second, just past the real output's first line.
		var aid, runID string
		for aid == "" && ctx.Err() == nil {
			d, err := e.Temporal.DescribeWorkflowExecution(ctx, started.WorkflowID, "")
			if err == nil {
				runID = d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
				for _, pa := range d.GetPendingActivities() {
					if pa.GetActivityType().GetName() == contract.RunActivityName && len(pa.GetHeartbeatDetails().GetPayloads()) > 0 {
						aid = pa.GetActivityId()
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		const real = int64(len("real line\n"))
		for i := 0; i < 50 && ctx.Err() == nil; i++ {
			lo := contract.LiveOutput{Seq: 1000 + int64(i), Stdout: contract.LiveChunk{Offset: real, Total: real + int64(len(forged)), Bytes: forged}}
			_ = e.Temporal.RecordActivityHeartbeatByID(ctx, e.Namespace, started.WorkflowID, runID, aid, lo)
			time.Sleep(20 * time.Millisecond)
		}
	}()

	var shown []byte
	var mismatch error
	var res *guard.Result
	for ev, err := range e.Client.Watch(ctx, started.WorkflowID, client.WatchOptions{Poll: 50 * time.Millisecond}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Result != nil {
			res, mismatch = ev.Result, ev.LiveMismatch
			break
		}
		if ev.Chunk.Stream == guard.StreamStdout {
			shown = append(shown, ev.Chunk.Bytes...)
		}
	}
	if res == nil || string(res.Stdout) != "real line\nreal end\n" || res.Receipt == nil {
		t.Fatalf("result %+v; want the real output, with its receipt", res)
	}
	t.Logf("shown while it ran: %q", shown)
	if string(shown) == string(res.Stdout) {
		t.Skip("the watcher never read the forged details (the host's heartbeat came in between each time)")
	}
	var lm *client.LiveMismatchError
	if !errors.As(mismatch, &lm) || lm.Stream != guard.StreamStdout || lm.Offset != int64(len("real line\n")) {
		t.Errorf("watched %q, result %q, mismatch %v; want a LiveMismatchError at stdout byte 10", shown, res.Stdout, mismatch)
	}
}
