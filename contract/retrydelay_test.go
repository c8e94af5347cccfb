package contract

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/e2b"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A rate limit's Retry-After crosses Temporal as the application error's next retry delay, only
// on a failure that may be retried.
func TestToFailureCarriesRetryAfter(t *testing.T) {
	rl := &e2b.RateLimitError{RetryAfter: 7 * time.Second}
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"rate limit before the start", &guard.IntegrationError{Op: "e2b: POST /sandboxes", Err: rl}, 7 * time.Second},
		{"wrapped", fmt.Errorf("sandbox: %w", &guard.IntegrationError{Op: "create", Err: rl}), 7 * time.Second},
		{"rate limit without Retry-After", &guard.IntegrationError{Op: "create", Err: &e2b.RateLimitError{}}, 0},
		{"after the start: never retried", &guard.IntegrationError{Op: "stream", Err: rl, CodeMayHaveStarted: true}, 0},
		{"other failure", &guard.IntegrationError{Op: "create", Err: errors.New("status 502")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RetryDelay(ToFailure(tc.err)); got != tc.want {
				t.Errorf("RetryDelay(ToFailure(%v)) = %s; want %s", tc.err, got, tc.want)
			}
		})
	}
	if got := RetryDelay(errors.New("plain")); got != 0 {
		t.Errorf("RetryDelay of a plain error = %s; want 0", got)
	}
}
