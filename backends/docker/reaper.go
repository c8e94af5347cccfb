package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Reap removes every container that carries LabelManaged, this backend's LabelDeployment
// (Config.Deployment) and its own Labels and was created more than olderThan ago, running or
// not, and returns how many it removed. Deployments that share a daemon under different names
// therefore never reap each other's containers, and a live worker's runs are younger than
// olderThan. Containers that are already gone count as removed by someone else and are skipped
// without error. olderThan must exceed the longest run (max timeout + grace + container start),
// or the reaper kills live runs of other workers of the same deployment.
func (b *Backend) Reap(ctx context.Context, olderThan time.Duration) (int, error) {
	if olderThan <= 0 {
		return 0, &guard.ConfigError{Msg: fmt.Sprintf("docker backend: reap threshold must be positive, got %s", olderThan)}
	}
	list, err := b.eng.List(ctx, b.ownLabels())
	if err != nil {
		return 0, fmt.Errorf("docker: list sandbox containers: %w", err)
	}
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	var errs []error
	for _, c := range list {
		if !c.Created.Before(cutoff) {
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
