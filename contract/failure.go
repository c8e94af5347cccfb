package contract

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sandboxflow/sandboxflow/guard"
)

// ErrorDetails travel as the single detail of every application error sandboxflow sends across
// Temporal, so that a client in any language can read the typed fields:
//
//	{"message": "...", "op": "...", "error": "...", "code_may_have_started": false,
//	 "reason": "denied", "reviewer": "alice"}
//
// Which fields are set depends on the error's type (the application error's Type, one of the
// guard.TypeXxx constants).
type ErrorDetails struct {
	// Message is the Msg of a ToolUsageError, ConfigError or ApprovalRefused, or the Message of
	// an ApprovalDenied.
	Message string `json:"message,omitempty"`
	// Op and Error are an IntegrationError's operation and the text of its cause; Error is also
	// the text of an ApprovalRefused's cause.
	Op    string `json:"op,omitempty"`
	Error string `json:"error,omitempty"`
	// CodeMayHaveStarted is an IntegrationError's flag. A reader that finds it missing must
	// assume true.
	CodeMayHaveStarted *bool `json:"code_may_have_started,omitempty"`
	// Reason and Reviewer are an ApprovalDenied's; Reason is also an ApprovalRefused's
	// (a guard.RefusedReason).
	Reason   string `json:"reason,omitempty"`
	Reviewer string `json:"reviewer,omitempty"`
	// Field is a ReceiptRefused's: what failed ("signature", "host_key", "stdout", ...).
	Field string `json:"field,omitempty"`
	// Receipt is an IntegrationError's sandbox host receipt, for a run that failed after its
	// code may have started.
	Receipt *guard.Receipt `json:"receipt,omitempty"`
	// By is a Cancelled's canceller (its Reason is in Reason).
	By string `json:"by,omitempty"`
	// Rule and Cap are a PolicyRefused's: the rule that refused, or the cap reached (its reason
	// is in Reason).
	Rule string `json:"rule,omitempty"`
	Cap  string `json:"cap,omitempty"`
}

// ToFailure converts a typed guard error into a Temporal application error whose Type is
// the guard.TypeXxx name and whose details are ErrorDetails. ToolUsageError, ConfigError,
// ApprovalDenied, ApprovalRefused and an IntegrationError whose code may have started are
// non-retryable; an IntegrationError from before the code could start is marked retryable, and
// carries as its next retry delay the wait its cause asks for (a rate limit's Retry-After; see
// RetryDelay). An error that carries no guard type is returned unchanged; nil stays nil.
func ToFailure(err error) error {
	var (
		tu *guard.ToolUsageError
		ce *guard.ConfigError
		ie *guard.IntegrationError
		ad *guard.ApprovalDenied
		ar *guard.ApprovalRefused
		sl *guard.SandboxLost
		rr *guard.ReceiptRefused
		cn *guard.Cancelled
		pr *guard.PolicyRefused
	)
	switch guard.TypeOf(err) {
	case guard.TypePolicyRefused:
		errors.As(err, &pr)
		return temporal.NewNonRetryableApplicationError(err.Error(), guard.TypePolicyRefused, nil, ErrorDetails{Rule: pr.Rule, Cap: pr.Cap, Reason: pr.Reason})
	case guard.TypeReceiptRefused:
		errors.As(err, &rr)
		d := ErrorDetails{Message: rr.Msg, Field: rr.Field}
		if rr.Err != nil {
			d.Error = rr.Err.Error()
		}
		return temporal.NewNonRetryableApplicationError(err.Error(), guard.TypeReceiptRefused, nil, d)
	case guard.TypeCancelled:
		errors.As(err, &cn)
		return temporal.NewNonRetryableApplicationError(err.Error(), guard.TypeCancelled, nil, ErrorDetails{By: cn.By, Reason: cn.Reason})
	case guard.TypeSandboxLost:
		errors.As(err, &sl)
		return temporal.NewNonRetryableApplicationError(err.Error(), guard.TypeSandboxLost, nil, ErrorDetails{Message: sl.Msg})
	case guard.TypeToolUsageError:
		errors.As(err, &tu)
		return temporal.NewNonRetryableApplicationError(err.Error(), guard.TypeToolUsageError, nil, ErrorDetails{Message: tu.Msg})
	case guard.TypeConfigError:
		errors.As(err, &ce)
		return temporal.NewNonRetryableApplicationError(err.Error(), guard.TypeConfigError, nil, ErrorDetails{Message: ce.Msg})
	case guard.TypeApprovalDenied:
		errors.As(err, &ad)
		return temporal.NewNonRetryableApplicationError(err.Error(), guard.TypeApprovalDenied, nil,
			ErrorDetails{Message: ad.Message, Reason: ad.Reason, Reviewer: ad.Reviewer})
	case guard.TypeApprovalRefused:
		errors.As(err, &ar)
		d := ErrorDetails{Message: ar.Msg, Reason: string(ar.Reason)}
		if ar.Err != nil {
			d.Error = ar.Err.Error()
		}
		return temporal.NewNonRetryableApplicationError(err.Error(), guard.TypeApprovalRefused, nil, d)
	case guard.TypeIntegrationError:
		errors.As(err, &ie)
		started := ie.CodeMayHaveStarted
		d := ErrorDetails{Op: ie.Op, CodeMayHaveStarted: &started, Receipt: ie.Receipt}
		if ie.Err != nil {
			d.Error = ie.Err.Error()
		}
		return temporal.NewApplicationErrorWithOptions(err.Error(), guard.TypeIntegrationError,
			temporal.ApplicationErrorOptions{NonRetryable: !guard.Retryable(err), Details: []any{d}, NextRetryDelay: retryDelay(err)})
	}
	return err
}

