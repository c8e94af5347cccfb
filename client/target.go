package client

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// CellWaiting is the Target.Cell of a session's cell that waits for a decision, whichever it is
// when the statement is made: Statement, Approve, Deny and ApproveAndWait take it, and find the
// cell in the same read of the session as the statement's.
const CellWaiting = -1

// Target names what a reviewer acts on: the RunCode run ID names (Cell 0), or cell Cell of the
// session ID names (Cell n ≥ 1, or CellWaiting). Review, Statement, Approve, Deny,
// ApproveAndWait, Cancel and WaitResult take one, so that a run and a session's cell go through
// the same door.
type Target struct {
	// ID is the run's workflow id, or the session's.
	ID string
	// Cell is 0 for a run, the cell's index for a session's cell, or CellWaiting.
	Cell int
}

// Run is the target of the RunCode run workflowID.
func Run(workflowID string) Target { return Target{ID: workflowID} }

// Cell is the target of cell n of the session sessionID; n 0 (or less) is the cell that waits for
// a decision (CellWaiting), as the starter's --cell takes it.
func Cell(sessionID string, n int) Target {
	if n < 1 {
		n = CellWaiting
	}
	return Target{ID: sessionID, Cell: n}
}

// Session is the target of the session sessionID as a whole: Review reads it, and Statement,
// Approve, Deny and ApproveAndWait decide on its cell that waits (CellWaiting).
func Session(sessionID string) Target { return Target{ID: sessionID, Cell: CellWaiting} }

// IsCell reports whether t names a session's cell rather than a run.
func (t Target) IsCell() bool { return t.Cell != 0 }

// String names t as messages do: the run's id, "cell N of ID", or "the waiting cell of ID".
func (t Target) String() string {
	switch {
	case t.Cell == 0:
		return t.ID
	case t.Cell < 0:
		return "the waiting cell of " + t.ID
	}
	return "cell " + strconv.Itoa(t.Cell) + " of " + t.ID
}

// needCell refuses a target that names no one cell (CellWaiting) for an action that acts on a
// cell the caller knows: a cancel, a wait.
func (t Target) needCell(action string) error {
	if t.Cell < 0 {
		return &guard.ToolUsageError{Msg: fmt.Sprintf("%s %s: name the cell (client.Cell(id, n))", action, t)}
	}
	return nil
}

// Decided is what Approve, Deny and ApproveAndWait return: the workflow's answer and, for a
// session's cell, the cell decided on (the waiting one, found, for CellWaiting). Its JSON is the
// answer's, with "cell" for a cell.
type Decided struct {
	Cell int `json:"cell,omitempty"`
	contract.DecideResult
}

// CellDecided is Decided.
//
// Deprecated: use Decided; kept for one release.
type CellDecided = Decided

// TargetReview is what Review returns: a run's Review, or for a session's cell the review of its
// session (SessionReview: every cell before it is part of what its reviewer approves). Exactly
// one is set; its JSON is that one's.
type TargetReview struct {
	Run     *Review
	Session *SessionReview
}

// MarshalJSON encodes the review that is set, as it encodes alone.
func (r TargetReview) MarshalJSON() ([]byte, error) {
	if r.Session != nil {
		return json.Marshal(r.Session)
	}
	return json.Marshal(r.Run)
}
