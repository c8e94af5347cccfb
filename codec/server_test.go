package codec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const (
	testToken = "test-codec-token-0123456789"
	uiOrigin  = "http://127.0.0.1:8233"
)

type serverFixture struct {
	srv     *Server
	ring    *KeyRing
	logs    *bytes.Buffer
	encoded []*commonpb.Payload // payloads of secret and an env value, encrypted under k1
	plain   []*commonpb.Payload
}

func newServerFixture(t *testing.T) *serverFixture {
	t.Helper()
	ring := mustRing(t, "k1:"+testKey(1))
	var logs bytes.Buffer
	srv, err := NewServer(ring, ServerOptions{
		Token:          testToken,
		AllowedOrigins: []string{uiOrigin, "http://localhost:8233/"},
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	plain := plainPayloads(t, secret, "env-value-xyz")
	enc, err := NewCodec(ring).Encode(plain)
	if err != nil {
		t.Fatal(err)
	}
	return &serverFixture{srv: srv, ring: ring, logs: &logs, encoded: enc, plain: plain}
}

func payloadsJSON(t *testing.T, ps []*commonpb.Payload) string {
	t.Helper()
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f *serverFixture) do(method, target, body string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, req)
	return rec
}

func TestServerAuth(t *testing.T) {
	f := newServerFixture(t)
	body := payloadsJSON(t, f.encoded)
	tests := []struct {
		name string
		auth string
		want int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "Bearer wrong-token-0123456789", http.StatusUnauthorized},
		{"token prefix", "Bearer " + testToken[:len(testToken)-1], http.StatusUnauthorized},
		{"token plus suffix", "Bearer " + testToken + "x", http.StatusUnauthorized},
		{"bare token", testToken, http.StatusUnauthorized},
		{"basic scheme", "Basic " + testToken, http.StatusUnauthorized},
		{"right token", "Bearer " + testToken, http.StatusOK},
		{"scheme in lower case", "bearer " + testToken, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/json"}
			if tt.auth != "" {
				h["Authorization"] = tt.auth
			}
			rec := f.do(http.MethodPost, "/decode", body, h)
			if rec.Code != tt.want {
				t.Fatalf("status = %d; want %d (%s)", rec.Code, tt.want, rec.Body)
			}
			if tt.want == http.StatusUnauthorized {
				if strings.Contains(rec.Body.String(), "TOP-SECRET") {
					t.Errorf("refused response holds the plaintext")
				}
				if rec.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("401 without WWW-Authenticate")
				}
				return
			}
			var out commonpb.Payloads
			if err := protojson.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("response %s: %v", rec.Body, err)
			}
			if len(out.Payloads) != len(f.plain) {
				t.Fatalf("got %d payloads; want %d", len(out.Payloads), len(f.plain))
			}
			for i := range f.plain {
				if !proto.Equal(out.Payloads[i], f.plain[i]) {
					t.Errorf("payload %d = %v; want %v", i, out.Payloads[i], f.plain[i])
				}
			}
			if got := rec.Header().Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control = %q; want no-store", got)
			}
		})
	}
	if strings.Contains(f.logs.String(), testToken[:12]) || strings.Contains(f.logs.String(), "wrong-token") {
		t.Errorf("logs show a token: %s", f.logs)
	}
	if !strings.Contains(f.logs.String(), "refused request without a valid token") {
		t.Errorf("logs = %q; want refusals recorded", f.logs)
	}
}