// retryDelayer is an error that knows how long to wait before a retry, such as a rate limit
// with the server's Retry-After (e2b.RateLimitError).
type retryDelayer interface {
	RetryDelay() time.Duration
}

// retryDelay returns the wait a retryable err asks for, or zero.
func retryDelay(err error) time.Duration {
	var rd retryDelayer
	if !guard.Retryable(err) || !errors.As(err, &rd) {
		return 0
	}
	return max(rd.RetryDelay(), 0)
}

// RetryDelay returns the wait before a retry that an activity failure asked for (a server's
// Retry-After carried by ToFailure as the application error's next retry delay), or zero.
func RetryDelay(err error) time.Duration {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return 0
	}
	return max(appErr.NextRetryDelay(), 0)
}

// FromFailure returns the typed guard error that err carries as a Temporal application error (made
// by ToFailure, perhaps wrapped in an activity or workflow execution error), so that
// errors.As finds *guard.ToolUsageError, *guard.ConfigError, *guard.IntegrationError,
// *guard.ApprovalDenied or *guard.ApprovalRefused (whose cause is then the text of the
// original). Clients use it on the error of a RunCode run. An IntegrationError whose details do
// not say otherwise is taken to have possibly started the code. Any other error is returned
// unchanged; nil stays nil.
func FromFailure(err error) error {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return err
	}
	var d ErrorDetails
	hasDetails := appErr.HasDetails() && appErr.Details(&d) == nil
	msg := d.Message
	if !hasDetails {
		msg = appErr.Message()
	}
	switch appErr.Type() {
	case guard.TypeToolUsageError:
		return &guard.ToolUsageError{Msg: msg}
	case guard.TypeConfigError:
		return &guard.ConfigError{Msg: msg}
	case guard.TypeApprovalDenied:
		if !hasDetails {
			return &guard.ApprovalDenied{Reason: guard.DeniedByReviewer, Message: appErr.Message()}
		}
		return &guard.ApprovalDenied{Reason: d.Reason, Reviewer: d.Reviewer, Message: d.Message}
	case guard.TypeSandboxLost:
		return &guard.SandboxLost{Msg: msg}
	case guard.TypeReceiptRefused:
		rr := &guard.ReceiptRefused{Field: d.Field, Msg: msg}
		if d.Error != "" {
			rr.Err = errors.New(d.Error)
		}
		return rr
	case guard.TypeCancelled:
		return &guard.Cancelled{By: d.By, Reason: d.Reason}
	case guard.TypePolicyRefused:
		if !hasDetails {
			return &guard.PolicyRefused{Reason: appErr.Message()}
		}
		return &guard.PolicyRefused{Rule: d.Rule, Cap: d.Cap, Reason: d.Reason}
	case guard.TypeApprovalRefused:
		ar := &guard.ApprovalRefused{Reason: guard.RefusedReason(d.Reason), Msg: msg}
		if d.Error != "" {
			ar.Err = errors.New(d.Error)
		}
		return ar
	case guard.TypeIntegrationError:
		ie := &guard.IntegrationError{Op: d.Op, CodeMayHaveStarted: d.CodeMayHaveStarted == nil || *d.CodeMayHaveStarted, Receipt: d.Receipt}
		switch {
		case !hasDetails:
			ie.Op = appErr.Message()
		case d.Error != "":
			ie.Err = errors.New(d.Error)
		}
		return ie
	}
	return err
}
