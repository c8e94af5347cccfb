package workflows

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// recordedQuorum was recorded from a real run on an in-process server (TestRecordQuorumHistory
// with SANDBOXFLOW_RECORD_HISTORY=1): a quorum of 2, bob's approval, alice's edit (checked again
// in a local activity in the update's handler), bob's approval of the original code refused,
// bob's approval of the edited code, the edited code run on the local backend.
const recordedQuorum = "testdata/runcode_quorum_edit.json"

// recordedQuorumID is the workflow id of the recorded quorum run.
const recordedQuorumID = "recorded-quorum"

func replayQuorum(t *testing.T, r worker.WorkflowReplayer, logger log.Logger, runID string) error {
	t.Helper()
	f, err := os.Open(recordedQuorum)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", recordedQuorum, err)
	}
	if runID == "" {
		runID = hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
	}
	return r.ReplayWorkflowHistoryWithOptions(logger, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: recordedQuorumID, RunID: runID},
	})
}

func TestReplayRecordedQuorumHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	Register(r)
	if err := replayQuorum(t, r, nil, ""); err != nil {
		t.Fatalf("replay %s: %v", recordedQuorum, err)
	}
}

// Replayed as another run, the approvals and the edit no longer verify: the workflow schedules
// no sandbox activity, and the replay fails.
func TestReplayQuorumAsAnotherRunRefusesTheApprovals(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	Register(r)
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	err := replayQuorum(t, r, quiet, "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f")
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "nondeterministic") && !strings.Contains(err.Error(), "TMPRL1100") {
		t.Fatalf("replaying the quorum run as another run: %v; want a nondeterminism error", err)
	}
}