func TestServerPaths(t *testing.T) {
	f := newServerFixture(t)
	auth := map[string]string{"Authorization": "Bearer " + testToken, "X-Namespace": "default"}
	tests := []struct {
		method, target string
		want           int
	}{
		{http.MethodPost, "/decode", http.StatusOK},
		{http.MethodPost, "/default/decode", http.StatusOK},
		{http.MethodPost, "/api/codec/my-ns/decode/", http.StatusOK},
		{http.MethodPost, "/decode?preserveStorageRefs=true", http.StatusOK}, // what the Temporal UI sends
		{http.MethodPost, "/encode", http.StatusOK},
		{http.MethodPost, "/default/encode", http.StatusOK},
		{http.MethodPost, "/", http.StatusNotFound},
		{http.MethodPost, "/decoder", http.StatusNotFound},
		{http.MethodPost, "/download", http.StatusNotFound},
		{http.MethodGet, "/decode", http.StatusMethodNotAllowed},
		{http.MethodPut, "/encode", http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			body := payloadsJSON(t, f.encoded)
			if strings.Contains(tt.target, "encode") {
				body = payloadsJSON(t, f.plain)
			}
			rec := f.do(tt.method, tt.target, body, auth)
			if rec.Code != tt.want {
				t.Errorf("status = %d; want %d (%s)", rec.Code, tt.want, rec.Body)
			}
		})
	}
}

func TestServerEncodeDecode(t *testing.T) {
	f := newServerFixture(t)
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	rec := f.do(http.MethodPost, "/ns/encode", payloadsJSON(t, f.plain), auth)
	if rec.Code != http.StatusOK {
		t.Fatalf("encode status %d: %s", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), "TOP-SECRET") {
		t.Fatalf("encode response holds plaintext")
	}
	var enc commonpb.Payloads
	if err := protojson.Unmarshal(rec.Body.Bytes(), &enc); err != nil {
		t.Fatal(err)
	}
	dec, err := NewCodec(f.ring).Decode(enc.Payloads)
	if err != nil {
		t.Fatalf("decode what the server encoded: %v", err)
	}
	if !proto.Equal(dec[0], f.plain[0]) {
		t.Errorf("round trip = %v; want %v", dec[0], f.plain[0])
	}

	// A payload under a key the server lacks: 400 with the clear error.
	other, err := NewCodec(mustRing(t, "old:"+testKey(7))).Encode(f.plain[:1])
	if err != nil {
		t.Fatal(err)
	}
	rec = f.do(http.MethodPost, "/decode", payloadsJSON(t, other), auth)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `key id "old", which is not in the key ring`) {
		t.Errorf("decode under unknown key: %d %q; want 400 naming key id old", rec.Code, rec.Body)
	}

	rec = f.do(http.MethodPost, "/decode", "{not json", auth)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("bad JSON: status %d; want 400", rec.Code)
	}
}

