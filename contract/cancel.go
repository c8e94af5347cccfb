package contract

import "unicode/utf8"

// UpdateCancel is the update that cancels a RunCode run: it carries a CancelRequest and returns a
// CancelResult. Its validator refuses a request that names no one, one with a reason over
// MaxCancelReasonBytes, and any request to a run that has ended or is already cancelled. An
// accepted request is recorded in the status (Status.Cancel) and ends the run: nothing runs if the
// code had not been handed to a sandbox; a sandbox running it is stopped and the run's result is
// the output printed before, with Outcome cancelled and Result.Cancelled naming who asked. It
// never accepts, changes or makes a decision: a cancel cannot make code run.
const UpdateCancel = "cancel"

// CancelRejectedType is the Type of the application error with which the update "cancel" refuses
// a request.
const CancelRejectedType = "CancelRejected"

// MaxCancelReasonBytes bounds a cancel request's reason.
const MaxCancelReasonBytes = 1024

// CancelRequest is the update "cancel"'s argument. By is who asks, as the caller names them (the
// signed-in reviewer's principal in the inbox; the orchestrator's name from the client): the
// run records it as said, for people to read, and it decides nothing else.
type CancelRequest struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
}

// CancelResult is what the update "cancel" returns: the state the run was in when the request was
// accepted (StatusChecking, StatusAwaitingApproval or StatusRunning). The run ends soon after; its
// result (or, when nothing ran, its *guard.Cancelled error) says how.
type CancelResult struct {
	State string `json:"state"`
	By    string `json:"by"`
}

// Refusal returns why the update "cancel" refuses r, whatever the run's state, or "".
func (r CancelRequest) Refusal() string {
	switch {
	case r.By == "":
		return "a cancel request must name who asks (by)"
	case !utf8.ValidString(r.By) || !utf8.ValidString(r.Reason):
		return "a cancel request must be UTF-8"
	case len(r.By) > MaxCancelReasonBytes || len(r.Reason) > MaxCancelReasonBytes:
		return "a cancel request's by and reason must be at most 1024 bytes each"
	}
	return ""
}
