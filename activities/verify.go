package activities

import (
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// loadReviewers reads the worker's reviewers file. A missing or bad file is a ConfigError: the
// operator must fix it, and no retry helps.
func (a *Activities) loadReviewers() (*approval.Reviewers, error) {
	r, err := approval.LoadReviewers(a.reviewers)
	if err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("activities: reviewers file: %v", err)}
	}
	return r, nil
}

// verify checks, on the sandbox host and before anything starts, that in carries an approval
// signed by a key of this worker's own reviewers file for exactly this activity's run: the
// workflow id and run id from the activity info (which a caller cannot choose), the digest
// recomputed from the request, and this worker's task queue; at the time the activity was
// scheduled. Whatever scheduled the activity, a workflow of another type, a reset run or a
// forged input, nothing runs unless a reviewer signed it. A refusal is a guard.ApprovalRefused,
// which is never retried; when the signature check refused, it wraps the *approval.RefusalError.
func (a *Activities) verify(info activity.Info, c guard.Checked, in contract.RunInput) (approval.Verified, error) {
	reviewers, err := a.loadReviewers()
	if err != nil {
		return approval.Verified{}, err
	}
	if !in.Decision.Approve {
		return approval.Verified{}, &guard.ApprovalRefused{Reason: guard.RefusedNoApproval, Msg: "sandbox activity: the input carries no approving decision"}
	}
	digest := guard.Digest(&c)
	want := in.Decision.Fields(info.WorkflowExecution.ID, info.WorkflowExecution.RunID, digest, info.TaskQueue)
	v, err := approval.Verify(reviewers, want, in.Decision.Proof(), info.ScheduledTime)
	if err != nil {
		return approval.Verified{}, &guard.ApprovalRefused{Reason: guard.RefusedNotVerified, Msg: "sandbox activity: the signed decision does not verify for this run", Err: err}
	}
	return v, nil
}
