package guard

import (
	"errors"
	"fmt"
)

// Type names of the errors as they cross Temporal: the Type of an application error. Any client, in
// any language, can tell the errors apart by these strings.
const (
	TypeToolUsageError   = "ToolUsageError"
	TypeConfigError      = "ConfigError"
	TypeIntegrationError = "IntegrationError"
	TypeApprovalDenied   = "ApprovalDenied"
	TypeApprovalRefused  = "ApprovalRefused"
	TypeCancelled        = "Cancelled"
)

// ToolUsageError reports bad code, language, file names or env in a request. The caller (usually a
// model) can fix the request and try again. It is never retried.
type ToolUsageError struct {
	Msg string
}

func (e *ToolUsageError) Error() string { return "tool usage: " + e.Msg }

// ConfigError reports bad limits or settings: a limit over the policy, network the policy forbids,
// a missing image, the local backend without its flag. It is never retried.
type ConfigError struct {
	Msg string
}

func (e *ConfigError) Error() string { return "config: " + e.Msg }

// IntegrationError reports that a backend failed: the daemon was unreachable, a container could not
// start, the result was unreadable, or the outcome is unknown.
//
// CodeMayHaveStarted says whether the code could have begun to run before the failure. An error
// with it false may be retried; one with it true never is, so that code runs at most once per
// approval.
type IntegrationError struct {
	Op                 string
	Err                error
	CodeMayHaveStarted bool
	// Receipt is the sandbox host's receipt of a run that failed after its code may have
	// started (outcome "error"), when the host signs receipts.
	Receipt *Receipt
}

func (e *IntegrationError) Error() string {
	if e.Err == nil {
		return "integration: " + e.Op
	}
	return fmt.Sprintf("integration: %s: %v", e.Op, e.Err)
}

func (e *IntegrationError) Unwrap() error { return e.Err }

// Denial reasons carried by ApprovalDenied.
const (
	DeniedByReviewer = "denied"
	DeniedExpired    = "expired"
)

// ApprovalDenied reports that a run was not approved: a reviewer denied it (Reason "denied") or no
// decision came before the approval timeout (Reason "expired"). Nothing ran.
type ApprovalDenied struct {
	Reason   string
	Reviewer string
	Message  string
}

func (e *ApprovalDenied) Error() string {
	switch {
	case e.Reason == DeniedByReviewer && e.Message != "":
		return fmt.Sprintf("approval denied by %s: %s", e.Reviewer, e.Message)
	case e.Reason == DeniedByReviewer:
		return fmt.Sprintf("approval denied by %s", e.Reviewer)
	case e.Message != "":
		return "approval " + e.Reason + ": " + e.Message
	default:
		return "approval " + e.Reason
	}
}

// Cancelled reports that a run was cancelled before its code could start (while it was checked
// or waited for a decision, or before the sandbox took it): nothing ran. By is who asked, as the
// cancel request named them; Reason is theirs. It is never retried. A run cancelled while its code
// may have been running ends with a result instead (Outcome cancelled, with the output printed
// before).
type Cancelled struct {
	By     string
	Reason string
}

