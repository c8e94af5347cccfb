package service

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/guard"
)

// noReviewersError is the refusal of a worker started without a reviewers file (and not --dev).
func noReviewersError() error {
	return &guard.ConfigError{Msg: "no reviewers file: start the worker with --reviewers FILE (or SANDBOXFLOW_REVIEWERS), " +
		"an OpenSSH allowed_signers file listing the keys whose signed decisions may run code, one `principal keytype base64` a line " +
		"(worker --dev makes a development key when none is given)"}
}

// checkReviewers is doctor's reviewers line: the file the worker would verify decisions against
// is given (or --dev will make one), readable, and parses with at least one key.
func checkReviewers(cfg *Options) (string, error) {
	if cfg.Reviewers == "" {
		if cfg.Dev {
			return "none given: --dev makes a development reviewer key under --data-dir at start", nil
		}
		return "", noReviewersError()
	}
	r, err := approval.LoadReviewers(cfg.Reviewers)
	if err != nil {
		return "", fmt.Errorf("--reviewers %s: %v (the worker would refuse to start)", cfg.Reviewers, err)
	}
	return fmt.Sprintf("%d keys in %s", r.Len(), cfg.Reviewers), nil
}

// taskQueueDescriber is what checkPollers calls of the Temporal client.
type taskQueueDescriber interface {
	DescribeTaskQueue(ctx context.Context, taskQueue string, taskQueueType enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error)
}

// polledQueue is a task queue a deployment of this worker needs polled, with the kind of task.
type polledQueue struct {
	name string
	kind enumspb.TaskQueueType
	role string // the worker role that polls it, for the message
}

// queuesToPoll are the task queues a run of this worker's configuration goes through: the
// workflow queue's workflow tasks, and the sandbox queue's activity tasks.
func queuesToPoll(cfg *Options) []polledQueue {
	sandboxQueue := cfg.SandboxTaskQueue
	if sandboxQueue == "" {
		sandboxQueue = cfg.TaskQueue
	}
	return []polledQueue{
		{cfg.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW, RoleWorkflows},
		{sandboxQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY, RoleSandboxes},
	}
}

// checkPollers is doctor's pollers lines: a worker polls each queue of queuesToPoll now, so a
// run started on it would be picked up. One line a queue, failing with the queue's name.
func checkPollers(ctx context.Context, tc taskQueueDescriber, cfg *Options) []check {
	var out []check
	for _, q := range queuesToPoll(cfg) {
		kind := strings.ToLower(strings.TrimPrefix(q.kind.String(), "TASK_QUEUE_TYPE_"))
		name := fmt.Sprintf("pollers %s (%s tasks)", q.name, kind)
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := tc.DescribeTaskQueue(dctx, q.name, q.kind)
		cancel()
		switch n := len(resp.GetPollers()); {
		case err != nil:
			out = append(out, check{name, false, fmt.Sprintf("describe task queue %s: %v", q.name, err)})
		case n == 0:
			out = append(out, check{name, false, fmt.Sprintf("no worker polls task queue %s for %s tasks: runs on it would wait; start a worker with --role %s or all on it (a worker counts once it has polled within the last minutes; run doctor again after starting one)", q.name, kind, q.role)})
		default:
			ids := make([]string, 0, n)
			for _, p := range resp.GetPollers() {
				ids = append(ids, p.GetIdentity())
			}
			out = append(out, check{name, true, fmt.Sprintf("%d polling: %s", n, strings.Join(ids, ", "))})
		}
	}
	return out
}
