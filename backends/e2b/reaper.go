package e2b

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// DefaultReapAge is a reaper threshold longer than any run the default policy allows (its
// maximum timeout plus grace) with a wide margin.
const DefaultReapAge = guard.DefaultMaxTimeout + guard.DefaultGrace + 5*time.Minute

// Reap kills every running sandbox that carries MetaManaged and the backend's own Labels and was
// started more than olderThan ago (a session's sandbox: whose session's lifetime is over), and
// returns how many it killed. Sandboxes already gone count
// as killed by someone else. olderThan must exceed the longest run, or the reaper kills live runs
// of other workers. (Each sandbox also has a time to live of its run's timeout plus TTLSlack,
// after which E2B kills it itself: the reaper covers sandboxes whose kill failed.)
func (b *Backend) Reap(ctx context.Context, olderThan time.Duration) (int, error) {
	if olderThan <= 0 {
		return 0, &guard.ConfigError{Msg: fmt.Sprintf("e2b backend: reap threshold must be positive, got %s", olderThan)}
	}
	meta := map[string]string{MetaManaged: "true"}
	for k, v := range b.cfg.Labels {
		meta[k] = v
	}
	list, err := b.api.list(ctx, meta)
	if err != nil {
		return 0, fmt.Errorf("e2b: list sandboxes: %w", err)
	}
	cutoff := time.Now().Add(-olderThan)
	killed := 0
	var errs []error
	for _, s := range list {
		if !carries(s.Metadata, meta) || !orphaned(s, cutoff) {
			continue
		}
		if err := b.api.kill(ctx, s.SandboxID); err != nil {
			errs = append(errs, fmt.Errorf("e2b: kill sandbox %s: %w", s.SandboxID, err))
			continue
		}
		killed++
		b.log.Info("reaped orphaned e2b sandbox", "sandbox_id", s.SandboxID, "started", s.StartedAt,
			"workflow_id", s.Metadata[MetaWorkflowID], "run_id", s.Metadata[MetaRunID], "activity_id", s.Metadata[MetaActivityID])
	}
	return killed, errors.Join(errs...)
}

// orphaned reports whether a managed sandbox may be killed: a session's once its lifetime is
// over (MetaSessionEnd passed; it may live longer than any run), any other (or one whose end
// does not read as a time) once it started before cutoff.
func orphaned(s listedSandbox, cutoff time.Time) bool {
	if end, err := time.Parse(time.RFC3339, s.Metadata[MetaSessionEnd]); err == nil {
		return time.Now().After(end)
	}
	return !s.StartedAt.IsZero() && s.StartedAt.Before(cutoff)
}

// carries reports whether got holds every pair of want (the list filter is the server's; this
// does not trust it).
func carries(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
