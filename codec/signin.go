package codec

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// signIns are the browsers' sign-ins that /login starts: a random id in the browser's cookie, its
// hash, expiry and port here. Nothing about a sign-in can be derived from the token.
type signIns struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu   sync.Mutex
	byID map[[sha256.Size]byte]signIn
}

type signIn struct {
	port    string
	expires time.Time
}

func newSignIns(ttl time.Duration, maxSignIns int) *signIns {
	return &signIns{ttl: ttl, max: maxSignIns, now: time.Now, byID: map[[sha256.Size]byte]signIn{}}
}

// start makes a sign-in for port and returns its id.
func (st *signIns) start(port string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("codec server: random session id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.now()
	for k, s := range st.byID {
		if !now.Before(s.expires) {
			delete(st.byID, k)
		}
	}
	for len(st.byID) >= st.max {
		st.dropOldest()
	}
	st.byID[sha256.Sum256([]byte(id))] = signIn{port: port, expires: now.Add(st.ttl)}
	return id, nil
}

func (st *signIns) dropOldest() {
	var (
		oldest [sha256.Size]byte
		first  = true
		when   time.Time
	)
	for k, s := range st.byID {
		if first || s.expires.Before(when) {
			oldest, when, first = k, s.expires, false
		}
	}
	delete(st.byID, oldest)
}

// valid reports whether id names a live sign-in started on port. The map is keyed by the id's
// hash, so a lookup's timing says nothing about the ids held.
func (st *signIns) valid(id, port string) bool {
	key := sha256.Sum256([]byte(id))
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.byID[key]
	if !ok {
		return false
	}
	if !st.now().Before(s.expires) {
		delete(st.byID, key)
		return false
	}
	return s.port == port
}

// end ends the sign-in id, if there is one.
func (st *signIns) end(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.byID, sha256.Sum256([]byte(id)))
}

// localPort returns the port r came in on ("" when the request did not come through a listener,
// as in a handler test).
func localPort(r *http.Request) string {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return ""
	}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return strconv.Itoa(tcp.Port)
	}
	_, port, _ := net.SplitHostPort(addr.String())
	return port
}

// cookieName is the sign-in cookie's name for the port r came in on: SignInCookieName, then
// "_" and the port, so that servers on two ports of one host keep their cookies apart; over TLS
// it starts with "__Host-", which browsers accept only from a secure page, for path /, with no
// domain.
func cookieName(r *http.Request) string {
	name := SignInCookieName
	if port := localPort(r); port != "" {
		name += "_" + port
	}
	if r.TLS != nil {
		name = "__Host-" + name
	}
	return name
}

// serveLogout ends the sign-in of the request's cookie and clears the cookie.
func (s *Server) serveLogout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed: POST /logout", http.StatusMethodNotAllowed)
		return
	}
	if c, err := r.Cookie(cookieName(r)); err == nil {
		s.signIns.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName(r), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "Signed out.")
}

// refusalLog writes at most one record per interval about refused requests, with the path cut,
// and counts the refusals it did not write.
type refusalLog struct {
	logger   *slog.Logger
	interval time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *refusalLog) refuse(msg string, r *http.Request) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	l.logger.Warn(msg,
		slog.String("path", truncateForMessage(r.URL.Path)),
		slog.String("origin", truncateForMessage(r.Header.Get("Origin"))),
		slog.String("remote", truncateForMessage(r.RemoteAddr)),
		slog.Int("refusals_not_logged", suppressed))
}

// countPayloads counts the objects in the top-level array of a protobuf JSON Payloads document
// ({"payloads": [{...}, ...]}), stopping once the count passes limit. It allocates nothing, so a
// request with millions of empty payloads is refused before any is decoded. A malformed document
// gets some count; the decoder refuses it afterwards.
func countPayloads(body []byte, limit int) int {
	n, depth := 0, 0
	inString, escaped := false, false
	for _, c := range body {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if c == '{' && depth == 3 {
				n++
				if n > limit {
					return n
				}
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return n
}
