package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// lostRetryChange marks the runs that run the approved code in a fresh sandbox activity after
// the server timed one out whose code never started: no claim on the run's approval is held,
// because none was made or each was released (by its host, or by the worker that adopted a dead
// host's spool: activities' adopt.go). Hosts read the history the same way, per activity
// (activities' runRecord.notStarted): a claim made before its activity's timeout and never
// released may have started code; one that came after never did. The workflow asks less (no
// claim of the run held at all), so it never schedules an activity a host would refuse for a
// claim it saw. It is asked only on that path, so histories without it replay unchanged.
const lostRetryChange = "lost-attempt-retry-v1"

// retryLost says what the run does after the lost attempt when no claim on the approval is held
// (its code never started) and no cancel was accepted: retry in a fresh activity while it has
// attempts left (contract.RunOptions.StartAttempts over the whole run), else end with unused,
// an IntegrationError whose code did not start. Both are false otherwise, and for histories
// from before lostRetryChange, whose marker is asked last.
func (r *runCode) retryLost(ctx workflow.Context, opts contract.RunOptions, lost lostAttempt) (retry bool, unused error) {
	if r.cancel != nil || r.heldClaim() {
		return false, nil
	}
	if workflow.GetVersion(ctx, lostRetryChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false, nil
	}
	if r.status.RunAttempts >= max(opts.StartAttempts, 1) {
		return false, &guard.IntegrationError{Op: "run sandbox",
			Err: fmt.Errorf("the server timed out sandbox activity %s (%s) before its code started, after %d attempts: no claim on the approval is held: the approval is unused",
				lost.activityID, lost.timeout, r.status.RunAttempts)}
	}
	r.event(ctx, contract.EventSandboxRetry, "activity_id", lost.activityID, "timeout", lost.timeout,
		"why", "the server timed out a sandbox activity whose code never started (no claim on the approval is held)")
	return true, nil
}
