// Package workflows holds the RunCode workflow (and the Session workflow, below): it checks a request against the worker's policy,
// waits for a person to approve that exact request, and runs it at most once in one sandbox
// activity. Everything it decides is recorded in workflow history.
//
// # Contract
//
// A client starts contract.WorkflowName ("RunCode") with one contract.Input and gets one guard.Result back, or an
// error. It talks to a run with:
//
//   - the query contract.QueryStatus ("status"), which returns a contract.Status: the state, the request as a
//     reviewer reads it (guard.Summary: code, language, file names and sizes, env names, limits,
//     network, backend, digest), the approval deadline, the accepted decision, and how many
//     decisions were rejected or ignored;
//   - the signal contract.SignalApproval ("approval") or the update contract.UpdateDecide ("decide"), each
//     carrying a contract.Decision. The update returns a contract.DecideResult for an accepted decision; its
//     validator refuses a bad one at once with an application error of type
//     contract.DecisionRejectedType whose message says why and whose details carry the typed
//     reason (contract.RejectionOf reads it back).
//
// Sandbox hosts signal contract.SignalSandboxClaim ("sandbox-claim") to a run before its code
// starts; the workflow drops those signals, which are for the hosts to read in the history.
//
// A contract.Decision's JSON form is fixed, so that any Temporal client can send it:
//
//	{"approval_id": "<uuid>", "digest": "sha256:<hex>", "approve": true, "reason": "",
//	 "expires": "2026-01-02T15:04:05Z", "signature": "-----BEGIN SSH SIGNATURE-----\n..."}
//
// The signature is an SSHSIG (namespace sandboxflow-approval) over the run's statement (package
// approval): workflow id, run id, digest, approve or deny, approval id, sandbox task queue and
// expiry. The status carries the workflow id, run id and sandbox task queue to sign.
//
// The run's error, when there is one, is a Temporal application error whose Type is one of
// guard.TypeToolUsageError, guard.TypeConfigError, guard.TypeIntegrationError,
// guard.TypeApprovalDenied or guard.TypeApprovalRefused, with contract.ErrorDetails as its details;
// contract.FromFailure turns it back into the typed guard error. A run cancelled by the update
// contract.UpdateCancel before its code could start ends with guard.TypeCancelled (who asked, and
// why); one cancelled while it waits through Temporal's own cancellation ends with Temporal's
// cancellation.
//
// # Cancel
//
// The update contract.UpdateCancel (a contract.CancelRequest: who asks, why) is accepted while
// the run is checked, waits or runs, once; it is recorded in contract.Status.Cancel and cancels
// the run's own context. A cancel accepted before or together with a decision wins: the decision
// is never used and the run ends with guard.Cancelled, nothing run. Once the sandbox activity is
// scheduled it is cancelled (WaitForCancellation): one no host has started ends the run with
// guard.Cancelled; a host running the code stops it and answers with the output so far (Outcome
// cancelled), to which the workflow adds Result.Cancelled. The update never touches a decision,
// so a cancel cannot make code run. Its handler records the version marker "cancel-v1".
//
// # Steps
//
//  1. Check. The local activity contract.CheckActivityName applies the worker's policy and
//     records the checked request, its digest, the approval timeout and how to schedule the run
//     (so that a later change of the worker's configuration never changes a replay). A failed
//     check ends the run with ToolUsageError or ConfigError before anything waits or runs, and
//     SandboxStatus is "error".
//  2. Announce. SandboxStatus=awaiting_approval, SandboxDigest, SandboxLanguage and
//     SandboxBackend are set (contract.SearchAttributeNames lists them; all are Keyword), and the event
//     approval.requested is logged.
//  3. Wait. The first valid decision ends the wait. A decision is valid when the run is waiting
//     and none was accepted yet, approval_id is a UUID (36 characters, not the nil UUID),
//     reviewer, if set, is at most contract.MaxReviewerBytes without control characters, reason
//     is at most contract.MaxReasonBytes, digest equals the request's digest (an approval must
//     carry it; a denial may leave it empty) (all of which contract.Decision.Problem checks), and the signature verifies (approval.Verify) by a key of the
//     reviewers the check recorded, over this run's statement: its workflow id and its current
//     run id (so a reset run or another run never accepts it), the recorded digest and the
//     sandbox task queue, before the expiry by workflow time. The reviewer recorded is the
//     key's principal; a reviewer name the key may not sign for is refused. The update handler
//     verifies again (a reset run replays an accepted update without its validator), and a
//     refused update is logged as approval.rejected with its reason. A decision signalled
//     before the check finished (SignalWithStart) waits in the channel and is verified like
//     any other. A signalled decision that is not valid is rejected: counted in
//     contract.Status.RejectedDecisions, logged as approval.rejected, and otherwise ignored — it consumes
//     nothing and ends nothing. Every decision after the accepted one is ignored (counted in
//     contract.Status.IgnoredDecisions) and never causes a second run; an update is refused instead.
//     A payload that does not decode as a contract.Decision is dropped by the SDK and logged by it.
//     A denial ends the run with ApprovalDenied (reason "denied", the reviewer, the reason
//     text); no decision before the approval timeout ends it with ApprovalDenied (reason
//     "expired"); a cancel ends it cancelled (see Cancel). In each case nothing runs. SandboxReviewer
//     names the reviewer of the accepted decision. There is no auto-approve of any kind.
//  4. Run. The sandbox activity contract.RunActivityName is scheduled on the sandbox task
//     queue (contract.Input.SandboxTaskQueue, else the checking worker's configured queue, else the
//     workflow's own) with StartToCloseTimeout = effective timeout + grace + report margin (the
//     margin lets the guard's backstop at timeout + grace report a timed-out run before Temporal
//     times the activity out), a heartbeat timeout, a ScheduleToStart timeout (no sandbox
//     worker took it in time: the run ends with an IntegrationError saying the approval was not
//     used, never retried), and RetryPolicy.MaximumAttempts = 1:
//     Temporal never retries it. The workflow retries only a failure for which guard.Retryable
//     is true (an IntegrationError from before the code could start), with exponential backoff
//     (workflow timers, recorded in history) and a bounded number of attempts. Any other
//     failure ends the run: a typed ToolUsageError, ConfigError or ApprovalRefused as it is,
//     and a lost worker (heartbeat or start-to-close timeout), a failure after the code may
//     have started, or any failure the workflow cannot classify as IntegrationError "outcome
//     unknown; the approval was used". The code therefore runs at most once per approval.
//     The sandbox activity verifies the signed decision itself before anything starts, against
//     its own reviewers file, its own activity info (workflow id, run id, task queue) and the
//     digest it recomputes: whatever scheduled it, nothing runs without a reviewer's signature.
//  5. Result. The guard.Result carries the approval id, reviewer, digest and backend, set by the
//     sandbox host that verified the approval, and the host's signed receipt. When the check
//     recorded sandbox hosts' keys (a hosts file), the workflow (version marker "receipt-v1")
//     verifies the receipt against them, that it is this run's, and that the result is what it
//     signs (package receipt, pure Go); anything else ends the run with a ReceiptRefused and the
//     event receipt.refused: a namespace writer who completes the sandbox activity by id gets no
//     output accepted.
//     SandboxStatus ends at succeeded, failed (non-zero exit or a resource-limit kill),
//     timed_out, denied, expired, cancelled or error. A timeout is a result, not an error; so is
//     a cancel while the code ran (Outcome cancelled, the output printed before).
//
// # Events
//
// The workflow logs approval.requested, approval.granted, approval.denied, approval.expired,
// approval.rejected, sandbox.retry and receipt.refused (contract.EventType) with its replay-safe logger
// (workflow.GetLogger): the message and the attribute "event" are the event type, and the
// attributes carry sizes, counts, ids and the digest; approval.rejected carries its typed reason
// as "rejection" (a contract.RejectReason). Code and env values appear only when the request set capture_content. Give the worker
// a log/slog logger (go.temporal.io/sdk/log.NewStructuredLogger) to have them as slog records.
// The sandbox activity emits sandbox.started and sandbox.finished, or sandbox.refused, to its
// activities.Sink.
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
// Sandbox hosts re-check every request against their own policy before running it, so their
// policy must allow what the workflow workers' policy allows; give both the same policy. The
// StartToCloseTimeout uses the grace of the worker that checked the request, and the sandbox
// host's backstop uses its own.
//
// The search attributes must exist on the namespace (Keyword: contract.SearchAttributeNames) before a
// run starts.
//
// # Sessions
//
// Session (contract.SessionWorkflowName, issue 28) keeps one sandbox on one sandbox host for one
// task. It checks the settings (SessionCheck), opens the sandbox (SessionOpen, on the sandbox task
// queue, which answers with the host's own task queue), holds it there (SessionHold) and serves
// the updates submit-cell, decide-cell, await-cell and close-session and the query
// session-status. Each cell waits for its own decision, signed over guard.CellDigest (the
// settings digest, the index, the code digest and the chain over every earlier cell that ran)
// for this workflow id, run id and host queue, and runs at most once (SessionCell, on the host
// queue, verified again there against the host's own record of the sandbox). A denied or expired
// cell leaves the session open; a lost sandbox or host fails it with a guard.SandboxLost, and no
// cell runs elsewhere. The session ends on close, idle timeout, lifetime or cell cap, and then
// cancels the hold, which removes the sandbox.
//
// # Determinism
//
// The workflow reads no clock but workflow.Now, makes no ids, starts no goroutines (it uses
// workflow.Go), iterates no maps and does no I/O. The policy and every worker setting reach it
// only through the recorded result of the Check local activity.
package workflows
