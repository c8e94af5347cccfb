package inbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// A Session's status is answered by whatever worker polls its task queue: a namespace writer's
// worker can answer one that shows other code, other output or other settings than the chain
// the sandbox host checks. The inbox therefore offers an approval of a cell only when the
// digest it signs is the one the client's reviewer door recomputes from what the page shows:
// the settings (with the file contents and env values of the session's start input) hashed to
// the settings digest, every cell's code to its code digest, every earlier cell's shown result
// to its result digest, and the chain over them (client.CheckSessionShown, VerifyCells,
// CellStatementFor), as every other reviewer's tool does.

// errNotShown is wrapped by every reason why what a status shows is not what it hashes to.
var errNotShown = errors.New("do not approve; the session's workflow worker may not be sandboxflow's")

// notShown marks err, one of the client's refusals of what a status shows (whose text already
// says not to approve), as errNotShown.
func notShown(err error) error {
	if err == nil {
		return nil
	}
	return shownError{err}
}

// shownError is a refusal of what a status shows: errors.Is finds errNotShown, errors.As the
// client's error.
type shownError struct{ err error }

func (e shownError) Error() string   { return e.err.Error() }
func (e shownError) Unwrap() []error { return []error{e.err, errNotShown} }

// checkCells checks every cell st shows as the client checks the cells before the one it signs
// (client.VerifyCells): code digests, chains, cell digests, result digests, numbering, and a
// result exactly for the cells that ran. The session's own chain, when shown, must be the chain over every cell.
func checkCells(st contract.SessionStatus) error {
	chain, err := client.VerifyCells(st, len(st.Cells))
	if err == nil && st.Chain != "" && st.Chain != chain {
		err = &client.CellMismatchError{SessionID: st.WorkflowID, Field: "chain", Shown: st.Chain, Computed: chain}
	}
	return notShown(err)
}

// shownSession refuses a status whose settings digest is not the digest of the settings it shows
// with the file contents and env values of in, the session's start input
// (client.CheckSessionShown).
func shownSession(st contract.SessionStatus, in contract.SessionInput) error {
	return notShown(client.CheckSessionShown(st, in))
}

// waitingCell returns the cell of st that waits for a decision, or nil. Only the last cell can.
func waitingCell(st contract.SessionStatus) *contract.CellStatus {
	if n := len(st.Cells); n > 0 && st.Cells[n-1].State == contract.StatusAwaitingApproval {
		return &st.Cells[n-1]
	}
	return nil
}

// cellStatementFor returns the statement a reviewer signs to decide on cell of the session st
// is the status of (client.CellStatementFor: an approval's digest is recomputed from what st
// shows, and refused when st disagrees with it anywhere; a denial's is the cell's own). It fails
// with a *staleCellError when cell is not the one that waits. The caller must check the
// settings against the session's start (shownSession) before offering an approval.
func cellStatementFor(st contract.SessionStatus, cell int, opts client.StatementOptions, now time.Time) (approval.Fields, error) {
	if w := waitingCell(st); w != nil && w.Cell != cell {
		return approval.Fields{}, &staleCellError{Asked: cell, Waiting: w.Cell}
	}
	f, err := client.CellStatementFor(st, cell, opts, now)
	var mismatch *client.CellMismatchError
	if errors.As(err, &mismatch) {
		return f, notShown(err)
	}
	return f, err
}

// staleCellError says that a decision was made for a cell that is not the one that waits: the
// page was read before a newer cell came, or the cell was decided meanwhile.
type staleCellError struct {
	Asked, Waiting int
}

func (e *staleCellError) Error() string {
	return fmt.Sprintf("cell %d does not wait for a decision; cell %d does: read the session's page again, with what cell %d printed, before you decide", e.Asked, e.Waiting, e.Asked)
}
