package historytest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// EnvRecord, set to 1, makes Recorded write the history it checked over its committed fixture.
// A fixture may be older than the code on purpose (recorded before a version marker or the claim
// signal existed, to show that such histories still replay): re-record one only when that is no
// longer what its replay test is for.
const EnvRecord = "SANDBOXFLOW_RECORD_HISTORY"

// Recorded checks a history a test has just recorded from a real run of workflowID: written as
// the JSON the fixtures hold (to a temporary folder), read back as the replay tests read a
// fixture, it replays on r (the worker's workflows registered) as the run it was. It fails t
// when either step fails. Under EnvRecord=1 it then writes the JSON to fixture.
func Recorded(t testing.TB, r worker.WorkflowReplayer, workflowID string, events []*historypb.HistoryEvent, fixture string) {
	t.Helper()
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
	if err != nil {
		t.Fatalf("historytest: marshal the history of %s: %v", workflowID, err)
		return
	}
	data = append(data, '\n')
	file := filepath.Join(t.TempDir(), filepath.Base(fixture))
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatalf("historytest: %v", err)
		return
	}
	if err := Replay(r, workflowID, file); err != nil {
		t.Fatalf("historytest: the history just recorded does not replay: %v", err)
		return
	}
	if os.Getenv(EnvRecord) == "1" {
		if err := os.WriteFile(fixture, data, 0o644); err != nil {
			t.Fatalf("historytest: %v", err)
			return
		}
		t.Logf("recorded %d events in %s", len(events), fixture)
	}
}

// Replay reads the history in file (a fixture's JSON) and replays it on r as the run of
// workflowID that its first event started.
func Replay(r worker.WorkflowReplayer, workflowID, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("historytest: %w", err)
	}
	hist, err := tclient.HistoryFromJSON(bytes.NewReader(data), tclient.HistoryJSONOptions{})
	if err != nil {
		return fmt.Errorf("historytest: read %s: %w", file, err)
	}
	if len(hist.GetEvents()) == 0 {
		return fmt.Errorf("historytest: %s holds no events", file)
	}
	runID := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
	if err := r.ReplayWorkflowHistoryWithOptions(nil, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: workflowID, RunID: runID},
	}); err != nil {
		return fmt.Errorf("historytest: replay %s as %s: %w", file, workflowID, err)
	}
	return nil
}
