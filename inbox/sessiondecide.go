package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
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
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeRefusal(w, http.StatusBadRequest, "inbox: decision: "+err.Error())
		return
	}
	if msg := reasonProblem(in.decideRequest); msg != "" {
		writeRefusal(w, http.StatusBadRequest, msg)
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
	if in.Approve {
		input, readErr := s.readSessionInput(r.Context(), id, st.RunID)
		if err := checkSessionShown(st, input, readErr); err != nil {
			s.log.Warn("inbox: cell approval refused", "workflow_id", id, "cell", in.Cell, "principal", who.principal, "error", err)
			writeRefusal(w, http.StatusConflict, "approval refused: "+err.Error())
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
		s.log.Warn("inbox: cell decision refused", "workflow_id", id, "cell", in.Cell, "principal", who.principal, "error", err)
		writeRefusal(w, code, "decision refused: "+err.Error())
		return
	}
	res, err := s.sendCellDecision(r.Context(), st, contract.CellDecision{Cell: in.Cell, Decision: d})
	if err != nil {
		s.log.Warn("inbox: the session refused the decision", "workflow_id", id, "cell", in.Cell, "principal", who.principal, "error", err)
		writeRefusal(w, http.StatusForbidden, "the session refused the decision: "+err.Error())
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

// handleSessionDownload sends, as a plain-text attachment and never as a page, an input file of
// a session (input-N, in name order) or a cell's stdout, stderr or output file
// (cell-C-stdout, cell-C-stderr, cell-C-file-N).
func (s *Server) handleSessionDownload(w http.ResponseWriter, r *http.Request, _ *signIn) {
	id, what := r.PathValue("id"), r.PathValue("what")
	si, err := s.loadSession(r.Context(), id)
	if err != nil {
		http.Error(w, "no Session workflow "+id, http.StatusNotFound)
		return
	}
	if n, ok := strings.CutPrefix(what, "input-"); ok {
		in, err := s.readSessionInput(r.Context(), id, si.Status.RunID)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		names := slices.Sorted(maps.Keys(in.Request.Files))
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || i >= len(names) {
			http.Error(w, "no such input file", http.StatusNotFound)
			return
		}
		sendAttachment(w, downloadName(names[i]), in.Request.Files[names[i]])
		return
	}
	rest, ok := strings.CutPrefix(what, "cell-")
	num, part, _ := strings.Cut(rest, "-")
	c, err := strconv.Atoi(num)
	if !ok || err != nil || c < 1 || c > len(si.Status.Cells) || si.Status.Cells[c-1].Result == nil {
		http.Error(w, "no such download", http.StatusNotFound)
		return
	}
	res := si.Status.Cells[c-1].Result
	switch {
	case part == "stdout":
		sendAttachment(w, "stdout.txt", res.Stdout)
	case part == "stderr":
		sendAttachment(w, "stderr.txt", res.Stderr)
	case strings.HasPrefix(part, "file-"):
		n, err := strconv.Atoi(strings.TrimPrefix(part, "file-"))
		if err != nil || n < 0 || n >= len(res.Files) {
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		sendAttachment(w, downloadName(res.Files[n].Name), res.Files[n].Content)
	default:
		http.Error(w, "no such download", http.StatusNotFound)
	}
}
