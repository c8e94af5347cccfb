// Package activities holds the activities of the RunCode workflow (package workflows), the
// conversion of sandboxflow's typed errors to and from Temporal application errors, and the event
// sink.
//
// # Activities
//
// New(Config) validates a worker's configuration once, at start-up, and returns Activities;
// Register registers:
//
//   - Check (contract.CheckActivityName, "SandboxCheck"), run by the workflow as a local activity: it
//     applies the worker's policy to the request and returns a contract.CheckResult — the checked request
//     with its effective limits and digest, the approval timeout, and the contract.RunOptions that say how
//     to schedule the sandbox activity (task queue, grace, heartbeat timeout, report margin,
//     start retries). The workflow records it in history, so a later change of policy or
//     configuration never changes how a recorded run replays.
//   - Run (contract.RunActivityName, "SandboxRun"), the sandbox activity: the guard wrapper
//     (guard.Guarded) around the configured backend re-checks the request and its digest, runs
//     it under the backstop of timeout + grace and re-applies every output and file limit to
//     what comes back. Run heartbeats every third of its heartbeat timeout while the code runs,
//     emits sandbox.started and sandbox.finished, and refuses any Temporal retry of itself
//     (attempt > 1), because an earlier attempt may have started the code: retries of failures
//     from before the code could start are the workflow's, with a fresh activity each time.
//
// A worker that only runs workflows sets BackendName instead of Backend (Run is then not
// registered); a worker that only runs sandboxes polls the sandbox task queue
// (Config.SandboxTaskQueue of the workflow workers) with worker.Options.DisableWorkflowWorker.
// worker.Options.MaxConcurrentActivityExecutionSize caps how many sandboxes a worker runs at once.
//
// # Errors
//
// Typed guard errors cross Temporal as application errors made by ApplicationError: the Type is
// guard.TypeToolUsageError, guard.TypeConfigError, guard.TypeIntegrationError or
// guard.TypeApprovalDenied, and the one detail is an contract.ErrorDetails (JSON, readable from any
// language). Only an IntegrationError from before the code could start is marked retryable.
// GuardError turns such an error, as a client or the workflow receives it, back into the typed
// guard error, so errors.As and guard.Retryable work on it.
//
// # Events
//
// Run emits sandbox.started (ids, digest, backend, language, code bytes, input file count and
// bytes, env var count, network, timeout, request metadata) and sandbox.finished (the same ids,
// duration, exit code, ok, timed_out, stream sizes and truncation, file count and bytes,
// limit_killed, or the error type) to the configured Sink. Code, env values, input file
// contents, output and produced file contents are added only when the request set
// capture_content; without it, an IntegrationError's cause text (which comes from an untrusted
// backend) is left out and only its operation kept. SlogSink, the default, writes one log/slog
// record per event; MemorySink keeps them for tests.
package activities
