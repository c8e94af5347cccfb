package codec

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// listen serves srv on a fresh loopback port until the test ends and returns its base URL.
func listen(t *testing.T, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// login posts the token to base's /login and returns the sign-in cookie it sets.
func login(t *testing.T, base string) *http.Cookie {
	t.Helper()
	resp, err := http.PostForm(base+"/login", url.Values{"token": {testToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Fatalf("login at %s: %d, cookies %v", base, resp.StatusCode, resp.Cookies())
	}
	return resp.Cookies()[0]
}

// decodeWith posts an encrypted payload to base's /decode with the cookie and returns the status.
func decodeWith(t *testing.T, f *serverFixture, base string, c *http.Cookie) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/default/decode", strings.NewReader(payloadsJSON(t, f.encoded)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", uiOrigin)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && strings.Contains(string(body), "TOP-SECRET") {
		t.Errorf("a refused decode returned the plaintext")
	}
	return resp.StatusCode
}

// Finding 7 of issue 17: browsers send a 127.0.0.1 cookie to every port, and the cookie was
// HMAC(token, constant), so a page on another local port received one that decoded history.
// Now a sign-in is random, held by the server and bound to the port it was started on.
func TestSessionCookieDoesNotAuthorizeOnAnotherPort(t *testing.T) {
	f := newServerFixture(t)
	baseA, baseB := listen(t, f.srv), listen(t, f.srv)
	c := login(t, baseA)
	_, portA, _ := net.SplitHostPort(strings.TrimPrefix(baseA, "http://"))
	if c.Name != SignInCookieName+"_"+portA || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie %+v; want %s_%s, HttpOnly, SameSite=Strict", c, SignInCookieName, portA)
	}
	if got := decodeWith(t, f, baseA, c); got != http.StatusOK {
		t.Fatalf("decode on the login's port: %d; want 200", got)
	}
	// The same sign-in under the other port's cookie name, and under its own name.
	_, portB, _ := net.SplitHostPort(strings.TrimPrefix(baseB, "http://"))
	for _, name := range []string{SignInCookieName + "_" + portB, c.Name, SignInCookieName} {
		if got := decodeWith(t, f, baseB, &http.Cookie{Name: name, Value: c.Value}); got != http.StatusUnauthorized {
			t.Errorf("cookie %s from port %s on port %s: %d; want 401", name, portA, portB, got)
		}
	}
	// Another server with the same token holds none of this server's sign-ins.
	other, err := NewServer(f.ring, ServerOptions{Token: testToken, AllowedOrigins: []string{uiOrigin}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	baseC := listen(t, other)
	_, portC, _ := net.SplitHostPort(strings.TrimPrefix(baseC, "http://"))
	if got := decodeWith(t, f, baseC, &http.Cookie{Name: SignInCookieName + "_" + portC, Value: c.Value}); got != http.StatusUnauthorized {
		t.Errorf("cookie on another server with the same token: %d; want 401", got)
	}
}

func TestSessionsAreRandomExpireAndLogOut(t *testing.T) {
	f := newServerFixture(t)
	base := listen(t, f.srv)
	c1, c2 := login(t, base), login(t, base)
	if c1.Value == c2.Value {
		t.Fatal("two logins got the same sign-in id")
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/logout", nil)
	req.AddCookie(c1)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Errorf("logout: %d, cookies %v; want 200 and the cookie cleared", resp.StatusCode, resp.Cookies())
	}
	if got := decodeWith(t, f, base, c1); got != http.StatusUnauthorized {
		t.Errorf("decode after logout: %d; want 401", got)
	}
	if got := decodeWith(t, f, base, c2); got != http.StatusOK {
		t.Errorf("the other sign-in after one logout: %d; want 200", got)
	}

	// Expiry, on a clock the test moves.
	setNow := func(at time.Time) {
		st := f.srv.signIns
		st.mu.Lock()
		defer st.mu.Unlock()
		st.now = func() time.Time { return at }
	}
	now := time.Now()
	setNow(now)
	c3 := login(t, base)
	if c3.MaxAge != int(defaultSignInTTL/time.Second) {
		t.Errorf("cookie max age %d; want %d", c3.MaxAge, int(defaultSignInTTL/time.Second))
	}
	setNow(now.Add(defaultSignInTTL + time.Second))
	if got := decodeWith(t, f, base, c3); got != http.StatusUnauthorized {
		t.Errorf("decode with an expired sign-in: %d; want 401", got)
	}
}

func TestSessionsBounded(t *testing.T) {
	st := newSignIns(time.Hour, 3)
	var ids []string
	for range 5 {
		id, err := st.start("1")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(st.byID) != 3 || st.valid(ids[0], "1") || !st.valid(ids[4], "1") || st.valid(ids[4], "2") {
		t.Errorf("sign-ins %d; want 3, the newest kept, bound to their port", len(st.byID))
	}
}

func TestCookieNameOverTLS(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "https://127.0.0.1:8234/login", nil)
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8234}))
	if got, want := cookieName(req), "__Host-"+SignInCookieName+"_8234"; got != want {
		t.Errorf("cookieName over TLS = %q; want %q", got, want)
	}
}

