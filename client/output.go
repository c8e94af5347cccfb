package client

import (
	"errors"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Output is a result as the starter prints it and a model reads it: output as text and the
// duration in milliseconds.
type Output struct {
	Outcome         string       `json:"outcome"`
	OK              bool         `json:"ok"`
	ExitCode        int          `json:"exit_code"`
	TimedOut        bool         `json:"timed_out"`
	Stdout          string       `json:"stdout"`
	Stderr          string       `json:"stderr"`
	StdoutTruncated bool         `json:"stdout_truncated"`
	StderrTruncated bool         `json:"stderr_truncated"`
	Files           []OutputFile `json:"files"`
	FilesTruncated  bool         `json:"files_truncated"`
	DurationMS      int64        `json:"duration_ms"`
	ApprovalID      string       `json:"approval_id"`
	Reviewer        string       `json:"reviewer"`
	Digest          string       `json:"digest"`
	Backend         string       `json:"backend"`
}

// OutputFile is a produced file; Content is base64 in JSON.
type OutputFile struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Content []byte `json:"content"`
}

// NewOutput converts a result. Output bytes that are not valid UTF-8 are replaced when encoded.
func NewOutput(r guard.Result) Output {
	o := Output{
		Outcome: r.Outcome.String(), OK: r.OK, ExitCode: r.ExitCode, TimedOut: r.TimedOut,
		Stdout: string(r.Stdout), Stderr: string(r.Stderr),
		StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated,
		Files: []OutputFile{}, FilesTruncated: r.FilesTruncated,
		DurationMS: r.Duration.Milliseconds(),
		ApprovalID: r.ApprovalID, Reviewer: r.Reviewer, Digest: r.Digest, Backend: r.Backend,
	}
	for _, f := range r.Files {
		o.Files = append(o.Files, OutputFile{Name: f.Name, Size: f.Size, Content: f.Content})
	}
	return o
}

// ErrorOutput is a run's error as the starter prints it: {"error": {"type": ..., "message": ...}}.
type ErrorOutput struct {
	Error ErrorBody `json:"error"`
	// WorkflowID names the run the error is about, when one was started. Optional.
	WorkflowID string `json:"workflow_id,omitempty"`
}

// ErrorBody names the error's type (a guard.TypeXxx name, one of this package's TypeXxx names, or
// "Error" for anything else).
type ErrorBody struct {
	Type     string `json:"type"`
	Message  string `json:"message"`
	Reason   string `json:"reason,omitempty"`
	Reviewer string `json:"reviewer,omitempty"`
}

// NewErrorOutput converts an error.
func NewErrorOutput(err error) ErrorOutput {
	body := ErrorBody{Type: ErrorType(err), Message: err.Error()}
	if body.Type == "" {
		body.Type = "Error"
	}
	var ad *guard.ApprovalDenied
	if errors.As(err, &ad) {
		body.Reason, body.Reviewer = ad.Reason, ad.Reviewer
	}
	return ErrorOutput{Error: body}
}
