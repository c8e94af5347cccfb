package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
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

// namespaceID returns the id of namespace on the server ws talks to (NamespaceInfo.Id: unique per
// server's namespace, shared by every worker of it). The Docker backend labels its containers with
// it, so its reaper asks this server only about containers whose runs this server knows.
func namespaceID(ctx context.Context, ws workflowservice.WorkflowServiceClient, namespace string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		return "", fmt.Errorf("describe namespace %s (for the id the sandbox reaper goes by): %w", namespace, err)
	}
	id := resp.GetNamespaceInfo().GetId()
	if id == "" {
		return "", fmt.Errorf("describe namespace %s: the server gave no namespace id", namespace)
	}
	return id, nil
}

// workflowDescriber is the one Temporal client method sessionEnded calls.
type workflowDescriber interface {
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// A Temporal client is one.
var _ workflowDescriber = tclient.Client(nil)

// sessionEnded is the Docker reaper's question for a session's container (docker.Config's
// SessionEnded hook): whether the run of the session workflow that owns it has closed, in which
// case its container may be removed whatever its age. A run Temporal does not know (deleted by
// retention, or never there) has ended; any other error is returned, and the container is kept.
func sessionEnded(d workflowDescriber) func(ctx context.Context, workflowID, runID string) (bool, error) {
	return func(ctx context.Context, workflowID, runID string) (bool, error) {
		resp, err := d.DescribeWorkflowExecution(ctx, workflowID, runID)
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("session reaper: describe workflow %s run %s: %w", workflowID, runID, err)
		}
		return resp.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
	}
}
