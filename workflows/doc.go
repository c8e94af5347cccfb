// Package workflows holds the RunCode workflow, which checks a request against the worker's
// policy, waits for the signed approval of that exact request by as many reviewers as its quorum
// asks, and runs it at most once in one sandbox activity, and the Session workflow, which keeps
// one sandbox on one sandbox host for a task whose cells are each approved and run once.
// Everything they decide is recorded in workflow history.
//
// The protocol (the contract's names, each step, cancel, events, receipts, and what the models in
// package model prove about it) is written once, in docs/protocol.md; sessions in
// docs/sessions.md.
//
// # Registration
//
// One task queue (workflow and sandboxes on the same workers):
//
//	acts, err := activities.New(activities.Config{Policy: policy, Backend: backend, ReviewersFile: "allowed_signers"})
//	w := worker.New(c, "sandboxflow", worker.Options{MaxConcurrentActivityExecutionSize: 4})
//	workflows.Register(w)
//	acts.Register(w)
//
// Two task queues (sandbox hosts scale apart from workflow workers):
//
//	// workflow workers: no backend here, only its name and the sandbox queue
//	acts, err := activities.New(activities.Config{Policy: policy, BackendName: "docker", SandboxTaskQueue: "sandboxflow-sandbox", ReviewersFile: "allowed_signers"})
//	w := worker.New(c, "sandboxflow", worker.Options{})
//	workflows.Register(w)
//	acts.Register(w) // registers the Check local activity
//
//	// sandbox hosts
//	acts, err := activities.New(activities.Config{Policy: policy, Backend: dockerBackend, ReviewersFile: "allowed_signers"})
//	w := worker.New(c, "sandboxflow-sandbox", worker.Options{DisableWorkflowWorker: true, MaxConcurrentActivityExecutionSize: 4})
//	acts.Register(w)
//
// The search attributes (contract.SearchAttributeNames, all Keyword) must exist on the namespace
// before a run starts.
//
// # Determinism
//
// The workflows read no clock but workflow.Now, make no ids, start no goroutines (they use
// workflow.Go), iterate no maps and do no I/O. The policy and every worker setting reach them
// only through the recorded result of the check local activity. Behaviour added after runs were
// recorded sits behind version markers (receipt-v1, cancel-v1, ...), or behind a field of the
// check's record that older histories lack (the policy rules' groups and the SandboxAgent
// attribute: a check without rules decides as before), so that recorded histories (testdata/)
// keep replaying.
package workflows
