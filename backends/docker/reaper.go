package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Reap removes every container that carries LabelManaged, this backend's LabelDeployment
// (Config.Deployment) and its own Labels and was created more than olderThan ago, running or
// not, and returns how many it removed. Deployments that share a daemon under different names
// therefore never reap each other's containers, and a live worker's runs are younger than
// olderThan. Containers that are already gone count as removed by someone else and are skipped
// without error. olderThan must exceed the longest run (max timeout + grace + container start),
// or the reaper kills live runs of other workers of the same deployment; with a warm pool it must
// also exceed WarmMaxAge, since a run's container may have waited that long before the run.
//
// A container that still waits in a warm pool (with LabelWarm, named WarmNamePrefix...) is removed
// once older than WarmMaxAge + 30 s whatever olderThan says: a live pool replaces its containers
// before that, so such a one belongs to a worker that is gone. Reap also replaces this backend's
// own waiting containers that are past WarmMaxAge.
//
// A session's container (LabelSession) lives as long as its session, up to the policy's session
// lifetime, so age alone never takes a live one (one that has exited is removed at once: no cell
// can run in it again). Its supervisor does not exit when its worker dies (its stdin stays open
// for AdoptSession), so the reaper never waits for that: with Config.SessionEnded it is removed once that
// hook says its workflow run has ended (whatever its age), and kept while it says not; without
// the hook only once older than Config.MaxSessionLifetime plus olderThan. A run's container
// (labelled with its run) is removed, whatever its age, once that hook says its workflow run has
// ended, and kept while the hook says it is open: an old one may hold the report of a run that
// waits for its late result (Adopt).
//
// The hook asks this worker's Temporal server, which knows only its own runs and sessions, so it
// is asked only about containers of this backend's Config.NamespaceID: a container whose
// LabelNamespaceID differs (a worker of the same deployment name on another server, or any id
// when this backend has none) is taken by age alone, as without the hook, so a live session or
// run of the other server is kept while a lost one still goes in the end. A container without
// the label (made before it existed) is treated as this backend's own, as before.
func (b *Backend) Reap(ctx context.Context, olderThan time.Duration) (int, error) {
	if olderThan <= 0 {
		return 0, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: reap threshold must be positive, got %s", olderThan)}
	}
	if b.pool != nil {
		b.pool.evictOld()
		b.pool.signal()
	}
	list, err := b.eng.List(ctx, b.ownLabels())
	if err != nil {
		return 0, fmt.Errorf("docker: list sandbox containers: %w", err)
	}
	now := time.Now()
	removed := 0
	var errs []error
	for _, c := range list {
		sessionEnded := b.cfg.SessionEnded
		if id, ok := c.Labels[LabelNamespaceID]; ok && id != b.cfg.NamespaceID {
			sessionEnded = nil // another server's: this one cannot tell whether its run has ended
		}
		age := olderThan
		if c.Labels[LabelWarm] != "" && strings.HasPrefix(c.Name, WarmNamePrefix) {
			age = min(age, b.cfg.WarmMaxAge+warmReapSlack)
		}
		if wf := c.Labels[LabelSession]; wf != "" {
			switch {
			case c.State == "exited" || c.State == "dead":
				// Its supervisor is gone (a dockerd restart, the code killed it): no cell can
				// run in it again, and its session reports the sandbox lost. Nothing waits for it.
			case sessionEnded != nil:
				ended, err := sessionEnded(ctx, wf, c.Labels[LabelRunID])
				if err != nil {
					errs = append(errs, fmt.Errorf("docker: has session %s (run %s) of container %s ended: %w", wf, c.Labels[LabelRunID], c.ID, err))
					continue
				}
				if !ended {
					continue
				}
			case !c.Created.Before(now.Add(-(b.cfg.MaxSessionLifetime + olderThan))):
				continue
			}
		} else if young := !c.Created.Before(now.Add(-age)); sessionEnded != nil && c.Labels[LabelWorkflowID] != "" && c.Labels[LabelRunID] != "" {
			// A run's container: young for the threshold, which must outlast the longest run,
			// but its run may have ended (its worker lost): then nothing waits for it. Old, it
			// may hold the report of a run still waiting for its late result (its worker died:
			// a worker started again adopts it): kept while its run is open.
			ended, err := sessionEnded(ctx, c.Labels[LabelWorkflowID], c.Labels[LabelRunID])
			if err != nil {
				errs = append(errs, fmt.Errorf("docker: has run %s (workflow %s) of container %s ended: %w", c.Labels[LabelRunID], c.Labels[LabelWorkflowID], c.ID, err))
				continue
			}
			if !ended {
				continue
			}
		} else if young {
			continue
		}
		err := b.eng.Remove(ctx, c.ID)
		switch {
		case err == nil:
			removed++
			b.log.Info("reaped orphaned sandbox container", "container", c.ID, "created", c.Created,
				"workflow_id", c.Labels[LabelWorkflowID], "run_id", c.Labels[LabelRunID], "activity_id", c.Labels[LabelActivityID])
		case isNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("docker: remove container %s: %w", c.ID, err))
		}
	}
	return removed, errors.Join(errs...)
}

// ownLabels are the labels that mark this backend's containers.
func (b *Backend) ownLabels() map[string]string {
	labels := map[string]string{LabelManaged: "true", LabelDeployment: b.cfg.Deployment}
	for k, v := range b.cfg.Labels {
		labels[k] = v
	}
	return labels
}
