package inbox

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// signIn is one browser's sign-in: its cookie's id, CSRF token and passkey ceremony. A sign-in
// without principal is anonymous: it may register a passkey and sign in, and sees no run.
type signIn struct {
	id      string
	csrf    string
	created time.Time
	used    time.Time
	// principal and fingerprint are set by a passkey sign-in; credentialID is that passkey's, so
	// decisions are signed by the same one.
	principal    string
	fingerprint  string
	credentialID string
	// challenge is the pending WebAuthn challenge of a registration or sign-in, and its kind.
	challenge     []byte
	challengeKind string
	challengeAt   time.Time
	// registerName is the principal a registration in progress asked for.
	registerName string
}

// signIns keeps the sign-ins in memory: a restart signs everybody out.
type signIns struct {
	mu       sync.Mutex
	byID     map[string]*signIn
	ttl      time.Duration
	idle     time.Duration
	max      int
	now      func() time.Time
	cookieNm string
	secure   bool
}

func newSignIns(ttl, idle time.Duration, max int, now func() time.Time) *signIns {
	return &signIns{byID: map[string]*signIn{}, ttl: ttl, idle: idle, max: max, now: now, cookieNm: "sandboxflow_inbox"}
}

// useSecureCookies sets Secure and the __Host- prefix (over TLS).
func (st *signIns) useSecureCookies() {
	st.secure = true
	st.cookieNm = "__Host-" + st.cookieNm
}

// nameFor names the cookie after the inbox's port and a random part drawn when the inbox starts:
// browsers keep one cookie jar for every port of a host, so a server on another port of
// localhost that sets a cookie of the same name replaces this one's and signs its reviewer out.
// A page there cannot read this inbox's cookies (HttpOnly, another origin), so it cannot learn
// the name to replace.
func (st *signIns) nameFor(origin string) {
	port := ""
	if u, err := url.Parse(origin); err == nil && u.Port() != "" {
		port = u.Port() + "_"
	}
	st.cookieNm = "sandboxflow_inbox_" + port + randomToken()[:16]
}

// randomToken returns 256 random bits, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error (Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

// get returns the request's live sign-in, or nil. The returned sign-in is a copy.
// A request may carry several cookies of the name (one a server on another path set): the first
// that names a live sign-in counts.
func (st *signIns) get(r *http.Request) *signIn {
	st.mu.Lock()
	defer st.mu.Unlock()
	var s *signIn
	for _, c := range r.CookiesNamed(st.cookieNm) {
		if s = st.byID[c.Value]; c.Value != "" && s != nil {
			break
		}
	}
	if s == nil {
		return nil
	}
	now := st.now()
	if now.Sub(s.created) > st.ttl || now.Sub(s.used) > st.idle {
		delete(st.byID, s.id)
		return nil
	}
	s.used = now
	cp := *s
	return &cp
}

// getOrCreate returns the request's sign-in, or starts an anonymous one and sets its cookie.
func (st *signIns) getOrCreate(w http.ResponseWriter, r *http.Request) *signIn {
	if s := st.get(r); s != nil {
		return s
	}
	return st.create(w)
}

func (st *signIns) create(w http.ResponseWriter) *signIn {
	now := st.now()
	s := &signIn{id: randomToken(), csrf: randomToken(), created: now, used: now}
	st.mu.Lock()
	if len(st.byID) >= st.max {
		st.sweepLocked(now)
	}
	if len(st.byID) >= st.max {
		// Drop the anonymous sign-ins first; signed-in reviewers keep theirs.
		for id, o := range st.byID {
			if o.principal == "" {
				delete(st.byID, id)
			}
		}
	}
	st.byID[s.id] = s
	st.mu.Unlock()
	st.setCookie(w, s.id, st.ttl)
	cp := *s
	return &cp
}

func (st *signIns) sweepLocked(now time.Time) {
	for id, s := range st.byID {
		if now.Sub(s.created) > st.ttl || now.Sub(s.used) > st.idle {
			delete(st.byID, id)
		}
	}
}

func (st *signIns) setCookie(w http.ResponseWriter, value string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name:     st.cookieNm,
		Value:    value,
		Path:     "/",
		MaxAge:   int(ttl / time.Second),
		HttpOnly: true,
		Secure:   st.secure,
		SameSite: http.SameSiteStrictMode,
	})
}

// update applies f to the stored sign-in id; it reports false when the sign-in is gone.
func (st *signIns) update(id string, f func(*signIn)) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.byID[id]
	if s == nil {
		return false
	}
	f(s)
	return true
}

// signIn replaces the anonymous sign-in old with a new signed-in one (a fresh id, so an id
// learned before the sign-in is worth nothing) and sets its cookie.
func (st *signIns) signIn(w http.ResponseWriter, old *signIn, principal, fingerprint, credentialID string) {
	now := st.now()
	s := &signIn{id: randomToken(), csrf: randomToken(), created: now, used: now,
		principal: principal, fingerprint: fingerprint, credentialID: credentialID}
	st.mu.Lock()
	delete(st.byID, old.id)
	st.byID[s.id] = s
	st.mu.Unlock()
	st.setCookie(w, s.id, st.ttl)
}

// signOut ends the sign-in.
func (st *signIns) signOut(s *signIn) {
	st.mu.Lock()
	delete(st.byID, s.id)
	st.mu.Unlock()
}

// takeChallenge returns and clears the sign-in's pending challenge of kind, if it is fresh.
func (st *signIns) takeChallenge(id, kind string, maxAge time.Duration) []byte {
	var ch []byte
	st.update(id, func(s *signIn) {
		if s.challengeKind == kind && st.now().Sub(s.challengeAt) <= maxAge {
			ch = s.challenge
		}
		s.challenge, s.challengeKind = nil, ""
	})
	return ch
}