func (e *Cancelled) Error() string {
	msg := "cancelled before anything ran"
	if e.By != "" {
		msg = "cancelled by " + e.By + " before anything ran"
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// RefusedReason says why a sandbox host refused to run an approved request. Its values are the
// "reason" of an ApprovalRefused across Temporal.
type RefusedReason string

// Reasons carried by ApprovalRefused.
const (
	// RefusedNoApproval: the sandbox activity's input carries no approving decision, approval id
	// or reviewer.
	RefusedNoApproval RefusedReason = "no_approval"
	// RefusedMismatch: the input's approval id or digest differs from its decision's, or the
	// decision's digest from the request's.
	RefusedMismatch RefusedReason = "mismatch"
	// RefusedNotVerified: the signed decision does not verify against this host's reviewers for
	// this run (the cause is the approval package's refusal).
	RefusedNotVerified RefusedReason = "not_verified"
	// RefusedExpired: the statement's expiry or the key's valid-before has passed on the sandbox
	// host's clock, when the activity started or after the claim's history read, right before
	// the code would start (the cause is the approval package's refusal).
	RefusedExpired RefusedReason = "expired"
	// RefusedNotScheduled: the run's history schedules no sandbox activity of this id.
	RefusedNotScheduled RefusedReason = "not_scheduled"
	// RefusedAlreadyUsed: the run's history shows the approval used, or claimed and never
	// released, by another sandbox activity: an approval runs code once.
	RefusedAlreadyUsed RefusedReason = "already_used"
	// RefusedQuorum: the input carries fewer approvals, by distinct reviewers with distinct
	// keys, than this host's own policy asks of the request (Policy.QuorumFor), or approvals
	// that do not agree with each other (another digest, an edit no approver made).
	RefusedQuorum RefusedReason = "quorum"
	// RefusedImage: the request names (Checked.Image, which its digest binds) another image
	// than the one this host's backend would run it in, or this host's backend runs no image
	// it can name.
	RefusedImage RefusedReason = "image"
	// RefusedPolicy: this host's policy rules (package rules) refuse the request, or ask for a
	// quorum or a group's approvals that the input's approvals do not hold.
	RefusedPolicy RefusedReason = "policy"
)

// ApprovalRefused reports that a sandbox host refused to run a request although the workflow
// holds an approval: the approval does not verify on the host, or was already used. Nothing ran;
// the fault is not the operator's configuration. It is never retried. Err is the cause, when one
// is known (an *approval.RefusalError for RefusedNotVerified); across Temporal only its text
// travels.
type ApprovalRefused struct {
	Reason RefusedReason
	Msg    string
	Err    error
}

func (e *ApprovalRefused) Error() string {
	msg := fmt.Sprintf("approval refused (%s), nothing ran: %s", e.Reason, e.Msg)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ApprovalRefused) Unwrap() error { return e.Err }

func toolUsagef(format string, args ...any) error {
	return &ToolUsageError{Msg: fmt.Sprintf(format, args...)}
}

// misread reports what pysource refuses (source or a name read other than it is drawn) as a
// ToolUsageError with the same message: the caller can fix the request. A nil err stays nil.
func misread(err error) error {
	if err == nil {
		return nil
	}
	return &ToolUsageError{Msg: err.Error()}
}

func configf(format string, args ...any) error {
	return &ConfigError{Msg: fmt.Sprintf(format, args...)}
}

// TypeOf returns the Temporal type name of err's first typed guard error, or "" if it has none.
func TypeOf(err error) string {
	var (
		tu *ToolUsageError
		ce *ConfigError
		ie *IntegrationError
		ad *ApprovalDenied
		ar *ApprovalRefused
		sl *SandboxLost
		rr *ReceiptRefused
		cn *Cancelled
		pe *PackageError
		pr *PolicyRefused
	)
	switch {
	case errors.As(err, &cn):
		return TypeCancelled
	case errors.As(err, &pe):
		return TypePackageError
	case errors.As(err, &pr):
		return TypePolicyRefused
	case errors.As(err, &tu):
		return TypeToolUsageError
	case errors.As(err, &ce):
		return TypeConfigError
	case errors.As(err, &ad):
		return TypeApprovalDenied
	case errors.As(err, &ar):
		return TypeApprovalRefused
	case errors.As(err, &sl):
		return TypeSandboxLost
	case errors.As(err, &rr):
		return TypeReceiptRefused
	case errors.As(err, &ie):
		return TypeIntegrationError
	}
	return ""
}

// Retryable reports whether err may be retried without risking a second run of approved code.
// It is the one place that decides: ToolUsageError, ConfigError, ApprovalDenied and ApprovalRefused
// never are; an
// IntegrationError is only while the code cannot have started; any other error is treated as an
// outcome-unknown failure and is not retried.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	switch TypeOf(err) {
	case TypeIntegrationError:
		var ie *IntegrationError
		errors.As(err, &ie)
		return !ie.CodeMayHaveStarted
	case TypePackageError:
		var pe *PackageError
		errors.As(err, &pe)
		return pe.Reason == PackageIndexUnreachable
	default:
		return false
	}
}
