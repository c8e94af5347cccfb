//go:build integration

package notify_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// httpServer serves a webhookReceiver.
type httpServer struct{ r *webhookReceiver }

func (s *httpServer) serve(ln net.Listener) {
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r := s.r
		d := delivery{Headers: map[string]string{}, Body: readAll(req.Body)}
		for k, v := range req.Header {
			d.Headers[strings.ToLower(k)] = strings.Join(v, ",")
		}
		r.mu.Lock()
		r.deliveries = append(r.deliveries, d)
		n := len(r.deliveries)
		r.mu.Unlock()
		r.arrived <- d
		status := r.answer(n)
		if status == 0 {
			<-req.Context().Done() // hang until the sender goes away
			return
		}
		w.WriteHeader(status)
	}))
}

// wait returns the next message, or fails t after d.
func (s *smtpServer) wait(t *testing.T, d time.Duration) mail {
	t.Helper()
	select {
	case m := <-s.arrived:
		return m
	case <-time.After(d):
		t.Fatalf("no email within %s", d)
		return mail{}
	}
}

// webhookReceiver is an HTTP server on loopback that keeps every delivery and answers each with
// what answer says: a status, or 0 to hang until the sender goes away.
type webhookReceiver struct {
	URL string

	ln         net.Listener
	mu         sync.Mutex
	deliveries []delivery
	answer     func(n int) int
	arrived    chan delivery
}

// delivery is one request as received: the Standard Webhooks headers and the raw body.
type delivery struct {
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

func startReceiver(t *testing.T, answer func(n int) int) *webhookReceiver {
	t.Helper()
	r := &webhookReceiver{answer: answer, arrived: make(chan delivery, 64)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.ln = ln
	r.URL = "http://" + ln.Addr().String() + "/hook"
	srv := &httpServer{r: r}
	go srv.serve(ln)
	t.Cleanup(func() { _ = ln.Close() })
	return r
}

// close stops listening: the port refuses connections from then on.
func (r *webhookReceiver) close() { _ = r.ln.Close() }

func (r *webhookReceiver) all() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.deliveries...)
}

// wait returns the next delivery, or fails t after d.
func (r *webhookReceiver) wait(t *testing.T, d time.Duration) delivery {
	t.Helper()
	select {
	case x := <-r.arrived:
		return x
	case <-time.After(d):
		t.Fatalf("no webhook delivery within %s (got %d so far)", d, len(r.all()))
		return delivery{}
	}
}

// quiet fails t if a delivery arrives within d.
func (r *webhookReceiver) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case x := <-r.arrived:
		t.Fatalf("an extra delivery arrived: %s %s", x.Headers["webhook-id"], x.Body)
	case <-time.After(d):
	}
}

// readAll reads a request body up to 1 MiB.
func readAll(r io.Reader) string {
	var b bytes.Buffer
	_, _ = io.Copy(&b, io.LimitReader(r, 1<<20))
	return b.String()
}
