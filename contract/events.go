package contract

// EventType names a thing that happened to a run, as the workflow's replay-safe logger writes it
// (a record's message and its "event" attribute) and as the sandbox host's sink receives it
// (activities.Event.Type).
type EventType string

// Events of a run.
const (
	// Written by the workflow.
	EventApprovalRequested EventType = "approval.requested"
	EventApprovalGranted   EventType = "approval.granted"
	EventApprovalDenied    EventType = "approval.denied"
	EventApprovalExpired   EventType = "approval.expired"
	EventApprovalRejected  EventType = "approval.rejected"
	EventSandboxRetry      EventType = "sandbox.retry"
	// EventReceiptRefused: the workflow refused a result whose receipt does not verify (issue
	// 31); the run ends with a ReceiptRefused.
	EventReceiptRefused EventType = "receipt.refused"
	// EventRunCancelRequested: the update "cancel" was accepted (who asked, the reason's size,
	// the state the run was in).
	EventRunCancelRequested EventType = "run.cancel_requested"
	// EventApprovalCounted: an approval was accepted and the run waits for more (a quorum);
	// EventApprovalEdited: a reviewer's edit of the code was checked and accepted.
	EventApprovalCounted EventType = "approval.counted"
	EventApprovalEdited  EventType = "approval.edited"
	// EventSandboxRecovered: the run took a late result (SignalLateResult) whose receipt
	// verified, after the server timed out its sandbox activity; the run ends with it.
	EventSandboxRecovered EventType = "sandbox.recovered"

	// Emitted by the sandbox host.
	EventSandboxStarted  EventType = "sandbox.started"
	EventSandboxFinished EventType = "sandbox.finished"
	EventSandboxRefused  EventType = "sandbox.refused"
	// EventPolicyRefused: the policy rules, or a cap of the policy, refused a request at its
	// check; nothing waited and nothing ran.
	EventPolicyRefused EventType = "policy.refused"
	// Emitted by the sandbox host of a session (issue 28): its sandbox opened, and ended
	// (closed, lost or removed), with its lifetime. A session's cells emit sandbox.started,
	// sandbox.finished and sandbox.refused, whose data carry the cell's index ("cell").
	EventSessionOpened EventType = "session.opened"
	EventSessionEnded  EventType = "session.ended"
	// EventSessionAdopted: a worker that started took over the sandbox of a session whose worker
	// died on the same host ("adopted"), or could not ("error"); "pending_cell" names the cell
	// whose result it then delivers late.
	EventSessionAdopted EventType = "session.adopted"
	// EventSandboxLateResult: a sandbox host finished a run whose attempt the server may have
	// lost, and delivered its result to the run as the signal SignalLateResult ("delivered"
	// true) or gave up ("delivered" false, with "error").
	EventSandboxLateResult EventType = "sandbox.late_result"
)
