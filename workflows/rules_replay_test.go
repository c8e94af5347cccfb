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

// recordedRules was recorded from a real run on an in-process server (TestRecordRulesHistory
// with SANDBOXFLOW_RECORD_HISTORY=1): a rule needing one approval from security, alice's approval
// counted, bob's (security) approval, the code run on the local backend.
const recordedRules = "testdata/runcode_rules_group.json"

// recordedRulesID is the workflow id of the recorded run.
const recordedRulesID = "recorded-rules"

func replayRules(t *testing.T, logger log.Logger, runID string) error {
	t.Helper()
	f, err := os.Open(recordedRules)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", recordedRules, err)
	}
	if runID == "" {
		runID = hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
	}
	r := worker.NewWorkflowReplayer()
	Register(r)
	return r.ReplayWorkflowHistoryWithOptions(logger, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: recordedRulesID, RunID: runID},
	})
}

// The recorded run under a group rule replays; replayed as another run, its approvals no longer
// verify, the workflow schedules no sandbox activity, and the replay fails.
func TestReplayRecordedRulesHistory(t *testing.T) {
	if err := replayRules(t, nil, ""); err != nil {
		t.Fatalf("replay %s: %v", recordedRules, err)
	}
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	err := replayRules(t, quiet, "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f")
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "nondeterministic") && !strings.Contains(err.Error(), "TMPRL1100") {
		t.Fatalf("replaying the rules run as another run: %v; want a nondeterminism error", err)
	}
}
