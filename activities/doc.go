// Package activities holds the activities of the RunCode workflow (package workflows) and the
// event sink. Their names, inputs and outputs are part of the contract (package contract).
//
// # Activities
//
// New(Config) validates a worker's configuration once, at start-up, and returns Activities;
// Register registers:
//
//   - SandboxCheck (contract.CheckActivityName), run by the workflow as a local activity: it
//     applies the worker's policy to the request and returns a contract.CheckResult — the checked request
//     with its effective limits and digest, the approval timeout, and the contract.RunOptions that say how
//     to schedule the sandbox activity (task queue, grace, heartbeat timeout, report margin,
//     start retries). The workflow records it in history, so a later change of policy or
//     configuration never changes how a recorded run replays.
//   - SandboxRun (contract.RunActivityName), the sandbox activity: the guard wrapper
//     (guard.Guarded) around the configured backend re-checks the request and its digest, runs
//     it under the backstop of timeout + grace and re-applies every output and file limit to
//     what comes back. SandboxRun heartbeats every third of its heartbeat timeout while the code runs,
//     and within LiveInterval of new output, with the newest output as the details (live.go),
//     emits sandbox.started and sandbox.finished, and refuses any Temporal retry of itself
//     (attempt > 1), because an earlier attempt may have started the code: retries of failures
//     from before the code could start are the workflow's, with a fresh activity each time.
//     Before anything starts it verifies the signed decision against the worker's own reviewers
//     file, claims the approval in the run's history and checks there that it is unused
//     (once.go): every sandbox activity scheduled before it failed before its code could start,
//     and every claim before its own was released by the host that made it, so that a namespace
//     writer answering the run's workflow tasks, or failing a running activity by id, cannot run
//     it twice on any host. Each refusal is a guard.ApprovalRefused with its reason, emitted as
//     sandbox.refused; nothing ran.
//     Package model checks this protocol with spin; docs/protocol.md maps each step of the
//     model to the function here that implements it.
//
// Later additions, each written up in docs/ rather than here:
//
//   - Quorums and edits (quorum.go): the host verifies every approval over the request it
//     received, counts distinct reviewers against its own Policy.QuorumFor, and checks an
//     edit's record against the run's start (docs/reviewing.md).
//   - Receipts (receipt.go): with Config's host key, every run and cell ends with a receipt the
//     host signs over what ran (docs/receipts-and-audit.md).
//   - Live output and cancel (live.go): the heartbeats carry the newest output, and a cancel
//     comes back in their answer; the backend stops the code and the result keeps the output
//     printed before (docs/orchestrators.md, docs/protocol.md "Stop a run").
//   - Sessions (session.go): SessionCheck and SessionCellCheck, local activities like
//     SandboxCheck; SessionOpen on the sandbox task queue, which opens the sandbox and answers
//     with the host's own task queue; SessionHold and SessionCell, registered by RegisterHost
//     on that queue only, which keep the sandbox and admit, claim and run each cell
//     (docs/sessions.md). A cell is admitted through the same steps as a run (admit.go:
//     precheck, verify, claim), with the host's record of the sandbox as its subject.
//   - Late results (late.go): when the server may have lost a run's attempt, its code runs on
//     to its own limits and the signed result goes to the run as the signal late-result
//     (docs/operating.md "Late results: the host").
//
// The methods are named as registered, so the workflow calls them as typed method values
// (workflow.ExecuteActivity(ctx, acts.SandboxRun, in)) and the compiler checks their types.
//
// A worker that only runs workflows sets BackendName instead of Backend (SandboxRun is then not
// registered); a worker that only runs sandboxes polls the sandbox task queue
// (Config.SandboxTaskQueue of the workflow workers) with worker.Options.DisableWorkflowWorker.
// worker.Options.MaxConcurrentActivityExecutionSize caps how many sandboxes a worker runs at once.
//
// # Errors
//
// Both activities return typed guard errors converted by contract.ToFailure, so that any client
// can tell them apart; only an IntegrationError from before the code could start is retryable.
//
// # Events
//
// SandboxRun emits sandbox.started (ids, digest, backend, language, code bytes, input file count and
// bytes, env var count, network, timeout, request metadata) and sandbox.finished (the same ids,
// duration, exit code, ok, timed_out, stream sizes and truncation, file count and bytes,
// outcome, limit_killed, or the error type) to the configured Sink. Code, env values, input file
// contents, output and produced file contents are added only when the request set
// capture_content; without it, an IntegrationError's cause text (which comes from an untrusted
// backend) is left out and only its operation kept. SlogSink, the default, writes one log/slog
// record per event; MemorySink keeps them for tests.
package activities
