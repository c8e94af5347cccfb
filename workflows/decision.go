package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// refusal returns who made d, or why d cannot be accepted now. It reads the workflow's state and
// never changes it, so the update validator can use it. The signature is verified against the
// reviewer keys the check recorded, for this run (its workflow id and its run id, read afresh so
// that a reset run has its own), the recorded digest and the sandbox task queue, at the
// workflow's time.
func (r *runCode) refusal(ctx workflow.Context, d contract.Decision) (approval.Verified, *contract.Rejection) {
	if r.decision != nil {
		return approval.Verified{}, &contract.Rejection{Reason: contract.RejectAlreadyDecided,
			Msg: fmt.Sprintf("already decided: decision %s by %s was accepted", r.decision.ApprovalID, r.decision.Reviewer)}
	}
	if r.cancel != nil {
		return approval.Verified{}, &contract.Rejection{Reason: contract.RejectNotWaiting, Msg: "not waiting for a decision: the run was cancelled by " + r.cancel.By}
	}
	switch r.status.State {
	case contract.StatusAwaitingApproval:
	case contract.StatusChecking:
		return approval.Verified{}, &contract.Rejection{Reason: contract.RejectNotWaiting, Msg: "not waiting for a decision: the request is still being checked"}
	default:
		return approval.Verified{}, &contract.Rejection{Reason: contract.RejectNotWaiting, Msg: "not waiting for a decision: the run is " + r.status.State}
	}
	digest := r.checked.Digest
	if d.Edit != nil {
		if rej := r.editRefusal(d); rej != nil {
			return approval.Verified{}, rej
		}
		digest = d.Digest // the edited request's, which its check must confirm (decideEdit)
	} else if rej := d.Problem(digest); rej != nil {
		return approval.Verified{}, rej
	}
	info := workflow.GetInfo(ctx)
	want := d.Fields(info.WorkflowExecution.ID, info.WorkflowExecution.RunID, digest, r.sandboxQueue)
	want.Version = r.statementVersion
	// Verify is a pure function of its arguments (no clock, randomness or I/O); workflowcheck
	// flags it only for the reflection inside crypto/ecdsa's ASN.1 parsing.
	v, err := approval.Verify(r.reviewers, want, d.Proof(), workflow.Now(ctx)) //workflowcheck:ignore
	if err != nil {
		return approval.Verified{}, &contract.Rejection{Reason: contract.RejectOther, Err: err}
	}
	if rej := r.duplicate(d, v); rej != nil {
		return approval.Verified{}, rej
	}
	return v, nil
}

// refusalKV is the log fields of a refusal: why, its typed reason ("rejection", a
// contract.RejectReason, which metrics reads), and for a signature the approval package's reason
// and field.
func refusalKV(rej *contract.Rejection) []any {
	kv := []any{"why", rej.Error(), "rejection", rej.Reason}
	var ref *approval.RefusalError
	if errors.As(rej, &ref) {
		kv = append(kv, "reason", string(ref.Reason))
		if ref.Field != "" {
			kv = append(kv, "field", ref.Field)
		}
	}
	return kv
}

// sandboxQueue is the task queue the sandbox activity runs on: the run's own choice, else the
// checking worker's setting, else the workflow's task queue.
func sandboxQueue(in contract.Input, opts contract.RunOptions, workflowQueue string) string {
	switch {
	case in.SandboxTaskQueue != "":
		return in.SandboxTaskQueue
	case opts.TaskQueue != "":
		return opts.TaskQueue
	}
	return workflowQueue
}

// notPickedUp returns the error that ends a run whose approved activity waited in the sandbox
// task queue past its ScheduleToStart timeout: no sandbox worker took it, so the code never
// started and the approval was not used. It is never retried. Other errors return nil.
func (r *runCode) notPickedUp(err error, timeout time.Duration) error {
	var te *temporal.TimeoutError
	if !errors.As(err, &te) || te.TimeoutType() != enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
		return nil
	}
	return &guard.IntegrationError{
		Op: "run sandbox",
		Err: fmt.Errorf("no sandbox worker took the run from task queue %s within %s; the code did not start and the approval was not used (send a new decision to a new run): %w",
			r.sandboxQueue, timeout, err),
	}
}
