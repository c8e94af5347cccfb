package inbox

import (
	"net/http"
	"net/url"
)

// handleNext sends the reviewer to the run or session cell that waits after the page ?from= names
// (a run's or a session's path) in the pending list's order, never back to that one; to the list
// when nothing else waits. The decision bar goes here after a decision and on j or n.
func (s *Server) handleNext(w http.ResponseWriter, r *http.Request, _ *signIn) {
	rows, err := s.pendingRows(r.Context())
	if err != nil {
		// The list says what could not be read.
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, nextPending(rows, r.URL.Query().Get("from")), http.StatusSeeOther)
}

// nextPending is the path of the row after the one whose page is from (the first row when from
// is none of them), wrapping around and skipping from; "/" (the list) when no other row waits.
func nextPending(rows []pendingRow, from string) string {
	at := -1
	for i, p := range rows {
		if rowPath(p) == from {
			at = i
			break
		}
	}
	for k := 1; k <= len(rows); k++ {
		if p := rowPath(rows[(at+k)%len(rows)]); p != from {
			return p
		}
	}
	return "/"
}

// rowPath is the path of a pending row's page.
func rowPath(p pendingRow) string {
	if p.Session {
		return "/session/" + url.PathEscape(p.ID)
	}
	return "/run/" + url.PathEscape(p.ID)
}
