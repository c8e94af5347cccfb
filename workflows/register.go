package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
)

// Register registers RunCode as contract.WorkflowName and Session as
// contract.SessionWorkflowName on a worker. The worker must also register
// the activities (activities.Activities.Register), whose SandboxCheck runs as a local activity of
// the workflow.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(RunCode, workflow.RegisterOptions{Name: contract.WorkflowName})
	r.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: contract.SessionWorkflowName})
}
