package service

import (
	"fmt"

	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Defaults of the workflow worker's sizing (Options.WorkflowCache, WorkflowTasks,
// WorkflowPollers), documented in docs/operating.md, "Many waiting runs".
const (
	// DefaultWorkflowCache keeps 10,000 runs in memory between their tasks (the SDK's own
	// default): a run waiting for a person stays cached, so its status query is answered from
	// memory instead of replaying its history first.
	DefaultWorkflowCache = 10000
	// DefaultWorkflowTasks is how many workflow tasks run at once (the SDK's default).
	DefaultWorkflowTasks = 1000
	// DefaultWorkflowPollers is how many long polls fetch workflow tasks (the SDK's default is
	// 2, shared between the task queue and this worker's sticky queue): a burst of starts from
	// many clients is fetched four at a time.
	DefaultWorkflowPollers = 4
)

// WorkflowSizing is the workflow worker's sizing with the defaults filled in: zero means the
// default; a negative value is refused by Validate.
func (o *Options) WorkflowSizing() (cache, tasks, pollers int) {
	cache, tasks, pollers = o.WorkflowCache, o.WorkflowTasks, o.WorkflowPollers
	if cache == 0 {
		cache = DefaultWorkflowCache
	}
	if tasks == 0 {
		tasks = DefaultWorkflowTasks
	}
	if pollers == 0 {
		pollers = DefaultWorkflowPollers
	}
	return cache, tasks, pollers
}

func (o *Options) validateWorkflowSizing() error {
	for name, v := range map[string]int{"--workflow-cache": o.WorkflowCache, "--workflow-tasks": o.WorkflowTasks, "--workflow-pollers": o.WorkflowPollers} {
		if v < 0 {
			return &guard.ConfigError{Msg: fmt.Sprintf("%s must be at least 1, got %d", name, v)}
		}
	}
	if _, tasks, pollers := o.WorkflowSizing(); tasks < 2 || pollers > tasks {
		// The SDK needs two task slots (one for the sticky queue) and no more pollers than slots.
		return &guard.ConfigError{Msg: fmt.Sprintf("--workflow-tasks %d / --workflow-pollers %d: want at least 2 tasks and no more pollers than tasks", tasks, pollers)}
	}
	return nil
}

// workflowWorkerOptions sizes the workflow worker's options and the process's workflow cache
// (worker.SetStickyWorkflowCacheSize, read when the first worker is made).
func (o *Options) workflowWorkerOptions(opts worker.Options) worker.Options {
	cache, tasks, pollers := o.WorkflowSizing()
	worker.SetStickyWorkflowCacheSize(cache)
	opts.MaxConcurrentWorkflowTaskExecutionSize = tasks
	opts.MaxConcurrentWorkflowTaskPollers = pollers
	return opts
}
