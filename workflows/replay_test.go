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

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// recordedHistory was recorded from a real run on an in-process server (TestRecordReplayHistory
// with SANDBOXFLOW_RECORD_HISTORY=1): a signal signed for another run (rejected), an approval
// signed by a reviewer key and sent by update, a Python run on the local backend, success.
const recordedHistory = "testdata/runcode_signed.json"

// recordedWorkflowID is the workflow id of the recorded run: its decisions are signed for it.
const recordedWorkflowID = "recorded-runcode"

// replayRecorded replays the recorded history as the run it was: the signatures in it bind
// its workflow id and run id, which the workflow verifies again on replay. runID overrides
// the recorded run id when not empty.
func replayRecorded(t *testing.T, r worker.WorkflowReplayer, logger log.Logger, runID string) error {
	t.Helper()
	f, err := os.Open(recordedHistory)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", recordedHistory, err)
	}
	if runID == "" {
		runID = hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
	}
	return r.ReplayWorkflowHistoryWithOptions(logger, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: recordedWorkflowID, RunID: runID},
	})
}

func TestReplayRecordedHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	Register(r)
	if err := replayRecorded(t, r, nil, ""); err != nil {
		t.Fatalf("replay %s: %v", recordedHistory, err)
	}
}

// TestReplayAsAnotherRunRefusesTheDecision replays the recorded history as if it were another
// run (what a reset does): the approval, signed for the recorded run, no longer verifies, so
// the workflow no longer schedules the sandbox activity, and the replay fails.
func TestReplayAsAnotherRunRefusesTheDecision(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	Register(r)
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	err := replayRecorded(t, r, quiet, "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f")
	// TMPRL1100 is the SDK's code for a history the workflow no longer produces.
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "nondeterministic") && !strings.Contains(err.Error(), "TMPRL1100") {
		t.Fatalf("replaying as another run: %v; want a nondeterminism error (the approval refused)", err)
	}
}

// skipsTheApproval is RunCode with its approval wait removed: replaying the recorded history
// against it must fail, which shows the replay test checks the workflow's commands.
func skipsTheApproval(ctx workflow.Context, in contract.Input) (guard.Result, error) {
	r := &runCode{status: contract.Status{State: contract.StatusChecking}}
	check, err := r.check(ctx, in)
	if err != nil {
		return guard.Result{}, err
	}
	r.checked = check.Checked
	r.sandboxQueue = sandboxQueue(in, check.Run, workflow.GetInfo(ctx).TaskQueueName)
	return r.run(ctx, check.Run, contract.Decision{ApprovalID: "8a6e0804-2bd0-4672-b79d-d97027f9071a", Reviewer: "nobody", Digest: r.checked.Digest})
}

func TestReplayDetectsAChangedWorkflow(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(skipsTheApproval, workflow.RegisterOptions{Name: contract.WorkflowName})
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	err := replayRecorded(t, r, quiet, "")
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "nondeterministic") {
		t.Fatalf("replaying against a workflow without the approval wait: %v; want a nondeterminism error", err)
	}
}

// recordedSession was recorded from a real session on an in-process server
// (TestIntegrationSession with SANDBOXFLOW_RECORD_HISTORY=1): a decision signed for another run
// (refused by the validator, so not in history), two cells approved by update, each claimed by
// the host, then closed.
const recordedSession = "testdata/session_signed.json"

// recordedSessionID is the workflow id of the recorded session: its decisions bind it.
const recordedSessionID = "recorded-session"

func replaySession(t *testing.T, r worker.WorkflowReplayer, logger log.Logger, runID string) error {
	t.Helper()
	f, err := os.Open(recordedSession)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", recordedSession, err)
	}
	if runID == "" {
		runID = hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
	}
	return r.ReplayWorkflowHistoryWithOptions(logger, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: recordedSessionID, RunID: runID},
	})
}

func TestReplayRecordedSession(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	Register(r)
	if err := replaySession(t, r, nil, ""); err != nil {
		t.Fatalf("replay %s: %v", recordedSession, err)
	}
}

// TestReplaySessionAsAnotherRunRefusesItsCells replays the recorded session as another run
// (what a reset does): the cells' approvals, signed for the recorded run, no longer verify, so
// the workflow schedules no cell, and the replay fails.
func TestReplaySessionAsAnotherRunRefusesItsCells(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	Register(r)
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	err := replaySession(t, r, quiet, "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f")
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "nondeterministic") && !strings.Contains(err.Error(), "TMPRL1100") {
		t.Fatalf("replaying the session as another run: %v; want a nondeterminism error (the approvals refused)", err)
	}
}
