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

// WaitTimeoutError reports that a run, or a session's cell, did not end within the time the
// caller would wait. It goes on; ask again later.
type WaitTimeoutError struct {
	WorkflowID string
	// Cell is the session's cell waited for; 0 for a run.
	Cell    int
	Timeout time.Duration
	// State is the run's (or the cell's) state when the wait ended, if it could be read.
	State string
	Err   error
}

func (e *WaitTimeoutError) Error() string {
	what := "run " + e.WorkflowID
	if e.Cell > 0 {
		what = Cell(e.WorkflowID, e.Cell).String()
	}
	msg := fmt.Sprintf("client: %s did not end within %s", what, e.Timeout)
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

// TypeNotSession names a *NotSessionError; TypeCellMismatch a *CellMismatchError.
const (
	TypeNotSession   = "NotSession"
	TypeCellMismatch = "CellMismatch"
)

// NotSessionError reports a workflow id that names a workflow that is not a Session: the session
// commands refuse it before they query, update or sign.
type NotSessionError struct {
	WorkflowID string
	// Type is the workflow type the id names.
	Type string
}

func (e *NotSessionError) Error() string {
	return fmt.Sprintf("client: workflow %s is a %s, not a Session", e.WorkflowID, e.Type)
}

// ErrorType returns TypeNotSession.
func (e *NotSessionError) ErrorType() string { return TypeNotSession }

// CellMismatchError reports a session status that shows one thing and asks to sign another: a
// field of one of its cells (or of the session) is not what the cells it shows compute to
// (CellStatementFor). Do not approve: the session's workflow worker may not be sandboxflow's.
type CellMismatchError struct {
	SessionID string
	// Cell is the cell whose field differs; 0 for a field of the session itself.
	Cell int
	// Field names it: "code_digest", "chain", "digest", "result_digest", "code_bytes",
	// "language", "result", "settings", "cells", "state".
	Field string
	// Shown is what the status shows; Computed what its cells compute (empty when nothing can
	// be computed).
	Shown, Computed string
}

func (e *CellMismatchError) Error() string {
	what := "the session's " + e.Field
	if e.Cell > 0 {
		what = fmt.Sprintf("cell %d's %s", e.Cell, e.Field)
	}
	msg := fmt.Sprintf("client: session %s: %s", e.SessionID, what)
	if e.Computed != "" {
		msg += fmt.Sprintf(" is %.80q, but what the status shows computes %s", e.Shown, e.Computed)
	} else {
		msg += fmt.Sprintf(" (%.80q) does not agree with what the status shows", e.Shown)
	}
	return msg + ": do not approve; the session's workflow worker may not be sandboxflow's"
}

// ErrorType returns TypeCellMismatch.
func (e *CellMismatchError) ErrorType() string { return TypeCellMismatch }

// TypeCellNotRun names a *CellNotRunError.
const TypeCellNotRun = "CellNotRun"

// CellNotRunError reports a cell that ended without a result and was not denied: dropped when
// its session ended while it waited, or failed on the sandbox host (State contract.StatusError;
// Msg is the workflow's reason).
type CellNotRunError struct {
	SessionID string
	Cell      int
	State     string
	Msg       string
}

func (e *CellNotRunError) Error() string {
	msg := fmt.Sprintf("client: cell %d of session %s did not give a result: it is %s", e.Cell, e.SessionID, e.State)
	if e.Msg != "" {
		msg += ": " + e.Msg
	}
	return msg
}

// ErrorType returns TypeCellNotRun.
func (e *CellNotRunError) ErrorType() string { return TypeCellNotRun }
