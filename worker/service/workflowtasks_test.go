package service

import (
	"testing"

	"go.temporal.io/sdk/worker"
)

// The workflow worker is made with the sizing the options name (defaults for zero).
func TestWorkflowWorkerOptionsCarryTheSizing(t *testing.T) {
	o := &Options{WorkflowTasks: 64, WorkflowPollers: 6}
	got := o.workflowWorkerOptions(worker.Options{MaxHeartbeatThrottleInterval: 7})
	if got.MaxConcurrentWorkflowTaskExecutionSize != 64 || got.MaxConcurrentWorkflowTaskPollers != 6 || got.MaxHeartbeatThrottleInterval != 7 {
		t.Fatalf("worker options = %+v; want 64 tasks, 6 pollers and the options given kept", got)
	}
	if got := (&Options{}).workflowWorkerOptions(worker.Options{}); got.MaxConcurrentWorkflowTaskExecutionSize != DefaultWorkflowTasks || got.MaxConcurrentWorkflowTaskPollers != DefaultWorkflowPollers {
		t.Fatalf("default worker options = %+v; want the defaults", got)
	}
}
