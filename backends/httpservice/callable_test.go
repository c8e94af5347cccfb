package httpservice

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// hostile is a fake hosted service that ignores every limit it is given.
type hostile struct {
	hang bool
}

func (h hostile) run(ctx context.Context, c guard.Checked) (guard.Result, error) {
	if h.hang {
		select {} // never returns, not even when ctx is done
	}
	big := bytes.Repeat([]byte("A"), 10<<20)
	return guard.Result{
		ExitCode: 0,
		Stdout:   big,
		Stderr:   big,
		Files: []guard.File{
			{Name: "../../etc/passwd", Size: 3, Content: []byte("pwn")},
			{Name: "/etc/shadow", Content: []byte("pwn")},
			{Name: "a.txt", Size: 1, Content: []byte("first")},
			{Name: "a.txt", Size: 1, Content: []byte("second")},
			{Name: "ok.txt", Size: 1 << 40, Content: []byte("fine")},
			{Name: "huge.bin", Content: bytes.Repeat([]byte("B"), 2<<20)},
		},
	}, nil
}

func checked(t *testing.T, p guard.Policy, name string, timeout time.Duration) guard.Checked {
	t.Helper()
	c, err := p.Check(guard.Request{Code: "print(1)", Settings: guard.Settings{Limits: guard.Limits{Timeout: timeout}}}, name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHostileServiceGetsNoMoreThanTheLimits(t *testing.T) {
	b, err := New("hostile", hostile{}.run)
	if err != nil {
		t.Fatal(err)
	}
	p := guard.Policy{MaxStdoutBytes: 1000, MaxStderrBytes: 500}
	res, err := guard.New(b, p).Run(context.Background(), checked(t, p, "hostile", time.Second))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(res.Stdout) != 1000 || !res.StdoutTruncated || len(res.Stderr) != 500 || !res.StderrTruncated {
		t.Fatalf("got stdout %d (truncated %t), stderr %d (truncated %t); want 1000 true, 500 true",
			len(res.Stdout), res.StdoutTruncated, len(res.Stderr), res.StderrTruncated)
	}
	if !res.FilesTruncated {
		t.Fatalf("files_truncated is false; want true")
	}
	if len(res.Files) != 1 || res.Files[0].Name != "ok.txt" || res.Files[0].Size != 4 {
		t.Fatalf("got files %+v; want only ok.txt with its real size 4", res.Files)
	}
}

func TestServiceThatNeverReturnsTimesOutAtTimeoutPlusGrace(t *testing.T) {
	b, err := New("hangs", hostile{hang: true}.run)
	if err != nil {
		t.Fatal(err)
	}
	p := guard.Policy{Grace: 500 * time.Millisecond}
	start := time.Now()
	res, err := guard.New(b, p).Run(context.Background(), checked(t, p, "hangs", time.Second))
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.TimedOut || res.ExitCode != -1 || res.OK {
		t.Fatalf("got timed_out %t exit %d ok %t; want true -1 false", res.TimedOut, res.ExitCode, res.OK)
	}
	if elapsed < 1500*time.Millisecond || elapsed > 10*time.Second {
		t.Fatalf("the backstop fired after %s; want about timeout + grace = 1.5s", elapsed)
	}
	if !strings.Contains(string(res.Stderr), "did not return") {
		t.Fatalf("stderr %q does not say the backstop ended the run", res.Stderr)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	p := guard.Policy{}
	tests := []struct {
		name      string
		fn        Func
		retryable bool
		wantType  string
	}{
		{"untyped error is outcome unknown", func(context.Context, guard.Checked) (guard.Result, error) {
			return guard.Result{}, errors.New("connection reset")
		}, false, guard.TypeIntegrationError},
		{"unreachable before start may retry", func(context.Context, guard.Checked) (guard.Result, error) {
			return guard.Result{}, &guard.IntegrationError{Op: "dial", Err: errors.New("refused")}
		}, true, guard.TypeIntegrationError},
		{"panic is recovered", func(context.Context, guard.Checked) (guard.Result, error) {
			panic("boom")
		}, false, guard.TypeIntegrationError},
		{"config error passes through", func(context.Context, guard.Checked) (guard.Result, error) {
			return guard.Result{}, &guard.ConfigError{Msg: "no such template"}
		}, false, guard.TypeConfigError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New("svc", tt.fn)
			if err != nil {
				t.Fatal(err)
			}
			_, err = guard.New(b, p).Run(context.Background(), checked(t, p, "svc", time.Second))
			if got := guard.TypeOf(err); got != tt.wantType {
				t.Fatalf("got type %q (%v); want %q", got, err, tt.wantType)
			}
			if got := guard.Retryable(err); got != tt.retryable {
				t.Fatalf("Retryable(%v) = %t; want %t", err, got, tt.retryable)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	ok := func(context.Context, guard.Checked) (guard.Result, error) { return guard.Result{}, nil }
	for _, tt := range []struct {
		name string
		fn   Func
	}{{"", ok}, {"Bad Name", ok}, {"../x", ok}, {"good", nil}} {
		if _, err := New(tt.name, tt.fn); guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("New(%q, fn=%t): got %v; want ConfigError", tt.name, tt.fn != nil, err)
		}
	}
}

// ExampleNew wraps a hosted code-execution service. The function stands in for a real SDK call;
// it never runs code on this machine.
func ExampleNew() {
	service := func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		// A real recipe creates a sandbox with network off unless c.Network, writes c.Files,
		// runs c.Code with c.Limits.Timeout and kills the sandbox afterwards.
		return guard.Result{ExitCode: 0, Stdout: []byte("25.0\n")}, nil
	}
	backend, err := New("hosted", service)
	if err != nil {
		panic(err)
	}
	policy := guard.Policy{}
	c, err := policy.Check(guard.Request{Code: "print(5.0 * 5)"}, backend.Name())
	if err != nil {
		panic(err)
	}
	res, err := guard.New(backend, policy).Run(context.Background(), c)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(res.Stdout))
	// Output: 25.0
}
