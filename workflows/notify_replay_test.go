package workflows

import (
	"os"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// notifyHistory was recorded from a real run (notify's TestRecordNotifyHistory with
// SANDBOXFLOW_RECORD_HISTORY=1): a run in a conversation, under notify-v1 (its version marker,
// SandboxConversation, and the notify activity delivered by webhook), approved by update and run.
const notifyHistory = "testdata/runcode_notify.json"

// TestReplayNotifyHistory replays it: the notify step is deterministic. (The older histories,
// recorded without the marker, replay without the step: TestReplayRecordedHistory.)
func TestReplayNotifyHistory(t *testing.T) {
	f, err := os.Open(notifyHistory)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", notifyHistory, err)
	}
	r := worker.NewWorkflowReplayer()
	Register(r)
	runID := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
	if err := r.ReplayWorkflowHistoryWithOptions(nil, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: "recorded-notify", RunID: runID},
	}); err != nil {
		t.Fatalf("replay %s: %v", notifyHistory, err)
	}
}
