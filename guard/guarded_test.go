package guard

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

type fakeBackend struct {
	name  string
	res   Result
	err   error
	calls atomic.Int32
}

func (f *fakeBackend) Name() string { return f.name }

func (f *fakeBackend) Run(ctx context.Context, c Checked) (Result, error) {
	f.calls.Add(1)
	return f.res, f.err
}

func TestEnforce(t *testing.T) {
	l := Limits{Timeout: time.Second, MaxStdoutBytes: 4, MaxStderrBytes: 2, MaxFiles: 2, MaxFileBytes: 5, MaxTotalFileBytes: 8}
	tests := []struct {
		label     string
		in        Result
		wantNames []string
		wantTrunc bool
	}{
		{"fits", Result{Files: []File{{Name: "a", Content: []byte("12345")}}}, []string{"a"}, false},
		{"unsafe names", Result{Files: []File{{Name: "../x"}, {Name: "/etc/passwd"}, {Name: "ok"}}}, []string{"ok"}, true},
		{"duplicate dropped both times", Result{Files: []File{{Name: "a.txt", Content: []byte("1")}, {Name: "A.TXT", Content: []byte("2")}}}, nil, true},
		{"file too big", Result{Files: []File{{Name: "big", Content: []byte("123456")}, {Name: "s"}}}, []string{"s"}, true},
		{"too many", Result{Files: []File{{Name: "1"}, {Name: "2"}, {Name: "3"}}}, []string{"1", "2"}, true},
		{"total too big", Result{Files: []File{{Name: "a", Content: []byte("12345")}, {Name: "b", Content: []byte("12345")}}}, []string{"a"}, true},
	}
	for _, tt := range tests {
		got := Enforce(tt.in, l)
		var names []string
		for _, f := range got.Files {
			names = append(names, f.Name)
			if f.Size != int64(len(f.Content)) {
				t.Errorf("%s: file %s size %d; want %d", tt.label, f.Name, f.Size, len(f.Content))
			}
		}
		if !slices.Equal(names, tt.wantNames) || got.FilesTruncated != tt.wantTrunc {
			t.Errorf("%s: got %v truncated %t; want %v truncated %t", tt.label, names, got.FilesTruncated, tt.wantNames, tt.wantTrunc)
		}
	}
	out := Enforce(Result{Stdout: []byte("123456"), Stderr: []byte("12"), ExitCode: 0}, l)
	if string(out.Stdout) != "1234" || !out.StdoutTruncated || out.StderrTruncated || !out.OK {
		t.Errorf("streams: got %q/%t %q/%t ok %t", out.Stdout, out.StdoutTruncated, out.Stderr, out.StderrTruncated, out.OK)
	}
	to := Enforce(Result{TimedOut: true, ExitCode: 0}, l)
	if to.ExitCode != -1 || to.OK {
		t.Errorf("timeout: got exit %d ok %t; want -1 false", to.ExitCode, to.OK)
	}
	killed := Enforce(Result{ExitCode: 0, Outcome: OutcomeMemoryLimit}, l)
	if killed.OK {
		t.Errorf("a run killed at a limit is reported ok")
	}
}

func TestGuardedRefusesBeforeRunning(t *testing.T) {
	p := Policy{}
	c, err := p.Check(Request{Code: "print(1)"}, "fake")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBackend{name: "fake"}
	tampered := c
	tampered.Code = "import os; os.system('rm -rf /')"
	if _, err := New(b, p).Run(context.Background(), tampered); TypeOf(err) != TypeConfigError {
		t.Fatalf("tampered code: got %v; want ConfigError (digest mismatch)", err)
	}
	if _, err := New(&fakeBackend{name: "other"}, p).Run(context.Background(), c); TypeOf(err) != TypeConfigError {
		t.Fatalf("other backend: got %v; want ConfigError", err)
	}
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("the backend ran %d times; want 0", n)
	}
}

func TestGuardedFillsResultAndCaps(t *testing.T) {
	p := Policy{MaxStdoutBytes: 3}
	c, err := p.Check(Request{Code: "print(1)"}, "fake")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBackend{name: "fake", res: Result{Stdout: bytes.Repeat([]byte("x"), 100), Backend: "lies", Digest: "lies"}}
	res, err := New(b, p).Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 3 || res.Digest != c.Digest || res.Backend != "fake" {
		t.Fatalf("got %d bytes digest %s backend %s; want 3, %s, fake", len(res.Stdout), res.Digest, res.Backend, c.Digest)
	}
}

