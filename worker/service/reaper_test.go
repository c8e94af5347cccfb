package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

type countingReaper struct{ calls atomic.Int32 }

func (r *countingReaper) Reap(context.Context, time.Duration) (int, error) {
	r.calls.Add(1)
	return 0, errors.New("daemon down")
}

func TestReapEveryRunsAtOnceRetriesAndStops(t *testing.T) {
	r := &countingReaper{}
	ctx, cancel := context.WithCancel(context.Background())
	done := reapEvery(ctx, r, 20*time.Millisecond, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	deadline := time.Now().Add(5 * time.Second)
	for r.calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := r.calls.Load(); got < 2 {
		t.Errorf("reaps: got %d; want one at once and more on the interval, a failure notwithstanding", got)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reaper did not stop after its context ended")
	}
}
