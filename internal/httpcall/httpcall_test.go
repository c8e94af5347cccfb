package httpcall

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestTraceTellsWrittenFromNeverSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request was read in full: then the connection breaks before any answer.
		hj, _ := w.(http.Hijacker)
		c, _, _ := hj.Hijack()
		c.Close()
	}))
	defer srv.Close()
	post := func(url string) bool {
		var sent atomic.Bool
		req, err := http.NewRequestWithContext(Trace(context.Background(), &sent), http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("POST %s: want a failure, got %s", url, resp.Status)
		}
		return sent.Load()
	}
	if !post(srv.URL) {
		t.Error("a request written in full before the connection broke counts as not sent")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	if post(closed) {
		t.Error("a request to a port nobody listens on counts as sent")
	}
}

func TestParseURLTakesOnlyAbsoluteHTTPAndNeverQuotesAPassword(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080/run", "https://api.example.com"} {
		if _, err := ParseURL(ok); err != nil {
			t.Errorf("ParseURL(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "ftp://x/run", "/run", "api.example.com:443", "https://", "http://user:hunter2@%zz", "https://user:hunter2@"} {
		_, err := ParseURL(bad)
		if err == nil {
			t.Errorf("ParseURL(%q) = nil error; want a refusal", bad)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURL(%q) error %q shows the password", bad, err)
		}
	}
	if got := Redact("https://user:hunter2@api.example.com/x?token=hunter3&page=2"); strings.Contains(got, "hunter") || !strings.Contains(got, "api.example.com/x?") || !strings.Contains(got, "token=") {
		t.Errorf("Redact = %q; want the host, path and query names without the password or query values", got)
	}
}

// TestDoErrorsHideTheQuery: net/http's own errors name the URL (hiding only a password); Do's
// errors end up in history, so a token in the query must not.
func TestDoErrorsHideTheQuery(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, sent, err := Do(context.Background(), http.DefaultClient, Request{Method: http.MethodPost, URL: "http://u:hunter2@" + addr + "/run?token=hunter3", JSON: 1, MaxAnswer: 1})
	if err == nil || sent || strings.Contains(err.Error(), "hunter") || !strings.Contains(err.Error(), addr) {
		t.Errorf("Do to a closed port: sent=%t err=%v; want an unsent error naming the address and no secret", sent, err)
	}
}
