package httpserve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestServeUntilContextEndsThenShutsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, srv, ln) }()
	url := "http://" + ln.Addr().String()
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// A request in flight when ctx ends is answered: the shutdown waits for it.
	slow := make(chan error, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err == nil {
			resp.Body.Close()
		}
		slow <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	time.Sleep(100 * time.Millisecond)
	close(release)
	if err := <-slow; err != nil {
		t.Errorf("request in flight at shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after ctx ended: %v; want nil", err)
	}
	if _, err := http.Get(url + "/"); err == nil {
		t.Error("the server still answers after Serve returned")
	}
}

func TestServeReturnsWhatStoppedIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	err = Serve(context.Background(), &http.Server{}, ln)
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve on a closed listener: %v; want its error", err)
	}
}
