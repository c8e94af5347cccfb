package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// cancelRequest is what the run page's Cancel form posts, as JSON.
type cancelRequest struct {
	Reason string `json:"reason"`
}

// handleCancel cancels the run the page was read from as the signed-in reviewer (the same origin
// and CSRF checks as a decision, in ServeHTTP; the reviewer check in s.reviewer), who is then who
// the run records as having cancelled it, and answers with the run's answer. A cancel runs
// nothing: a waiting run ends with nothing run, a running sandbox is stopped. The page posts JSON
// (a form post would carry the origin "null" under the inbox's no-referrer policy, and is refused
// before it gets here).
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, who *signIn) {
	id := r.PathValue("id")
	if !isJSON(r) {
		writeRefusal(w, http.StatusUnsupportedMediaType, "inbox: cancel: post JSON")
		return
	}
	var in cancelRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeRefusal(w, http.StatusBadRequest, "inbox: cancel: "+err.Error())
		return
	}
	ri, err := s.loadRun(r.Context(), id)
	if err != nil {
		writeRefusal(w, http.StatusNotFound, err.Error())
		return
	}
	if !ri.Running {
		writeRefusal(w, http.StatusConflict, "the run has ended (state "+ri.Status.State+"): there is nothing to cancel; reload the page to see how it ended")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), temporalTimeout)
	defer cancel()
	res, err := s.runs.WithReviewer(who.principal).CancelRun(ctx, ri.Status.WorkflowID, ri.Status.RunID, in.Reason)
	if err != nil {
		s.log.Warn("inbox: cancel refused", "workflow_id", id, "principal", who.principal, "error", err)
		code := http.StatusBadGateway
		var refused *client.CancelRefusedError
		if errors.As(err, &refused) {
			code = http.StatusConflict
		}
		writeRefusal(w, code, "cancel refused: "+err.Error())
		return
	}
	s.log.Info("inbox: run cancelled", "workflow_id", id, "principal", who.principal, "state", res.State)
	writeJSON(w, http.StatusOK, res)
}

// cancellable says whether the run page offers Cancel: the run is open, not yet cancelled, and
// checking, waiting or running.
func cancellable(ri *client.RunInfo) bool {
	st := ri.Status
	switch {
	case !ri.Running || st.Cancel != nil:
		return false
	}
	return st.State == contract.StatusChecking || st.State == contract.StatusAwaitingApproval || st.State == contract.StatusRunning
}

// isJSON reports whether r's body is JSON.
func isJSON(r *http.Request) bool {
	t, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && t == "application/json"
}
