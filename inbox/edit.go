package inbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// editRequest is what the run page's editor posts to get the statement of an approval of the
// edited code: the code, and the digest of the request the reviewer edited (the page's).
type editRequest struct {
	Code   string `json:"code"`
	Digest string `json:"digest"`
}

// editStatement is the statement the editor's passkey signs: an approval of the run's request
// with the edited code, whose digest it binds.
type editStatement struct {
	Statement  string `json:"statement"`
	ApprovalID string `json:"approval_id"`
	Expires    string `json:"expires"`
	Digest     string `json:"digest"`
}

// handleEditStatement returns the statement an approval of the posted edit signs, built as the
// client builds it (client.EditedDigest over the request the status shows, checked against the
// run's start), for the reviewer signed in. Nothing is sent to the workflow: the page signs the
// statement with the passkey and posts it to decide with the edit, where it is verified again.
func (s *Server) handleEditStatement(w http.ResponseWriter, r *http.Request, who *signIn) {
	id := r.PathValue("id")
	var in editRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(&in); err != nil {
		writeRefusal(w, http.StatusBadRequest, "inbox: edit: "+err.Error())
		return
	}
	ri, ok := s.loadWaitingRun(w, r, id)
	if !ok {
		return
	}
	start, readErr := s.readInput(r.Context(), id, ri.Status.RunID)
	if err := checkShown(ri.Status, start, readErr); err != nil {
		writeRefusal(w, http.StatusConflict, "edit refused: "+err.Error())
		return
	}
	now := s.cfg.Now()
	f, err := client.StatementFor(ri.Status, client.StatementOptions{Expires: now.Add(s.cfg.DecisionTTL), Reviewer: who.principal}, now)
	if err == nil {
		f, err = editedFields(f, ri.Status, start, in.Code, in.Digest)
	}
	var b []byte
	if err == nil {
		b, err = f.Statement()
	}
	if err != nil {
		writeRefusal(w, http.StatusConflict, "edit refused: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, editStatement{Statement: string(b), ApprovalID: f.ApprovalID, Expires: f.Expires.Format(time.RFC3339), Digest: f.Digest})
}

// editedFields returns f (an approval of the run st is the status of) for the request with its
// code replaced by code: its digest the edited request's. read is the digest the reviewer
// edited; it must be the run's.
func editedFields(f approval.Fields, st contract.Status, start contract.Input, code, read string) (approval.Fields, error) {
	switch {
	case code == "":
		return f, errors.New("inbox: the edited code is empty")
	case read != st.Request.Digest:
		return f, fmt.Errorf("inbox: you edited the request with digest %.80q but the run's is now %s: read it again", read, st.Request.Digest)
	}
	digest, err := client.EditedDigest(st, start, code)
	if err != nil {
		return f, fmt.Errorf("inbox: %w", err)
	}
	if digest == st.Request.Digest {
		return f, errors.New("inbox: the edited code is the run's own: approve it without an edit")
	}
	f.Digest = digest
	return f, nil
}