func TestServerBodyLimit(t *testing.T) {
	srv, err := NewServer(mustRing(t, "k1:"+testKey(1)), ServerOptions{Token: testToken, MaxRequestBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	body := payloadsJSON(t, plainPayloads(t, strings.Repeat("x", 2048)))
	req := httptest.NewRequest(http.MethodPost, "/encode", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("status = %d; want 413", rec.Code)
	}
}

func TestServerCORS(t *testing.T) {
	f := newServerFixture(t)
	preflight := map[string]string{
		"Origin":                         uiOrigin,
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "authorization,content-type,x-namespace",
	}
	rec := f.do(http.MethodOptions, "/default/decode", "", preflight)
	if rec.Code != http.StatusNoContent {
		t.Fatalf("preflight status = %d; want 204", rec.Code)
	}
	h := rec.Header()
	if got := h.Get("Access-Control-Allow-Origin"); got != uiOrigin {
		t.Errorf("Allow-Origin = %q; want %q", got, uiOrigin)
	}
	if got := h.Get("Access-Control-Allow-Credentials"); got != "true" {
		t.Errorf("Allow-Credentials = %q; want true", got)
	}
	if got := h.Get("Access-Control-Allow-Methods"); !strings.Contains(got, "POST") {
		t.Errorf("Allow-Methods = %q; want POST", got)
	}
	allowHeaders := strings.ToLower(h.Get("Access-Control-Allow-Headers"))
	for _, want := range []string{"authorization", "content-type", "x-namespace"} {
		if !strings.Contains(allowHeaders, want) {
			t.Errorf("Allow-Headers = %q; want it to include %s", allowHeaders, want)
		}
	}
	if !strings.Contains(h.Get("Vary"), "Origin") {
		t.Errorf("Vary = %q; want Origin", h.Get("Vary"))
	}

	// The second configured origin is matched after normalisation (trailing slash, case).
	rec = f.do(http.MethodOptions, "/decode", "", map[string]string{"Origin": "http://LOCALHOST:8233"})
	if rec.Code != http.StatusNoContent {
		t.Errorf("preflight from second origin: status %d; want 204", rec.Code)
	}

	// Private Network Access preflight is answered for an allowed origin.
	rec = f.do(http.MethodOptions, "/decode", "", map[string]string{"Origin": uiOrigin, "Access-Control-Request-Private-Network": "true"})
	if got := rec.Header().Get("Access-Control-Allow-Private-Network"); got != "true" {
		t.Errorf("Allow-Private-Network = %q; want true", got)
	}

	// Another origin is refused, for the preflight and for the request even with the token.
	for _, m := range []string{http.MethodOptions, http.MethodPost} {
		rec = f.do(m, "/decode", payloadsJSON(t, f.encoded), map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + testToken})
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s from another origin: status %d; want 403", m, rec.Code)
		}
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("%s from another origin: Allow-Origin = %q; want none", m, got)
		}
		if strings.Contains(rec.Body.String(), "TOP-SECRET") {
			t.Errorf("%s from another origin: response holds plaintext", m)
		}
	}

	// An allowed origin's request gets the CORS headers, also on a 401, so the UI can read it.
	rec = f.do(http.MethodPost, "/decode", payloadsJSON(t, f.encoded), map[string]string{"Origin": uiOrigin})
	if rec.Code != http.StatusUnauthorized || rec.Header().Get("Access-Control-Allow-Origin") != uiOrigin {
		t.Errorf("no token from UI origin: %d, Allow-Origin %q; want 401 with %q", rec.Code, rec.Header().Get("Access-Control-Allow-Origin"), uiOrigin)
	}
	rec = f.do(http.MethodPost, "/decode", payloadsJSON(t, f.encoded), map[string]string{"Origin": uiOrigin, "Authorization": "Bearer " + testToken})
	if rec.Code != http.StatusOK || rec.Header().Get("Access-Control-Allow-Origin") != uiOrigin {
		t.Errorf("token from UI origin: %d, Allow-Origin %q; want 200 with %q", rec.Code, rec.Header().Get("Access-Control-Allow-Origin"), uiOrigin)
	}
}

