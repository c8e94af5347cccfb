package workflows

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// recordedReceipt was recorded from a real run on an in-process server (TestRecordReceiptHistory
// with SANDBOXFLOW_RECORD_HISTORY=1): a local-backend run whose host signed a receipt, verified by
// the workflow against the hosts file its check recorded (the receipt-v1 marker).
const (
	recordedReceipt           = "testdata/runcode_receipt.json"
	recordedReceiptWorkflowID = "recorded-receipt"
)

// replayReceipt replays the recorded receipt history, its sandbox result changed by edit (nil:
// as recorded).
func replayReceipt(t *testing.T, edit func(res []byte) []byte) error {
	t.Helper()
	f, err := os.Open(recordedReceipt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", recordedReceipt, err)
	}
	if edit != nil {
		edited := 0
		for _, e := range hist.GetEvents() {
			if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
				p := e.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()[0]
				p.Data = edit(p.Data)
				edited++
			}
		}
		if edited != 1 {
			t.Fatalf("%s has %d completed activities; want the sandbox activity's", recordedReceipt, edited)
		}
	}
	r := worker.NewWorkflowReplayer()
	Register(r)
	return r.ReplayWorkflowHistoryWithOptions(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: recordedReceiptWorkflowID, RunID: hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()},
	})
}

func TestReplayReceiptHistory(t *testing.T) {
	if err := replayReceipt(t, nil); err != nil {
		t.Fatalf("replay %s: %v", recordedReceipt, err)
	}
}

// TestReplayRefusesAnEditedResult: the same history with the sandbox result's output changed
// after the host signed it (what a writer to the server's database could do) no longer replays:
// the workflow, checking the receipt again, fails the run with a ReceiptRefused instead of
// completing it.
func TestReplayRefusesAnEditedResult(t *testing.T) {
	err := replayReceipt(t, func(res []byte) []byte {
		if !bytes.Contains(res, []byte("the real output")) {
			t.Fatalf("the recorded result does not hold its output: %s", res)
		}
		return bytes.Replace(res, []byte("the real output"), []byte("the fake output"), 1)
	})
	// The replayed workflow fails the run where the history completes it.
	if err == nil || !strings.Contains(err.Error(), "result refused (stdout)") || !strings.Contains(err.Error(), "ReceiptRefused") {
		t.Fatalf("replaying an edited result: %v; want the replay to fail the run with a ReceiptRefused for stdout", err)
	}
}
