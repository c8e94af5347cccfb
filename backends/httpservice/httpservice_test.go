package httpservice

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/httpfake"
)

func TestNewHTTPAgainstTheFakeService(t *testing.T) {
	srv := httpfake.Start(t, http.Header{"Authorization": {"Bearer s3cret"}})
	b, err := NewHTTP(HTTPOptions{URL: srv.URL, Header: http.Header{"Authorization": {"Bearer s3cret"}}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "http" {
		t.Fatalf("Name() = %q; want http", b.Name())
	}
	p := guard.Policy{}
	c, err := p.Check(guard.Request{Code: "print(open('in.txt').read())\nopen('out.txt','w').write('made')", Settings: guard.Settings{Files: map[string][]byte{"in.txt": []byte("hello")}}}, b.Name())
	if err != nil {
		t.Fatal(err)
	}
	res, err := guard.New(b, p).Run(context.Background(), c)
	if err != nil || string(res.Stdout) != "hello\n" || len(res.Files) != 1 || string(res.Files[0].Content) != "made" {
		t.Fatalf("got %+v, %v; want hello and out.txt", res, err)
	}
}

// failingConn loses the connection after n bytes were written (mid-body for a body larger than
// the transport's 4 KiB write buffer).
type failingConn struct {
	net.Conn
	n int
}

func (c *failingConn) Write(p []byte) (int, error) {
	if len(p) > c.n {
		_ = c.Conn.Close()
		return 0, errors.New("connection lost while sending")
	}
	c.n -= len(p)
	return c.Conn.Write(p)
}

func TestHTTPClassifiesByWhetherTheRequestWasSent(t *testing.T) {
	good := httpfake.Start(t, nil)
	// A service that reads the whole request, then drops the connection without answering.
	dropper := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		panic(http.ErrAbortHandler)
	}))
	defer dropper.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server notices a client gone only once the body is read
		<-r.Context().Done()
	}))
	defer slow.Close()
	cutSending := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return &failingConn{Conn: conn, n: 6000}, err
	}}}
	tests := []struct {
		name      string
		opts      HTTPOptions
		retryable bool
		timedOut  bool
	}{
		{"connection lost while sending the body", HTTPOptions{URL: good.URL, Client: cutSending}, true, false},
		{"dropped after the request was read", HTTPOptions{URL: dropper.URL}, false, false},
		{"no answer by the deadline", HTTPOptions{URL: slow.URL}, false, true},
	}
	p := guard.Policy{Grace: 200 * time.Millisecond}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := NewHTTP(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			big := map[string][]byte{"data.bin": bytes.Repeat([]byte("d"), 200<<10)}
			c, err := p.Check(guard.Request{Code: "print(1)", Settings: guard.Settings{Files: big, Limits: guard.Limits{Timeout: time.Second}}}, HTTPName)
			if err != nil {
				t.Fatal(err)
			}
			res, err := guard.New(b, p).Run(context.Background(), c)
			if tt.timedOut {
				if err != nil || !res.TimedOut {
					t.Fatalf("got %+v, %v; want a timed-out result", res, err)
				}
				return
			}
			if guard.TypeOf(err) != guard.TypeIntegrationError || guard.Retryable(err) != tt.retryable {
				t.Fatalf("got %v (retryable %t); want IntegrationError retryable=%t", err, guard.Retryable(err), tt.retryable)
			}
		})
	}
	if good.Runs() != 0 {
		t.Fatalf("the service ran %d requests whose sending failed; want 0", good.Runs())
	}
}

func TestLoadHeaderFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	_ = os.WriteFile(good, []byte("# the service's token\nAuthorization: Bearer s3cret-value\n\nX-Team: a:b\n"), 0o600)
	h, err := LoadHeaderFile(good)
	if err != nil || h.Get("Authorization") != "Bearer s3cret-value" || h.Get("X-Team") != "a:b" {
		t.Fatalf("got %v, %v", h, err)
	}
	for _, content := range []string{"no colon s3cret-value\n", "Bad Name: s3cret-value\n", "X-A: s3cret-value\x01\n", "Content-Type: s3cret-value\n"} {
		bad := filepath.Join(dir, "bad")
		_ = os.WriteFile(bad, []byte(content), 0o600)
		_, err := LoadHeaderFile(bad)
		if guard.TypeOf(err) != guard.TypeConfigError || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: got %v; want a ConfigError that does not quote the value", content, err)
		}
	}
	if _, err := LoadHeaderFile(filepath.Join(dir, "missing")); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("missing file: got %v; want ConfigError", err)
	}
	// A wrong path (a log file, a device) is refused after 1 MiB, not read whole.
	huge := filepath.Join(dir, "huge")
	_ = os.WriteFile(huge, []byte(strings.Repeat("X-A: s3cret-value\n", 70000)), 0o600)
	if _, err := LoadHeaderFile(huge); guard.TypeOf(err) != guard.TypeConfigError || !strings.Contains(err.Error(), "larger than") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a file over 1 MiB: got %v; want a ConfigError naming the cap, not the content", err)
	}
}

func TestHTTPDoctor(t *testing.T) {
	hdr := http.Header{"Authorization": {"Bearer s3cret-value"}}
	srv := httpfake.Start(t, hdr)
	for _, c := range HTTPDoctor(context.Background(), HTTPOptions{URL: srv.URL, Header: hdr}) {
		if !c.OK || strings.Contains(c.Detail, "s3cret") {
			t.Errorf("%s ok=%t: %s", c.Name, c.OK, c.Detail)
		}
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String()
	ln.Close()
	checks := HTTPDoctor(context.Background(), HTTPOptions{URL: closed + "/run?token=s3cret-query", Header: hdr})
	if len(checks) != 3 || !checks[0].OK || checks[1].OK || checks[2].OK {
		t.Fatalf("got %+v; want config PASS, reachable FAIL, probe FAIL", checks)
	}
	for _, c := range checks {
		if strings.Contains(c.Detail, "s3cret") {
			t.Errorf("%s: %q quotes the URL's query value", c.Name, c.Detail)
		}
	}
	if checks := HTTPDoctor(context.Background(), HTTPOptions{URL: "ftp://x"}); len(checks) != 1 || checks[0].OK {
		t.Fatalf("got %+v; want one failed config check", checks)
	}
}
