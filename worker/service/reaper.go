package service

import (
	"context"
	"log/slog"
	"time"
)

// reaper removes a backend's orphaned sandboxes older than a threshold.
type reaper interface {
	Reap(ctx context.Context, olderThan time.Duration) (removed int, err error)
}

// reapEvery reaps at once and then every interval, until ctx ends; the returned channel is closed
// when it has stopped. Errors are logged, not returned: the next round retries. An interval that
// is not positive means one minute.
func reapEvery(ctx context.Context, r reaper, interval, olderThan time.Duration, logger *slog.Logger) <-chan struct{} {
	if interval <= 0 {
		interval = time.Minute
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			n, err := r.Reap(ctx, olderThan)
			if err != nil && ctx.Err() == nil {
				logger.Warn("sandbox reaper failed", "error", err, "removed", n)
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return done
}
