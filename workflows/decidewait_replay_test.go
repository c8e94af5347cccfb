package workflows

import (
	"bytes"
	"log/slog"
	"os"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// recordedDecideWait was recorded from a real run on an in-process server
// (TestIntegrationDecideWaitAnswersWithTheResult with SANDBOXFLOW_RECORD_HISTORY=1): a quorum of
// 2, carol's approval sent with Wait answered at once, bob's answered once the run had ended,
// with its result, under the run-decide-wait-v1 marker.
const (
	recordedDecideWait   = "testdata/runcode_decide_wait.json"
	recordedDecideWaitID = "recorded-decide-wait"
)

func readHistory(t *testing.T, path string) *historypb.History {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return hist
}

func replayAs(hist *historypb.History, id string) error {
	r := worker.NewWorkflowReplayer()
	Register(r)
	return r.ReplayWorkflowHistoryWithOptions(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id, RunID: hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()},
	})
}

func TestReplayDecideWaitHistory(t *testing.T) {
	if err := replayAs(readHistory(t, recordedDecideWait), recordedDecideWaitID); err != nil {
		t.Fatalf("replay %s: %v", recordedDecideWait, err)
	}
}

// A history from before Wait, whose decision carried "wait": true (a client that knew the field
// sent it; the worker did not, and answered at once): it replays as it was, the decision
// answered at once, with no marker asked for. Without the version check the answer would wait for
// the run's end and the replay would fail.
func TestReplayWaitFromBeforeItIsAnsweredAtOnce(t *testing.T) {
	hist := readHistory(t, recordedHistory)
	edited := 0
	for _, e := range hist.GetEvents() {
		if e.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED {
			continue
		}
		p := e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetArgs().GetPayloads()[0]
		if !bytes.HasPrefix(p.Data, []byte("{")) || bytes.Contains(p.Data, []byte(`"wait"`)) {
			t.Fatalf("the recorded decision %s", p.Data)
		}
		p.Data = append([]byte(`{"wait":true,`), p.Data[1:]...)
		edited++
	}
	if edited != 1 {
		t.Fatalf("%s has %d accepted updates; want the decision's", recordedHistory, edited)
	}
	if err := replayAs(hist, recordedWorkflowID); err != nil {
		t.Fatalf("replay %s with its decision sent with wait: %v", recordedHistory, err)
	}
}
