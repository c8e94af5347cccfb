package inbox

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCancelNeedsASignedInReviewer: the cancel endpoint refuses, before it asks Temporal
// anything, a POST from another origin, one without the session's CSRF token, and one from a
// session that has not signed in.
func TestCancelNeedsASignedInReviewer(t *testing.T) {
	s := newTestServer(t)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/signin", nil))
	cookie := w.Result().Cookies()[0]
	who := s.signIns.byID[cookie.Value]
	for _, tc := range []struct {
		name, origin, token string
		code                int
	}{
		{"cross-site", "https://evil.example", who.csrf, http.StatusForbidden},
		{"no origin", "", who.csrf, http.StatusForbidden},
		{"no token", "http://localhost:8235", "", http.StatusForbidden},
		{"not signed in", "http://localhost:8235", who.csrf, http.StatusUnauthorized},
	} {
		r := httptest.NewRequest("POST", "/run/sandbox-1/cancel", strings.NewReader(`{"reason":"x"}`))
		r.Header.Set("Content-Type", "application/json")
		r.AddCookie(cookie)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.token != "" {
			r.Header.Set("X-CSRF-Token", tc.token)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != tc.code {
			t.Errorf("%s: got %d; want %d", tc.name, w.Code, tc.code)
		}
	}
}
