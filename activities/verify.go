package activities

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// loadReviewers reads the worker's reviewers file, accepting passkey assertions from the
// configured passkey origin only. A missing or bad file is a ConfigError: the operator must fix
// it, and no retry helps.
func (a *Activities) loadReviewers() (*approval.Reviewers, error) {
	r, err := approval.LoadReviewers(a.reviewers)
	if err == nil {
		r, err = r.WithPasskeyOrigin(a.origin)
	}
	if err != nil {
		return nil, &guard.ConfigError{Msg: fmt.Sprintf("activities: reviewers file: %v", err)}
	}
	return r, nil
}

// verify checks, on the sandbox host and before anything starts, that in carries an approval
// signed by a key of this worker's own reviewers file for exactly this activity's run: the
// workflow id and run id from the activity info (which a caller cannot choose), the digest
// recomputed from the request, and this worker's task queue, with the reviewer's principal
// signed (statement version 2, whatever the workflow accepted); on this host's clock, now (not at
// the time the activity was scheduled, which whoever scheduled it chose: an activity can wait
// in its task queue for as long as its schedule-to-start timeout allows). Whatever scheduled the
// activity, a workflow of another type, a reset run or a forged input, nothing runs unless a
// reviewer signed it. A refusal is a guard.ApprovalRefused, which is never retried, wrapping the
// *approval.RefusalError that says why.
func (a *Activities) verify(info activity.Info, c guard.Checked, in contract.RunInput) (approval.Verified, error) {
	reviewers, err := a.loadReviewers()
	if err != nil {
		return approval.Verified{}, err
	}
	if !in.Decision.Approve {
		return approval.Verified{}, &guard.ApprovalRefused{Reason: guard.RefusedNoApproval, Msg: "sandbox activity: the input carries no approving decision"}
	}
	digest := guard.Digest(&c)
	return a.verifyFor(reviewers, info, in.Decision, digest)
}

// verifyFor verifies d on this host, now, against reviewers, for the activity's own run and task
// queue and digest (which the host computed itself), with the reviewer signed (statement version
// 2), and advances the passkey counters of a passkey decision. A refusal is an ApprovalRefused.
func (a *Activities) verifyFor(reviewers *approval.Reviewers, info activity.Info, d contract.Decision, digest string) (approval.Verified, error) {
	want := d.Fields(info.WorkflowExecution.ID, info.WorkflowExecution.RunID, digest, info.TaskQueue)
	// This host's own rule, whatever the run's input says: the statement signs the reviewer.
	want.Version = approval.StatementVersion
	v, err := approval.Verify(reviewers, want, d.Proof(), time.Now())
	if err == nil && v.Method == approval.MethodWebAuthn {
		if a.counters == nil {
			return approval.Verified{}, &guard.ConfigError{Msg: "sandbox activity: refused, nothing ran: a passkey decision, and this host keeps no passkey counters file"}
		}
		err = a.counters.Advance(v) // a counter that did not grow: a replay or a cloned passkey
	}
	var ref *approval.RefusalError
	switch {
	case errors.As(err, &ref):
		return approval.Verified{}, refusal(err)
	case err != nil:
		return approval.Verified{}, &guard.IntegrationError{Op: "sandbox activity: passkey counters", Err: err}
	}
	return v, nil
}

// refusal is the host's refusal of a decision that Verify or StillValid refused: an
// ApprovalRefused (never retried) that wraps the *approval.RefusalError, so errors.Is finds its
// approval.Reason; a lapse on this host's clock (the statement's expiry, the key's valid-before)
// is RefusedExpired.
func refusal(err error) error {
	reason, msg := guard.RefusedNotVerified, "sandbox activity: the signed decision does not verify for this run"
	if errors.Is(err, approval.ReasonExpired) || errors.Is(err, approval.ReasonKeyNotValid) {
		reason, msg = guard.RefusedExpired, "sandbox activity: the approval is not valid on this host's clock now"
	}
	return &guard.ApprovalRefused{Reason: reason, Msg: msg, Err: err}
}
