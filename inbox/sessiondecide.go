package inbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// cellDecideRequest is what the session page posts after the passkey signed a cell's statement:
// a run's decision plus the cell it is for and the cell digest the page showed.
type cellDecideRequest struct {
	decideRequest
	Cell   int    `json:"cell"`
	Digest string `json:"digest"`
}

// reasonProblem says what is wrong with a decision's reason, or "".
func reasonProblem(in decideRequest) string {
	if !in.Approve && strings.TrimSpace(in.Reason) == "" {
		return "a denial needs a reason"
	}
	if len(in.Reason) > contract.MaxReasonBytes {
		return fmt.Sprintf("the reason is longer than %d bytes", contract.MaxReasonBytes)
	}
	return ""
}

// handleCellDecide verifies the reviewer's passkey assertion over the statement of the cell
// that waits, exactly as the workflow and the sandbox host will, and sends the decision as the
// update "decide-cell" to the session's run the page was read from. A decision for a cell that
// does not wait (the page was read before a newer cell came, or the cell was decided since),
// or for a cell whose digest is not the one the page showed, is refused and nothing is sent.
func (s *Server) handleCellDecide(w http.ResponseWriter, r *http.Request, who *signIn) {
	id := r.PathValue("id")
	var in cellDecideRequest
	if !readDecision(w, r, &in, &in.decideRequest) {
		return
	}
	if in.Cell < 1 {
		writeRefusal(w, http.StatusBadRequest, "the decision names no cell (cells are numbered from 1)")
		return
	}
	si, err := s.loadSession(r.Context(), id)
	if err != nil {
		writeRefusal(w, http.StatusNotFound, err.Error())
		return
	}
	st := si.Status
	wc := waitingCell(st)
	switch {
	case !si.Running || wc == nil:
		writeRefusal(w, http.StatusConflict, fmt.Sprintf("no cell of the session waits for a decision (session %s); cell %d was not decided here", st.State, in.Cell))
		return
	case wc.Cell != in.Cell:
		writeRefusal(w, http.StatusConflict, (&staleCellError{Asked: in.Cell, Waiting: wc.Cell}).Error())
		return
	case in.Approve && in.Digest != wc.Digest:
		writeRefusal(w, http.StatusConflict, fmt.Sprintf("cell %d's digest is %s, not the %q your page showed: read the session's page again", wc.Cell, wc.Digest, in.Digest))
		return
	}
	logged := []any{"workflow_id", id, "cell", in.Cell, "principal", who.principal}
	if in.Approve {
		input, readErr := s.readSessionInput(r.Context(), id, st.RunID)
		if err := checkSessionShown(st, input, readErr); err != nil {
			s.refuseLogged(w, http.StatusConflict, "inbox: cell approval refused", "approval refused: ", err, logged)
			return
		}
	}
	d, err := s.verifyAssertion(in.decideRequest, who, func(opts client.StatementOptions, now time.Time) (approval.Fields, error) {
		f, err := cellStatementFor(st, in.Cell, opts, now)
		if err != nil {
			return f, fmt.Errorf("inbox: %w", err)
		}
		return f, nil
	})
	if err != nil {
		code := http.StatusForbidden
		var stale *staleCellError
		if errors.Is(err, errNotShown) || errors.As(err, &stale) {
			code = http.StatusConflict
		}
		s.refuseLogged(w, code, "inbox: cell decision refused", "decision refused: ", err, logged)
		return
	}
	keys, readErr := s.door.CheckedReviewers(r.Context(), id, st.RunID)
	if err := checkedWith(keys, readErr, who.fingerprint, "session"); err != nil {
		s.refuseLogged(w, http.StatusForbidden, "inbox: cell decision refused", "decision refused: ", err, logged)
		return
	}
	res, err := s.sendCellDecision(r.Context(), st, contract.CellDecision{Cell: in.Cell, Decision: d})
	if err != nil {
		s.refuseLogged(w, http.StatusForbidden, "inbox: the session refused the decision", "the session refused the decision: ", err, logged)
		return
	}
	s.log.Info("inbox: cell decision sent", "workflow_id", id, "cell", in.Cell, "approve", d.Approve, "reviewer", d.Reviewer, "approval_id", d.ApprovalID)
	writeJSON(w, http.StatusOK, res)
}

// sendCellDecision sends d to the session's run st was read from, through the door.
func (s *Server) sendCellDecision(ctx context.Context, st contract.SessionStatus, d contract.CellDecision) (contract.DecideResult, error) {
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	return s.door.DecideCell(ctx, st.WorkflowID, st.RunID, d)
}

// sessionDownloads reads session id for a download: its input files, and its cells' results.
func (s *Server) sessionDownloads(ctx context.Context, id string) (downloads, error) {
	si, err := s.loadSession(ctx, id)
	if err != nil {
		return downloads{}, err
	}
	return downloads{runID: si.Status.RunID, inputFiles: s.sessionInputFiles, output: func(w http.ResponseWriter, r *http.Request, what string) {
		serveCellOutput(w, si.Status, what, wantsInline(r), func() map[int]error { return s.unverifiedCells(r.Context(), si.Status) })
	}}, nil
}

// sessionInputFiles reads the input files run runID of session id was started with.
func (s *Server) sessionInputFiles(ctx context.Context, id, runID string) (map[string][]byte, error) {
	in, err := s.readSessionInput(ctx, id, runID)
	return in.Request.Files, err
}

// serveCellOutput sends what names of a cell's result, once it verifies (unverified):
// cell-C-stdout, cell-C-stderr, cell-C-file-N or cell-C-output-N (inline: sendResultPart).
func serveCellOutput(w http.ResponseWriter, st contract.SessionStatus, what string, inline bool, unverified func() map[int]error) {
	rest, ok := strings.CutPrefix(what, "cell-")
	num, part, _ := strings.Cut(rest, "-")
	c, err := strconv.Atoi(num)
	if !ok || err != nil || c < 1 || c > len(st.Cells) || st.Cells[c-1].Result == nil {
		http.Error(w, "no such download", http.StatusNotFound)
		return
	}
	if err := unverified()[c]; err != nil {
		http.Error(w, "this cell's result is not verified: "+err.Error(), http.StatusConflict)
		return
	}
	sendResultPart(w, st.Cells[c-1].Result, part, inline)
}
