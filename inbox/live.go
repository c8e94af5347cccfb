package inbox

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// Live output on the run page (issue 29): while the code runs, the page polls GET /run/{id}/live
// (a session's page: GET /session/{id}/live?cell=N for its running cell) with where it is in
// each stream, and appends what came as text (textContent, never HTML). The
// endpoint is a reviewer's page like the others, and answers only the page's own script: the
// sign-in's CSRF token in X-CSRF-Token (which another origin's page cannot send without a CORS
// preflight the inbox never answers) and no cross-site fetch metadata.

// liveChunk is one piece of output as the page appends it: the bytes as escaped text
// (pysource.VisibleText: escape sequences and bytes that are not UTF-8 as \x.. escapes).
type liveChunk struct {
	Stream  guard.Stream `json:"stream"`
	Offset  int64        `json:"offset"`
	Skipped int64        `json:"skipped,omitempty"`
	Text    string       `json:"text"`
}

// liveAnswer is what GET /run/{id}/live answers: whether the code still runs, the new chunks,
// and the cursor the page sends back next time.
type liveAnswer struct {
	Running  bool        `json:"running"`
	Activity string      `json:"activity"`
	Stdout   int64       `json:"stdout"`
	Stderr   int64       `json:"stderr"`
	Chunks   []liveChunk `json:"chunks"`
}

func (s *Server) handleLive(w http.ResponseWriter, r *http.Request, who *signIn) {
	s.serveLive(w, r, who, 0)
}

// handleSessionLive is handleLive for the running cell of a session's page
// (GET /session/{id}/live?cell=N).
func (s *Server) handleSessionLive(w http.ResponseWriter, r *http.Request, who *signIn) {
	cell, err := strconv.Atoi(r.URL.Query().Get("cell"))
	if err != nil || cell < 1 {
		writeRefusal(w, http.StatusBadRequest, "cell: want the index of a cell, from 1")
		return
	}
	s.serveLive(w, r, who, cell)
}

// serveLive answers a live-output read of run {id} (cell 0) or of cell of session {id}.
func (s *Server) serveLive(w http.ResponseWriter, r *http.Request, who *signIn, cell int) {
	if err := s.checkOwnScript(r, who); err != nil {
		s.log.Warn("inbox: refused a live-output read", "path", r.URL.Path, "error", err)
		writeRefusal(w, http.StatusForbidden, "forbidden: "+err.Error())
		return
	}
	q := r.URL.Query()
	id := r.PathValue("id")
	shown := s.shown.cursor(liveKey{signIn: who.id, id: id, cell: cell})
	shown.mu.Lock()
	defer shown.mu.Unlock()
	cur := &shown.cur
	cur.ActivityID = q.Get("activity")
	cur.Stdout, cur.Stderr = 0, 0
	for _, p := range []struct {
		name string
		v    *int64
	}{{"stdout", &cur.Stdout}, {"stderr", &cur.Stderr}} {
		if raw := q.Get(p.name); raw != "" {
			n, err := strconv.ParseInt(raw, 10, 64)
			if err != nil || n < 0 {
				writeRefusal(w, http.StatusBadRequest, fmt.Sprintf("%s=%q: want a byte offset", p.name, raw))
				return
			}
			*p.v = n
		}
	}
	read, err := s.runs.ReadLive(r.Context(), id, cell)
	if err != nil {
		var ns *client.NotSessionError
		if isNotFound(err) || errors.As(err, &ns) {
			writeRefusal(w, http.StatusNotFound, "no such run")
			return
		}
		s.log.Warn("inbox: read live output", "workflow_id", id, "error", err)
		writeRefusal(w, http.StatusBadGateway, "the run's output could not be read")
		return
	}
	ans := liveAnswer{Running: read.Running, Chunks: []liveChunk{}}
	if read.Output != nil {
		for _, ch := range cur.Take(read.ActivityID, *read.Output) {
			// A character split across two heartbeats waits for the next read.
			whole, rest := client.SplitIncomplete(ch.Bytes)
			if ch.Stream == guard.StreamStderr {
				cur.Stderr -= int64(len(rest))
			} else {
				cur.Stdout -= int64(len(rest))
			}
			ans.Chunks = append(ans.Chunks, liveChunk{Stream: ch.Stream, Offset: ch.Offset, Skipped: ch.Skipped, Text: pysource.VisibleText(string(whole))})
		}
	}
	ans.Activity, ans.Stdout, ans.Stderr = cur.ActivityID, cur.Stdout, cur.Stderr
	writeJSON(w, http.StatusOK, ans)
}

// checkOwnScript refuses a read that is not the inbox page's own script: one from another site
// (Origin or Sec-Fetch-Site), or without the sign-in's CSRF token in X-CSRF-Token.
func (s *Server) checkOwnScript(r *http.Request, who *signIn) error {
	if origin := r.Header.Get("Origin"); origin != "" && origin != s.cfg.Origin {
		return s.wrongOrigin(origin)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("the request came from another site (Sec-Fetch-Site %q): read the output from the inbox's own page", site)
	}
	token := r.Header.Get("X-CSRF-Token")
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(who.csrf)) != 1 {
		return errors.New("the page's CSRF token is missing or out of date (the sign-in changed since the page was read): reload the page")
	}
	return nil
}

// What this inbox's live reads handed each page is kept, per sign-in and run (or session cell),
// so that the page drawn once the code ended says whether that output was the result's
// (client.LiveCursor.Verify): live output is heartbeat details, unsigned, and a namespace
// writer can record any for a running activity.

// liveKey names the live output one sign-in was shown of run id (cell 0) or of a session's cell.
type liveKey struct {
	signIn, id string
	cell       int
}

// liveCursor is what the live reads of one key handed out.
type liveCursor struct {
	mu  sync.Mutex
	cur client.LiveCursor
}

// maxLiveShown bounds how many keys liveShown keeps: past it, it starts again empty (a page
// then says nothing of output shown before).
const maxLiveShown = 1024

// liveShown keeps the cursors of the live reads the inbox answered.
type liveShown struct {
	mu sync.Mutex
	m  map[liveKey]*liveCursor
}

// cursor returns k's cursor, made when there is none.
func (l *liveShown) cursor(k liveKey) *liveCursor {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= maxLiveShown && l.m[k] == nil {
		l.m = map[liveKey]*liveCursor{}
	}
	c := l.m[k]
	if c == nil {
		c = &liveCursor{}
		l.m[k] = c
	}
	return c
}

// check says whether the live output k was shown is res's at the same offsets ("" when it is, or
// none was shown), and forgets it.
func (l *liveShown) check(k liveKey, res guard.Result) string {
	l.mu.Lock()
	c := l.m[k]
	delete(l.m, k)
	l.mu.Unlock()
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.cur.Verify(res); err != nil {
		return err.Error()
	}
	return ""
}