// TestGuardedCancelKeepsTheOutputPrinted shows that a run cancelled while its code runs is a
// result whose outcome is cancelled, with what the backend reported before, passed on to the
// context's own OutputFunc as it came; the guard waits for the backend to stop its sandbox.
func TestGuardedCancelKeepsTheOutputPrinted(t *testing.T) {
	p := Policy{MaxStdoutBytes: 6}
	c, err := p.Check(Request{Code: "print(1)"}, "slow")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var live bytes.Buffer
	ctx = WithOutput(ctx, func(s Stream, b []byte) {
		if s == StreamStdout {
			live.Write(b)
		}
	})
	b := &blocking{print: "line 1\n", stop: 300 * time.Millisecond, printed: make(chan struct{})}
	go func() { <-b.printed; cancel() }()
	start := time.Now()
	res, err := New(b, p).Run(ctx, c)
	if err != nil {
		t.Fatalf("got %v; want a cancelled result", err)
	}
	if !b.stopped.Load() {
		t.Errorf("Run returned %s after the cancel, before the backend had stopped its sandbox", time.Since(start))
	}
	if res.Outcome != OutcomeCancelled || res.OK || res.TimedOut || res.ExitCode != -1 {
		t.Errorf("got outcome %v ok=%t timed_out=%t exit %d; want cancelled false false -1", res.Outcome, res.OK, res.TimedOut, res.ExitCode)
	}
	if string(res.Stdout) != "line 1" || !res.StdoutTruncated || res.Digest != c.Digest || res.Backend != "slow" {
		t.Errorf("got stdout %q truncated=%t digest %s backend %s; want the first 6 bytes, truncated, %s, slow", res.Stdout, res.StdoutTruncated, res.Digest, res.Backend, c.Digest)
	}
	if live.String() != "line 1\n" {
		t.Errorf("the context's OutputFunc got %q; want every byte the backend reported", live.String())
	}
}

// TestGuardedCancelBeforeTheCodeStarted shows that a cancelled run whose backend says the code had
// not started returns that (retryable) error, not a result: nothing ran.
func TestGuardedCancelBeforeTheCodeStarted(t *testing.T) {
	p := Policy{}
	c, err := p.Check(Request{Code: "print(1)"}, "slow")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := &blocking{err: &IntegrationError{Op: "create container", Err: errors.New("cancelled"), CodeMayHaveStarted: false}}
	_, err = New(b, p).Run(ctx, c)
	if !Retryable(err) {
		t.Fatalf("got %v; want the backend's retryable error", err)
	}
}

// TestGuardedCancelDoesNotWaitPastTheGrace shows a backend that ignores the cancel is not waited
// for past the policy's grace.
func TestGuardedCancelDoesNotWaitPastTheGrace(t *testing.T) {
	p := Policy{Grace: 200 * time.Millisecond}
	c, err := p.Check(Request{Code: "print(1)"}, "slow")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &blocking{print: "x", stop: time.Hour, printed: make(chan struct{})}
	go func() { <-b.printed; cancel() }()
	start := time.Now()
	res, err := New(b, p).Run(ctx, c)
	if err != nil || res.Outcome != OutcomeCancelled || string(res.Stdout) != "x" {
		t.Fatalf("got %v, outcome %v stdout %q; want cancelled with x", err, res.Outcome, res.Stdout)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Run took %s; want about the grace (200ms)", d)
	}
}

// blocking is a backend that reports print as output, then waits for its context and takes stop
// to stop its sandbox before it returns err (ctx's error when nil).
type blocking struct {
	print   string
	stop    time.Duration
	err     error
	printed chan struct{}
	stopped atomic.Bool
}

func (*blocking) Name() string { return "slow" }
func (b *blocking) Run(ctx context.Context, c Checked) (Result, error) {
	if f := OutputOf(ctx); f != nil && b.print != "" {
		f(StreamStdout, []byte(b.print))
	}
	if b.printed != nil {
		close(b.printed)
	}
	<-ctx.Done()
	select {
	case <-time.After(b.stop):
	case <-time.After(time.Minute):
	}
	b.stopped.Store(true)
	if b.err != nil {
		return Result{}, b.err
	}
	return Result{}, &IntegrationError{Op: "run", Err: ctx.Err(), CodeMayHaveStarted: true}
}

func TestCapBuffer(t *testing.T) {
	b := NewCapBuffer(5)
	for _, s := range []string{"abc", "defgh", "ij"} {
		n, err := b.Write([]byte(s))
		if n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	if string(b.Bytes()) != "abcde" || b.Total() != 10 || !b.Truncated() {
		t.Fatalf("got %q total %d truncated %t; want abcde 10 true", b.Bytes(), b.Total(), b.Truncated())
	}
}
