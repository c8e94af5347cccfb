package client

import (
	"errors"

	"github.com/sandboxflow/sandboxflow/guard"
)

// A run's result is printed and returned as guard.Result in every door (the starter's JSON, the
// MCP tool's structured content, the inbox, this package's Result): its MarshalJSON writes output as
// text and the duration both as a string and in milliseconds, and nothing the host measured (the
// egress audit, the signal, the image ID, the binary-output flags) is left out on the way.

// WithoutContents returns r with the produced files' contents left out (names and sizes kept), for
// a door that sends the contents separately. r's files are not changed.
func WithoutContents(r guard.Result) guard.Result {
	if r.Files == nil {
		return r
	}
	files := make([]guard.File, len(r.Files))
	for i, f := range r.Files {
		files[i] = guard.File{Name: f.Name, Size: f.Size}
	}
	r.Files = files
	return r
}

// ErrorOutput is a run's error as the starter prints it: {"error": {"type": ..., "message": ...}}.
type ErrorOutput struct {
	Error ErrorBody `json:"error"`
	// WorkflowID names the run the error is about, when one was started. Optional.
	WorkflowID string `json:"workflow_id,omitempty"`
}

// ErrorBody names the error's type (a guard.TypeXxx name, one of this package's TypeXxx names, or
// "Error" for anything else). Reason is an ApprovalDenied's reason ("denied", "expired") or an
// ApprovalRefused's (a guard.RefusedReason); Reviewer is the reviewer who denied.
type ErrorBody struct {
	Type     string `json:"type"`
	Message  string `json:"message"`
	Reason   string `json:"reason,omitempty"`
	Reviewer string `json:"reviewer,omitempty"`
	// By is who cancelled a run that was cancelled before anything ran (a guard.Cancelled,
	// whose reason is Reason).
	By string `json:"by,omitempty"`
	// Rule and Cap are a PolicyRefused's: the policy rule that refused the request, or the cap
	// it would have passed ("waiting.per_agent", ...); its reason is Reason.
	Rule string `json:"rule,omitempty"`
	Cap  string `json:"cap,omitempty"`
}

// NewErrorOutput converts an error.
func NewErrorOutput(err error) ErrorOutput {
	body := ErrorBody{Type: ErrorType(err), Message: err.Error()}
	if body.Type == "" {
		body.Type = "Error"
	}
	var (
		ad *guard.ApprovalDenied
		ar *guard.ApprovalRefused
		cn *guard.Cancelled
		pr *guard.PolicyRefused
	)
	switch {
	case errors.As(err, &pr):
		body.Reason, body.Rule, body.Cap = pr.Reason, pr.Rule, pr.Cap
	case errors.As(err, &cn):
		body.Reason, body.By = cn.Reason, cn.By
	case errors.As(err, &ad):
		body.Reason, body.Reviewer = ad.Reason, ad.Reviewer
	case errors.As(err, &ar):
		body.Reason = string(ar.Reason)
	}
	return ErrorOutput{Error: body}
}
