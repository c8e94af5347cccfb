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
