package guard

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// acquirer is a backend that takes a sandbox ahead of the run; its sandboxes count what is done
// with them.
type acquirer struct {
	fakeBackend
	acquireErr               error
	acquires, runs, discards atomic.Int32
	runDeadline              atomic.Value
}

func (a *acquirer) Acquire(ctx context.Context, c Checked) (Acquired, error) {
	a.acquires.Add(1)
	if a.acquireErr != nil {
		return nil, a.acquireErr
	}
	return &taken{a: a}, nil
}

type taken struct{ a *acquirer }

func (s *taken) Run(ctx context.Context) (Result, error) {
	s.a.runs.Add(1)
	if d, ok := ctx.Deadline(); ok {
		s.a.runDeadline.Store(d)
	}
	return s.a.res, s.a.err
}

func (s *taken) Discard() { s.a.discards.Add(1) }

// Acquire re-checks the request before the backend takes anything; Run on what it prepared runs
// once, under a backstop that counts from the run, not from the acquire; Discard runs nothing.
func TestGuardedAcquireThenRunOrDiscard(t *testing.T) {
	p := Policy{Grace: time.Second}
	c, err := p.Check(Request{Code: "print(1)", Settings: Settings{Limits: Limits{Timeout: 2 * time.Second}}}, "fake")
	if err != nil {
		t.Fatal(err)
	}
	b := &acquirer{fakeBackend: fakeBackend{name: "fake", res: Result{Stdout: []byte("1\n")}}}
	g := New(b, p)
	tampered := c
	tampered.Code = "print(2)"
	if _, err := g.Acquire(context.Background(), tampered); TypeOf(err) != TypeConfigError || b.acquires.Load() != 0 {
		t.Fatalf("acquire for tampered code: %v after %d acquires; want a ConfigError before the backend is asked", err, b.acquires.Load())
	}

	prepared, err := g.Acquire(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the claim's time: not taken from the run's backstop
	before := time.Now()
	res, err := prepared.Run(context.Background())
	if err != nil || string(res.Stdout) != "1\n" || res.Digest != c.Digest || res.Backend != "fake" {
		t.Fatalf("run: %+v, %v; want 1 with the digest and backend set", res, err)
	}
	if d, _ := b.runDeadline.Load().(time.Time); d.Before(before.Add(c.Limits.Timeout + p.Grace - 50*time.Millisecond)) {
		t.Errorf("the run's deadline is %s after it started; want timeout + grace (3s) from the run", d.Sub(before))
	}
	if _, err := prepared.Run(context.Background()); err == nil {
		t.Errorf("a second Run of one prepared request ran")
	}
	prepared.Discard() // after Run: nothing to discard
	if b.runs.Load() != 1 || b.discards.Load() != 0 || b.calls.Load() != 0 {
		t.Errorf("runs %d, discards %d, whole runs %d; want 1, 0, 0", b.runs.Load(), b.discards.Load(), b.calls.Load())
	}

	prepared, err = g.Acquire(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	prepared.Discard()
	prepared.Discard()
	if _, err := prepared.Run(context.Background()); err == nil {
		t.Errorf("Run after Discard ran")
	}
	if b.runs.Load() != 1 || b.discards.Load() != 1 {
		t.Errorf("runs %d, discards %d; want the discarded sandbox removed once and never run", b.runs.Load(), b.discards.Load())
	}

	// A failed acquire is the backend's typed error; an untyped one may have started anything.
	b.acquireErr = &IntegrationError{Op: "take a container", Err: errors.New("daemon down")}
	if _, err := g.Acquire(context.Background(), c); !Retryable(err) {
		t.Errorf("acquire failed: %v; want the backend's retryable error", err)
	}
	b.acquireErr = errors.New("what")
	if _, err := g.Acquire(context.Background(), c); TypeOf(err) != TypeIntegrationError || Retryable(err) {
		t.Errorf("acquire failed untyped: %v; want an IntegrationError whose code may have started", err)
	}
	// A cancel while the sandbox starts: Acquire runs nothing, so nothing started.
	b.acquireErr = fmt.Errorf("create container: %w", context.Canceled)
	if _, err := g.Acquire(context.Background(), c); TypeOf(err) != TypeIntegrationError || !Retryable(err) {
		t.Errorf("acquire cancelled: %v; want an IntegrationError whose code did not start", err)
	}
}

// A backend that takes nothing ahead (no Acquirer) runs whole when the prepared request runs.
func TestGuardedAcquireOnAPlainBackend(t *testing.T) {
	p := Policy{}
	c, err := p.Check(Request{Code: "print(1)"}, "fake")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBackend{name: "fake", res: Result{Stdout: []byte("1\n")}}
	prepared, err := New(b, p).Acquire(context.Background(), c)
	if err != nil || b.calls.Load() != 0 {
		t.Fatalf("acquire: %v after %d runs; want nothing run", err, b.calls.Load())
	}
	if res, err := prepared.Run(context.Background()); err != nil || string(res.Stdout) != "1\n" || b.calls.Load() != 1 {
		t.Fatalf("run: %+v, %v, %d runs; want one run of 1", res, err, b.calls.Load())
	}
}

// An Acquirer with no sandbox free (ErrAcquireLater) is run whole: its Run takes one, waiting
// under the run's context.
func TestGuardedAcquireLater(t *testing.T) {
	p := Policy{}
	c, err := p.Check(Request{Code: "print(1)"}, "fake")
	if err != nil {
		t.Fatal(err)
	}
	b := &acquirer{fakeBackend: fakeBackend{name: "fake", res: Result{Stdout: []byte("1\n")}}, acquireErr: ErrAcquireLater}
	prepared, err := New(b, p).Acquire(context.Background(), c)
	if err != nil {
		t.Fatalf("acquire with none free: %v; want the request prepared for Run to take one", err)
	}
	if res, err := prepared.Run(context.Background()); err != nil || string(res.Stdout) != "1\n" || b.calls.Load() != 1 || b.runs.Load() != 0 {
		t.Fatalf("run: %+v, %v; backend runs %d, acquired runs %d; want the backend's whole Run once", res, err, b.calls.Load(), b.runs.Load())
	}
}