func TestServerLoginCookie(t *testing.T) {
	f := newServerFixture(t)
	rec := f.do(http.MethodGet, "/login", "", nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `name="token"`) {
		t.Fatalf("GET /login: %d %q; want a form", rec.Code, rec.Body)
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}

	rec = f.do(http.MethodPost, "/login", url.Values{"token": {"wrong-token-0123456789"}}.Encode(), form)
	if rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("login with wrong token: %d, cookies %v; want 401 and none", rec.Code, rec.Result().Cookies())
	}

	rec = f.do(http.MethodPost, "/login", url.Values{"token": {testToken}}.Encode(), form)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusOK || len(cookies) != 1 {
		t.Fatalf("login: %d, cookies %v; want 200 and one cookie", rec.Code, cookies)
	}
	c := cookies[0]
	if c.Name != SignInCookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.MaxAge <= 0 {
		t.Errorf("cookie %+v; want %s, HttpOnly, SameSite=Strict, a max age", c, SignInCookieName)
	}
	if strings.Contains(c.Value, testToken) {
		t.Errorf("cookie holds the token itself")
	}

	decode := func(cookie string) int {
		return f.do(http.MethodPost, "/decode", payloadsJSON(t, f.encoded), map[string]string{"Origin": uiOrigin, "Cookie": cookie}).Code
	}
	if got := decode(SignInCookieName + "=" + c.Value); got != http.StatusOK {
		t.Errorf("decode with session cookie: status %d; want 200", got)
	}
	if got := decode(SignInCookieName + "=forged"); got != http.StatusUnauthorized {
		t.Errorf("decode with forged cookie: status %d; want 401", got)
	}

	// A server with another token does not accept this cookie.
	other, err := NewServer(f.ring, ServerOptions{Token: "another-token-0123456789", AllowedOrigins: []string{uiOrigin}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/decode", strings.NewReader(payloadsJSON(t, f.encoded)))
	req.AddCookie(c)
	rr := httptest.NewRecorder()
	other.ServeHTTP(rr, req)
	if rr.Code != http.StatusUnauthorized {
		t.Errorf("cookie on a server with another token: status %d; want 401", rr.Code)
	}
}

func TestNewServerValidates(t *testing.T) {
	ring := mustRing(t, "k1:"+testKey(1))
	tests := []struct {
		name string
		opts ServerOptions
		ok   bool
	}{
		{"good", ServerOptions{Token: testToken, AllowedOrigins: []string{uiOrigin, "https://temporal.example.com"}}, true},
		{"no token", ServerOptions{}, false},
		{"short token", ServerOptions{Token: "short"}, false},
		{"token with space", ServerOptions{Token: "a token with spaces in it"}, false},
		{"wildcard origin", ServerOptions{Token: testToken, AllowedOrigins: []string{"*"}}, false},
		{"origin with path", ServerOptions{Token: testToken, AllowedOrigins: []string{"http://127.0.0.1:8233/ui"}}, false},
		{"origin without scheme", ServerOptions{Token: testToken, AllowedOrigins: []string{"127.0.0.1:8233"}}, false},
		{"ftp origin", ServerOptions{Token: testToken, AllowedOrigins: []string{"ftp://x"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewServer(ring, tt.opts)
			if (err == nil) != tt.ok {
				t.Errorf("NewServer error = %v; want ok %v", err, tt.ok)
			}
			if err != nil && strings.Contains(err.Error(), tt.opts.Token) && tt.opts.Token != "" {
				t.Errorf("error %q shows the token", err)
			}
		})
	}
}

func TestNewToken(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || len(a) < MinTokenLen {
		t.Errorf("tokens %q, %q; want two different tokens of at least %d characters", a, b, MinTokenLen)
	}
	if _, err := NewServer(nil, ServerOptions{Token: a}); err != nil {
		t.Errorf("NewServer refused a NewToken token: %v", err)
	}
}

// TestServerWithTemporalRemoteCodec talks to the server over HTTP with the SDK's remote codec,
// the client the temporal CLI uses for --codec-endpoint and --codec-auth.
func TestServerWithTemporalRemoteCodec(t *testing.T) {
	f := newServerFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(ctx, ln) }()
	endpoint := "http://" + ln.Addr().String()

	for _, ep := range []string{endpoint, endpoint + "/my-namespace"} {
		remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
			Endpoint: ep,
			ModifyRequest: func(r *http.Request) error {
				r.Header.Set("X-Namespace", "my-namespace")
				r.Header.Set("Authorization", "Bearer "+testToken)
				return nil
			},
		})
		enc, err := remote.Encode(f.plain)
		if err != nil {
			t.Fatalf("%s: remote Encode: %v", ep, err)
		}
		if string(enc[0].Metadata[MetadataKeyID]) != "k1" {
			t.Errorf("%s: remote Encode metadata %v; want key id k1", ep, enc[0].Metadata)
		}
		dec, err := remote.Decode(enc)
		if err != nil {
			t.Fatalf("%s: remote Decode: %v", ep, err)
		}
		for i := range f.plain {
			if !proto.Equal(dec[i], f.plain[i]) {
				t.Errorf("%s: payload %d = %v; want %v", ep, i, dec[i], f.plain[i])
			}
		}
	}

	noAuth := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: endpoint})
	if _, err := noAuth.Decode(f.encoded); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("remote Decode without token = %v; want Unauthorized", err)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after cancel = %v; want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := http.Get(endpoint + "/decode"); err == nil {
		t.Errorf("server still answers after shutdown")
	}
}

func TestListenAndServeReportsListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv, err := NewServer(nil, ServerOptions{Token: testToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.ListenAndServe(context.Background(), ln.Addr().String())
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("ListenAndServe on a taken port = %v; want a *net.OpError", err)
	}
}
