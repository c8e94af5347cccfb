package workflows_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// A worker that runs both the workflow and the sandboxes on one task queue.
func ExampleRegister() {
	c, err := client.Dial(client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	backend, err := local.New(local.Config{AllowUnsafeLocal: true})
	if err != nil {
		log.Fatal(err)
	}
	acts, err := activities.New(activities.Config{Policy: guard.Policy{}, Backend: backend, ReviewersFile: "/etc/sandboxflow/allowed_signers"})
	if err != nil {
		log.Fatal(err)
	}
	w := worker.New(c, "sandboxflow", worker.Options{MaxConcurrentActivityExecutionSize: 4})
	workflows.Register(w)
	acts.Register(w)
	log.Fatal(w.Run(worker.InterruptCh()))
}

// Workflow workers and sandbox hosts on separate task queues.
func ExampleRegister_twoQueues() {
	c, err := client.Dial(client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	policy := guard.Policy{}

	// On workflow workers: the policy and the name of the sandbox hosts' backend.
	checks, err := activities.New(activities.Config{Policy: policy, BackendName: local.Name, SandboxTaskQueue: "sandboxflow-sandbox",
		ReviewersFile: "/etc/sandboxflow/allowed_signers"})
	if err != nil {
		log.Fatal(err)
	}
	ww := worker.New(c, "sandboxflow", worker.Options{})
	workflows.Register(ww)
	checks.Register(ww)

	// On sandbox hosts: the same policy, the backend itself, and their own reviewers file: they
	// verify every approval again before anything runs.
	backend, err := local.New(local.Config{AllowUnsafeLocal: true})
	if err != nil {
		log.Fatal(err)
	}
	runs, err := activities.New(activities.Config{Policy: policy, Backend: backend, ReviewersFile: "/etc/sandboxflow/allowed_signers"})
	if err != nil {
		log.Fatal(err)
	}
	sw := worker.New(c, "sandboxflow-sandbox", worker.Options{DisableWorkflowWorker: true, MaxConcurrentActivityExecutionSize: 4})
	runs.Register(sw)

	if err := sw.Start(); err != nil {
		log.Fatal(err)
	}
	log.Fatal(ww.Run(worker.InterruptCh()))
}

// An orchestrator starts a run; a reviewer reads it and approves it with the update (or the
// signal), and the orchestrator waits for the result.
func ExampleDecision() {
	ctx := context.Background()
	c, err := client.Dial(client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "run-" + uuid.NewString(), TaskQueue: "sandboxflow"},
		contract.WorkflowName, contract.Input{Request: guard.Request{Code: "print(6 * 7)"}})
	if err != nil {
		log.Fatal(err)
	}

	// The reviewer reads the request and its digest.
	v, err := c.QueryWorkflow(ctx, run.GetID(), "", contract.QueryStatus)
	if err != nil {
		log.Fatal(err)
	}
	var st contract.Status
	if err := v.Get(&st); err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.State, st.Request.Code)

	// ... and signs an approval of exactly this run, digest and sandbox task queue as alice, with
	// a key listed for alice in the workers' reviewers file (the statement version the status
	// names; 2 signs the reviewer's principal).
	f := approval.Fields{
		Version:    st.StatementVersion,
		WorkflowID: st.WorkflowID, RunID: st.RunID, Digest: st.Request.Digest, Approve: true,
		ApprovalID: uuid.NewString(), SandboxTaskQueue: st.SandboxTaskQueue, Reviewer: "alice", Expires: time.Now().Add(time.Hour),
	}
	stmt, err := f.Statement()
	if err != nil {
		log.Fatal(err)
	}
	key, err := approval.LoadSigner("/home/alice/.ssh/id_ed25519", nil)
	if err != nil {
		log.Fatal(err)
	}
	sig, err := approval.Sign(key, stmt)
	if err != nil {
		log.Fatal(err)
	}
	d := contract.Decision{ApprovalID: f.ApprovalID, Digest: f.Digest, Approve: true, Reviewer: "alice", Expires: f.Expires, Signature: sig}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), UpdateName: contract.UpdateDecide, Args: []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		log.Fatal(err)
	}
	var decided contract.DecideResult
	if err := h.Get(ctx, &decided); err != nil {
		log.Fatal(err) // a refused decision says why, e.g. "approval: refused (unknown_key): ..."
	}
	// Or, with any Temporal client: signal "approval" with the same JSON object.
	// err = c.SignalWorkflow(ctx, run.GetID(), "", contract.SignalApproval, d)

	var res guard.Result
	if err := run.Get(ctx, &res); err != nil {
		// The typed error: ToolUsageError, ConfigError, IntegrationError or ApprovalDenied.
		log.Fatal(contract.FromFailure(err))
	}
	fmt.Printf("exit %d: %s", res.ExitCode, res.Stdout)
}
