// Package client is what agent orchestrators and reviewers import to use sandboxflow from Go: it
// starts RunCode workflows, lists the runs that wait for a person, shows what a reviewer needs,
// sends decisions, waits for results, and describes the run_code tool for function calling.
//
// It works over a Temporal client the caller dials (with the same data converter as the workers,
// when payloads are encrypted), or one that Connect dials. The starter command is a thin main over
// this package.
//
// Start refuses, before anything is sent, what would not arrive as it was sent or could never be
// checked: text that is not UTF-8 and requests over Temporal's payload limits (ToolUsageError), an
// existing workflow id (ConfigError) and a task queue no worker polls (*NoWorkerError).
// WriteJSON prints what a person reads with invisible and direction-changing characters escaped.
//
// Sessions (one sandbox for one task, state kept between cells) are opened with OpenSession and
// fed with SubmitCell; AwaitCell and CloseSession wait for a cell and end the session.
//
// A reviewer acts on a Target: a run (Run) or a session's cell (Cell, Session), through one
// method per action: Review, Statement, Approve, Deny, ApproveAndWait, Cancel and WaitResult.
// For a run they refuse a workflow that is not a RunCode run (*NotRunCodeError); for a cell, one
// that is not a Session (*NotSessionError), and a cell's statement (CellStatementFor without
// reading) recomputes the chain over every earlier cell and the cell's digest from what the
// status shows, refusing a status that shows one history and asks to sign another
// (*CellMismatchError).
//
// There is no way to approve a run without a person: Approve sends one reviewer's decision for one
// digest, and the workflow accepts only the first valid decision.
package client