func authHeader() map[string]string { return map[string]string{"Authorization": "Bearer " + testToken} }

// emptyPayloads is {"payloads":[{},{},...]} with n payloads: the cheapest body per payload.
func emptyPayloads(n int) string {
	return `{"payloads":[` + strings.TrimSuffix(strings.Repeat("{},", n), ",") + `]}`
}

// Finding 7: a 16.8 MB /encode body of empty payloads took the process from 3.5 to 9.7 GB.
func TestHugeEncodeRefusedWithoutMemory(t *testing.T) {
	f := newServerFixture(t)
	for _, n := range []int{1_000_000, 20_000_000} { // 3 MB (under the size cap) and 60 MB
		body := emptyPayloads(n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		rec := f.do(http.MethodPost, "/default/encode", body, authHeader())
		runtime.ReadMemStats(&after)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%d empty payloads: status %d; want 413", n, rec.Code)
		}
		// httptest's request holds the body already; the server may read at most its cap.
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 24<<20 {
			t.Errorf("%d empty payloads: the server allocated %d MiB to refuse them", n, grew>>20)
		}
	}
}

func TestServerCaps(t *testing.T) {
	var logs bytes.Buffer
	ring := mustRing(t, "k1:"+testKey(1))
	srv, err := NewServer(ring, ServerOptions{
		Token: testToken, MaxPayloads: 3, MaxResponseBytes: 4096, MaxConcurrent: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &serverFixture{srv: srv, ring: ring, logs: &logs}
	if rec := f.do(http.MethodPost, "/encode", emptyPayloads(3), authHeader()); rec.Code != http.StatusOK {
		t.Errorf("3 payloads: %d; want 200 (%s)", rec.Code, rec.Body)
	}
	if rec := f.do(http.MethodPost, "/encode", emptyPayloads(4), authHeader()); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("4 payloads over a cap of 3: %d; want 413", rec.Code)
	}
	big := payloadsJSON(t, plainPayloads(t, strings.Repeat("x", 8000)))
	if rec := f.do(http.MethodPost, "/encode", big, authHeader()); rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "4096") {
		t.Errorf("a response over 4096 bytes: %d %q; want 413 naming the limit", rec.Code, rec.Body)
	}
	srv.slots <- struct{}{} // one request in flight
	if rec := f.do(http.MethodPost, "/encode", emptyPayloads(1), authHeader()); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a request over the concurrency cap: %d; want 503 with Retry-After", rec.Code)
	}
	<-srv.slots
	if rec := f.do(http.MethodPost, "/encode", emptyPayloads(1), authHeader()); rec.Code != http.StatusOK {
		t.Errorf("a request after the slot freed: %d; want 200", rec.Code)
	}
}

// Finding 7: ten refused requests with long paths wrote 11 MB of log.
func TestRefusalsLoggedOncePerIntervalWithPathCut(t *testing.T) {
	f := newServerFixture(t)
	long := "/" + strings.Repeat("a", 1<<20) + "/decode"
	for range 20 {
		if rec := f.do(http.MethodPost, long, "{}", nil); rec.Code != http.StatusUnauthorized {
			t.Fatalf("status %d; want 401", rec.Code)
		}
	}
	if n := strings.Count(f.logs.String(), "refused request"); n != 1 {
		t.Errorf("%d refusal records; want 1 per interval", n)
	}
	if f.logs.Len() > 2048 {
		t.Errorf("refusals wrote %d bytes of log; want the path cut", f.logs.Len())
	}
	f.srv.refusals.last = time.Now().Add(-time.Hour)
	f.do(http.MethodPost, "/decode", "{}", nil)
	if !strings.Contains(f.logs.String(), "refusals_not_logged=19") {
		t.Errorf("the next record does not count the refusals not logged: %s", f.logs)
	}
}

func TestCountPayloads(t *testing.T) {
	tests := []struct {
		body string
		want int
	}{
		{`{"payloads":[]}`, 0},
		{emptyPayloads(5), 5},
		{`{"payloads":[{"metadata":{"encoding":"anNvbg=="},"data":"e30="},{"data":"\"{[{"}]}`, 2},
		{`{"payloads":[{"metadata":{"a":"b","c":{"d":1}}}]}`, 1},
	}
	for _, tt := range tests {
		if got := countPayloads([]byte(tt.body), 100); got != tt.want {
			t.Errorf("countPayloads(%s) = %d; want %d", tt.body, got, tt.want)
		}
	}
	if got := countPayloads([]byte(emptyPayloads(1000)), 10); got != 11 {
		t.Errorf("countPayloads stops past the limit: got %d; want 11", got)
	}
}
