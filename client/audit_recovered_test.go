package client

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/guard"
)

// TestAuditReadsARecoveredResult: a run that took a late result has no completed sandbox
// activity; the record takes the result and its receipt from the workflow's own result, and
// only when it is marked recovered, never over a sandbox activity's result.
func TestAuditReadsARecoveredResult(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	completed := func(res guard.Result) *historypb.HistoryEvent {
		p, err := dc.ToPayloads(res)
		if err != nil {
			t.Fatal(err)
		}
		return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes{
				WorkflowExecutionCompletedEventAttributes: &historypb.WorkflowExecutionCompletedEventAttributes{Result: p}}}
	}
	rec := &guard.Receipt{Statement: "the host's statement", Signature: "its signature"}
	recovered := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("late\n"), Receipt: rec,
		Recovered: &guard.Recovered{At: time.Unix(1, 0).UTC(), How: guard.RecoveredLateResult, ActivityID: "7", Timeout: "heartbeat"}}
	inTime := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("in time\n")}

	for _, tc := range []struct {
		name      string
		activity  *guard.Result // the sandbox activity's result, if it completed
		workflow  guard.Result
		wantOut   string
		wantRecov bool
	}{
		{"recovered", nil, recovered, "late\n", true},
		{"not marked recovered", nil, inTime, "", false},
		{"the activity's result wins", &inTime, recovered, "in time\n", false},
	} {
		h := &runHistory{dc: dc, activityIDs: map[int64]bool{}}
		h.rec.Result = tc.activity
		if err := h.read(completed(tc.workflow)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		switch got := h.rec.Result; {
		case tc.wantOut == "" && got != nil:
			t.Errorf("%s: record holds result %+v; want none", tc.name, got)
		case tc.wantOut != "" && (got == nil || string(got.Stdout) != tc.wantOut || (got.Recovered != nil) != tc.wantRecov):
			t.Errorf("%s: record holds result %+v; want stdout %q, recovered %v", tc.name, got, tc.wantOut, tc.wantRecov)
		case tc.wantRecov && (h.rec.Receipt == nil || *h.rec.Receipt != *rec):
			t.Errorf("%s: record's receipt %+v; want the recovered result's", tc.name, h.rec.Receipt)
		}
	}
}
