package httpservice

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

func TestHTTPRecipe(t *testing.T) {
	var got guard.Checked
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&got)
		// A service that ignores the limits it was sent.
		_ = json.NewEncoder(w).Encode(guard.Result{ExitCode: 0, Stdout: bytes.Repeat([]byte("x"), 5000),
			Files: []guard.File{{Name: "../../etc/passwd", Content: []byte("x")}, {Name: "ok.txt", Content: []byte("y")}}})
	}))
	defer srv.Close()
	fn, err := HTTP(HTTPOptions{URL: srv.URL, Header: http.Header{"Authorization": {"Bearer s3cret"}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New("own-service", fn)
	if err != nil {
		t.Fatal(err)
	}
	p := guard.Policy{MaxStdoutBytes: 100}
	c, err := p.Check(guard.Request{Code: "print(1)", Settings: guard.Settings{Files: map[string][]byte{"in": {0, 255}}, Env: map[string]string{"K": "v"}}}, "own-service")
	if err != nil {
		t.Fatal(err)
	}
	res, err := guard.New(b, p).Run(context.Background(), c)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got.Code != "print(1)" || got.Digest != c.Digest || len(got.Files) != 1 || !bytes.Equal(got.Files[0].Content, []byte{0, 255}) || got.Env[0].Value != "v" {
		t.Fatalf("the service received %+v", got)
	}
	if len(res.Stdout) != 100 || !res.StdoutTruncated || !res.FilesTruncated || len(res.Files) != 1 || res.Files[0].Name != "ok.txt" {
		t.Fatalf("got %+v; want the limits re-applied", res)
	}
}

func TestHTTPRecipeErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer failing.Close()
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte(" "), 10<<20))
	}))
	defer huge.Close()
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("not json"))
	}))
	defer garbage.Close()
	tests := []struct {
		name, url string
		retryable bool
	}{
		{"unreachable before sending", closed, true},
		{"status 500", failing.URL, false},
		{"oversized response", huge.URL, false},
		{"unreadable result", garbage.URL, false},
	}
	p := guard.Policy{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A token in the URL's query is a secret like a password: no error may quote it.
			fn, err := HTTP(HTTPOptions{URL: tt.url + "/run?token=s3cret-query", Client: &http.Client{Timeout: 10 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := New("svc", fn)
			c, err := p.Check(guard.Request{Code: "print(1)"}, "svc")
			if err != nil {
				t.Fatal(err)
			}
			_, err = guard.New(b, p).Run(context.Background(), c)
			if guard.TypeOf(err) != guard.TypeIntegrationError || guard.Retryable(err) != tt.retryable {
				t.Fatalf("got %v (retryable %t); want IntegrationError retryable=%t", err, guard.Retryable(err), tt.retryable)
			}
			if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "token=") {
				t.Errorf("error %q: want the query's names without their values", err)
			}
		})
	}
	if _, err := HTTP(HTTPOptions{URL: "ftp://x"}); guard.TypeOf(err) != guard.TypeConfigError {
		t.Fatalf("bad URL: got %v; want ConfigError", err)
	}
}

// The http backend keeps nothing between calls: it is no session backend, so the workflow side
// refuses sessions on it (a ConfigError) rather than running cells as unrelated runs.
func TestHTTPBackendIsNoSessionBackend(t *testing.T) {
	b, err := NewHTTP(HTTPOptions{URL: "http://127.0.0.1:1/run"})
	if err != nil {
		t.Fatal(err)
	}
	var backend guard.Backend = b
	if _, ok := backend.(guard.SessionBackend); ok {
		t.Fatal("the http backend implements guard.SessionBackend; its doc and docs/backends.md say it refuses sessions")
	}
}
