package contract

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// RejectReason says why the workflow rejected a reviewer's decision. Its values label
// sandboxflow_decision_refusals_total and travel as the "reason" of a DecisionRejected error.
type RejectReason string

// Reasons for a rejected decision, each with what it means. RejectOther is chiefly a signature
// that does not verify: the Rejection's Err is then the *approval.RefusalError.
const (
	RejectAlreadyDecided RejectReason = "already_decided" // another decision was accepted first
	RejectNotWaiting     RejectReason = "not_waiting"     // the run is being checked, or waits no more
	RejectApprovalID     RejectReason = "approval_id"     // missing, or not a UUID
	RejectReviewer       RejectReason = "reviewer"        // oversized, not UTF-8, control characters
	RejectReasonText     RejectReason = "reason"          // oversized, or not UTF-8
	RejectMissingDigest  RejectReason = "missing_digest"  // an approval without its digest
	RejectWrongDigest    RejectReason = "wrong_digest"    // another request's digest
	RejectOther          RejectReason = "other"           // anything else
	// RejectDuplicate: a run that needs several approvals already has one by this principal,
	// this key or this approval id.
	RejectDuplicate RejectReason = "duplicate_approver"
	// RejectEdit: an edit that cannot be taken (malformed, sent as a signal, the policy refuses
	// the edited request, or its digest is not the one signed).
	RejectEdit RejectReason = "edit"
)

// Rejection is the workflow's refusal of a decision: a typed reason and what was wrong. Its Error
// is the text a reviewer reads (Status.LastRejection, the update's error message).
type Rejection struct {
	Reason RejectReason
	// Msg says what was wrong. Optional when Err says it.
	Msg string
	// Err is the cause, when one is known. Optional.
	Err error
}

func (e *Rejection) Error() string {
	switch {
	case e.Msg == "" && e.Err != nil:
		return e.Err.Error()
	case e.Err != nil:
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Rejection) Unwrap() error { return e.Err }

// Failure is the rejection as the update "decide" returns it: a non-retryable application error
// of type DecisionRejectedType whose message is the rejection's text and whose details carry
// the reason (ErrorDetails.Reason).
func (e *Rejection) Failure() error {
	return temporal.NewNonRetryableApplicationError(e.Error(), DecisionRejectedType, nil,
		ErrorDetails{Message: e.Error(), Reason: string(e.Reason)})
}

// RejectionOf returns the rejection err carries: a *Rejection in err's chain, or one read back
// from a DecisionRejected application error (an update's answer). A rejection without details
// (from an older worker) has reason RejectOther.
func RejectionOf(err error) (*Rejection, bool) {
	var rej *Rejection
	if errors.As(err, &rej) {
		return rej, true
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != DecisionRejectedType {
		return nil, false
	}
	var d ErrorDetails
	if !appErr.HasDetails() || appErr.Details(&d) != nil || d.Reason == "" {
		return &Rejection{Reason: RejectOther, Msg: appErr.Message()}, true
	}
	return &Rejection{Reason: RejectReason(d.Reason), Msg: d.Message}, true
}
