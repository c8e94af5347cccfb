package workflows

import (
	"log/slog"
	"strings"
	"testing"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// recordedHistory was recorded from a real run on an in-process server (TestRecordReplayHistory
// with SANDBOXFLOW_RECORD_HISTORY=1): a decision with the wrong digest, an approval by update,
// a Python run on the local backend, success.
const recordedHistory = "testdata/runcode_approved.json"

func TestReplayRecordedHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	Register(r)
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, recordedHistory); err != nil {
		t.Fatalf("replay %s: %v", recordedHistory, err)
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
	err := r.ReplayWorkflowHistoryFromJSONFile(quiet, recordedHistory)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "nondeterministic") {
		t.Fatalf("replaying against a workflow without the approval wait: %v; want a nondeterminism error", err)
	}
}
