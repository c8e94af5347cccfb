package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Type names of the client's own errors, as ErrorOutput reports them next to guard's.
const (
	TypeNotRunCode  = "NotRunCode"
	TypeNoWorker    = "NoWorker"
	TypeWaitTimeout = "WaitTimeout"
	TypeUsageError  = "UsageError"
	// TypeCheckUnanswered names a *CheckUnansweredError.
	TypeCheckUnanswered = "CheckUnanswered"
)

// NotRunCodeError reports a workflow id that names a workflow of another type: show, approve,
// deny and result refuse it before they query, update or wait.
type NotRunCodeError struct {
	WorkflowID string
	// Type is the workflow type the id names.
	Type string
}

func (e *NotRunCodeError) Error() string {
	return fmt.Sprintf("client: workflow %s is a %s, not a RunCode run", e.WorkflowID, e.Type)
}

// ErrorType returns TypeNotRunCode.
func (e *NotRunCodeError) ErrorType() string { return TypeNotRunCode }

// NoWorkerError reports that no worker polls the task queue a run would be started on, so the run
// could never be checked: Start returns it at once rather than wait.
type NoWorkerError struct {
	TaskQueue, Namespace string
}

func (e *NoWorkerError) Error() string {
	where := fmt.Sprintf("task queue %q", e.TaskQueue)
	if e.Namespace != "" {
		where += fmt.Sprintf(" in namespace %q", e.Namespace)
	}
	return "client: no worker polls " + where + ": start a worker on it, or pass the task queue the workers use (--task-queue, SANDBOXFLOW_TASK_QUEUE)"
}

// ErrorType returns TypeNoWorker.
func (e *NoWorkerError) ErrorType() string { return TypeNoWorker }

// WaitTimeoutError reports that a run did not end within the time the caller would wait. The run
// goes on; ask again later.
type WaitTimeoutError struct {
	WorkflowID string
	Timeout    time.Duration
	// State is the run's state when the wait ended, if it could be read.
	State string
	Err   error
}

func (e *WaitTimeoutError) Error() string {
	msg := fmt.Sprintf("client: run %s did not end within %s", e.WorkflowID, e.Timeout)
	if e.State != "" {
		msg += " (state " + e.State + ")"
	}
	return msg
}

func (e *WaitTimeoutError) Unwrap() error { return e.Err }

// ErrorType returns TypeWaitTimeout.
func (e *WaitTimeoutError) ErrorType() string { return TypeWaitTimeout }

// CheckUnansweredError reports that Start started a run but could not learn whether its check
// passed: the status query kept failing (a busy or unreachable server) for longer than
// Options.CheckWait, or failed in a way asking again does not cure. The run exists and may be
// waiting for a reviewer; `starter show` or Status asks again later.
type CheckUnansweredError struct {
	WorkflowID, RunID string
	Err               error
}

func (e *CheckUnansweredError) Error() string {
	return fmt.Sprintf("client: run %s was started, but its status query did not answer: %v (the run may be waiting for a reviewer; ask again with `starter show %s`)", e.WorkflowID, e.Err, e.WorkflowID)
}

func (e *CheckUnansweredError) Unwrap() error { return e.Err }

// ErrorType returns TypeCheckUnanswered.
func (e *CheckUnansweredError) ErrorType() string { return TypeCheckUnanswered }

// typedError is an error that names its type for ErrorOutput.
type typedError interface {
	error
	ErrorType() string
}

// ErrorType returns the type name of err: a guard.TypeXxx name, one of this package's TypeXxx
// names, or "" for an error of no known type.
func ErrorType(err error) string {
	if t := guard.TypeOf(err); t != "" {
		return t
	}
	var te typedError
	if errors.As(err, &te) {
		return te.ErrorType()
	}
	return ""
}
