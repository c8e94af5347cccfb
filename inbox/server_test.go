package inbox

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	tclient "go.temporal.io/sdk/client"
)

// newTestServer returns an inbox whose Temporal client never connects: every request here must
// be answered before the inbox asks Temporal anything.
func newTestServer(t *testing.T) *Server {
	t.Helper()
	tc, err := tclient.NewLazyClient(tclient.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	s, err := New(Config{Temporal: tc, ReviewersPath: filepath.Join(t.TempDir(), "allowed_signers"), Origin: "http://localhost:8235"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNoSessionSeesNothing(t *testing.T) {
	s := newTestServer(t)
	for _, tc := range []struct {
		path string
		code int
	}{
		{"/", http.StatusSeeOther},
		{"/run/sandbox-1", http.StatusSeeOther},
		{"/pending", http.StatusUnauthorized},
		{"/run/sandbox-1/download/stdout", http.StatusUnauthorized},
		{"/session/session-1", http.StatusSeeOther},
		{"/session/session-1/download/input-0", http.StatusUnauthorized},
		{"/session/session-1/download/cell-1-stdout", http.StatusUnauthorized},
	} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", tc.path, nil))
		if w.Code != tc.code {
			t.Errorf("GET %s: got %d; want %d", tc.path, w.Code, tc.code)
		}
		if tc.code == http.StatusSeeOther && w.Header().Get("Location") != "/signin" {
			t.Errorf("GET %s: redirect to %q; want /signin", tc.path, w.Header().Get("Location"))
		}
	}
}

func TestSignInPageHeaders(t *testing.T) {
	s := newTestServer(t)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/signin", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /signin: %d", w.Code)
	}
	csp := w.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q allows inline code", csp)
	}
	c := w.Result().Cookies()
	if len(c) != 1 || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie %+v; want one HttpOnly SameSite=Strict", c)
	}
	body, _ := io.ReadAll(w.Body)
	if strings.Contains(string(body), "<script>") {
		t.Error("inline script in the sign-in page")
	}
}

func TestPostNeedsOriginAndCSRF(t *testing.T) {
	s := newTestServer(t)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/signin", nil))
	cookie := w.Result().Cookies()[0]
	who := s.signIns.byID[cookie.Value]
	for _, tc := range []struct {
		name, origin, token string
		code                int
	}{
		{"no origin", "", who.csrf, http.StatusForbidden},
		{"cross-site", "https://evil.example", who.csrf, http.StatusForbidden},
		{"no token", "http://localhost:8235", "", http.StatusForbidden},
		{"wrong token", "http://localhost:8235", "x" + who.csrf, http.StatusForbidden},
		{"same origin with token", "http://localhost:8235", who.csrf, http.StatusOK},
	} {
		r := httptest.NewRequest("POST", "/passkey/login/begin", strings.NewReader("{}"))
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

func TestListenCheck(t *testing.T) {
	for _, tc := range []struct {
		l      Listen
		origin string
		ok     bool
	}{
		{Listen{Addr: "127.0.0.1:8235"}, "http://localhost:8235", true},
		{Listen{Addr: "[::1]:8235"}, "http://localhost:8235", true},
		{Listen{Addr: "0.0.0.0:8235"}, "", false},
		{Listen{Addr: ":8235"}, "", false},
		{Listen{Addr: "inbox.example.com:443", CertFile: "c", KeyFile: "k"}, "https://inbox.example.com:443", true},
		{Listen{Addr: "10.0.0.5:443", CertFile: "c", KeyFile: "k"}, "", false},
		{Listen{Addr: "10.0.0.5:443", CertFile: "c"}, "", false},
	} {
		got, err := tc.l.Check()
		if (err == nil) != tc.ok || got != tc.origin {
			t.Errorf("%+v: got %q, %v; want %q ok=%v", tc.l, got, err, tc.origin, tc.ok)
		}
	}
}

func TestNewRefusesIPOrigin(t *testing.T) {
	tc, _ := tclient.NewLazyClient(tclient.Options{HostPort: "127.0.0.1:1"})
	defer tc.Close()
	for _, o := range []string{"http://127.0.0.1:8235", "http://inbox.example.com", "ftp://localhost"} {
		if _, err := New(Config{Temporal: tc, ReviewersPath: "x", Origin: o}); err == nil {
			t.Errorf("origin %s accepted", o)
		}
	}
}

// The inbox's cookie is named after its port and a random part drawn at its start, so that a
// server on another port of localhost (one cookie jar for every port of a host), which cannot
// read the name, can neither replace it nor be replaced by it; two inboxes on one port name it
// differently; and a request that carries another cookie of the same name first (set by a
// server on another path) still finds its sign-in.
func TestSignInCookieSurvivesAnotherPorts(t *testing.T) {
	s, other := newTestServer(t), newTestServer(t)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/signin", nil))
	c := w.Result().Cookies()
	if len(c) != 1 || !strings.HasPrefix(c[0].Name, "sandboxflow_inbox_8235_") || len(c[0].Name) < len("sandboxflow_inbox_8235_")+16 {
		t.Fatalf("cookies %+v; want one named after the inbox's port and a random part", c)
	}
	if other.signIns.cookieNm == s.signIns.cookieNm {
		t.Errorf("two inboxes on one port name their cookie alike: %s", s.signIns.cookieNm)
	}
	guessed := httptest.NewRequest("GET", "/signin", nil)
	guessed.AddCookie(&http.Cookie{Name: "sandboxflow_inbox_8235", Value: "another-servers-value"})
	guessed.AddCookie(c[0])
	if s.signIns.get(guessed) == nil {
		t.Error("a cookie named after the port alone hid the inbox's sign-in")
	}
	r := httptest.NewRequest("GET", "/signin", nil)
	r.AddCookie(&http.Cookie{Name: c[0].Name, Value: "another-servers-value"})
	r.AddCookie(c[0])
	if s.signIns.get(r) == nil {
		t.Error("a foreign cookie of the same name, sent first, hid the inbox's sign-in")
	}
}
