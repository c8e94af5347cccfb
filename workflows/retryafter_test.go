package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/backends/e2b"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A rate limit before the start carries the server's Retry-After; the workflow waits at least
// that long (bounded by MaxStartBackoff) before the next attempt, and the code runs once.
func TestRetryAfterIsHonouredBeforeStart(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter time.Duration
		maxBackoff time.Duration
		want       []time.Duration
	}{
		{"longer than the backoff", 10 * time.Second, time.Minute, []time.Duration{10 * time.Second, 10 * time.Second}},
		{"shorter than the backoff", time.Second, time.Minute, []time.Duration{2 * time.Second, 4 * time.Second}},
		{"bounded by the maximum backoff", 30 * time.Second, 5 * time.Second, []time.Duration{5 * time.Second, 5 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := okBackend()
			b.FailFirst = 2
			b.FailErr = &guard.IntegrationError{Op: "e2b: POST /sandboxes", Err: &e2b.RateLimitError{RetryAfter: tc.retryAfter}}
			h := newHarness(t, b, activities.Config{StartBackoff: 2 * time.Second, MaxStartBackoff: tc.maxBackoff})
			req := pyRequest()
			dg := h.digest(req)
			h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
			h.run(req)
			if res, err := h.result(); err != nil || !res.OK {
				t.Fatalf("result %+v, %v; want ok after the retries", res, err)
			}
			if calls, runs := b.counts(); calls != 3 || runs != 1 {
				t.Errorf("backend calls %d, runs %d; want 3 and 1", calls, runs)
			}
			if want := append([]time.Duration{approvalTimeout}, tc.want...); fmt.Sprint(h.timers) != fmt.Sprint(want) {
				t.Errorf("timers %v; want %v", h.timers, want)
			}
		})
	}
}
