package contract

import (
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// Sessions (issue 28). A Session workflow keeps one sandbox, on one sandbox host, for one task:
// the orchestrator submits cells one at a time; each cell waits for its own signed decision and
// runs at most once in that sandbox, where state survives between cells. What a reviewer signs
// for cell N (the statement's digest field) is guard.CellDigest: the session's settings digest,
// the cell's index and code digest, and the chain over every earlier cell that ran (its cell
// digest and the digest of its result, guard.ChainNext). The statement's workflow_id and run_id
// are the session's, its sandbox_task_queue the task queue of the host that holds the sandbox.
const (
	// SessionWorkflowName is the workflow type.
	SessionWorkflowName = "Session"
	// UpdateSubmitCell submits a cell (a CellRequest) and returns a CellSubmitted. Its validator
	// refuses a cell while another waits or runs, after the session ended or at its cell cap.
	UpdateSubmitCell = "submit-cell"
	// UpdateDecideCell carries a reviewer's decision for one cell (a CellDecision) and returns a
	// DecideResult; its validator refuses a bad one with a DecisionRejected error.
	UpdateDecideCell = "decide-cell"
	// UpdateAwaitCell waits until a cell (AwaitCell) has ended (ran, denied, expired, failed)
	// and returns its CellStatus.
	UpdateAwaitCell = "await-cell"
	// UpdateCloseSession closes the session (a CloseSession): a waiting cell is dropped, a
	// running one finishes first; the sandbox is removed. It returns the SessionStatus once the
	// session has ended.
	UpdateCloseSession = "close-session"
	// UpdateCancelCell cancels the cell that waits or runs (a CancelCell) and returns a
	// CancelResult; its validator refuses any other cell, and a malformed request, with a
	// CancelRejected error. A waiting cell ends cancelled with nothing run; a running one is
	// stopped: its result has Outcome cancelled and the output printed before, and the session
	// goes on when the backend can stop the cell alone (Docker), or ends lost when it cannot.
	UpdateCancelCell = "cancel-cell"
	// QuerySessionStatus returns a SessionStatus.
	QuerySessionStatus = "session-status"
	// SessionCheckActivityName is the local activity that applies the policy to a SessionRequest.
	SessionCheckActivityName = "SessionCheck"
	// SessionOpenActivityName creates the session's sandbox on a sandbox host (on the sandbox
	// task queue) and returns a SessionOpened naming that host's own task queue.
	SessionOpenActivityName = "SessionOpen"
	// SessionHoldActivityName runs on the host's task queue for as long as the session lives:
	// it heartbeats, ends with a SandboxLost when the sandbox died, and removes the sandbox when
	// cancelled.
	SessionHoldActivityName = "SessionHold"
	// SessionCellActivityName runs one approved cell in the session's sandbox, on the host's
	// task queue.
	SessionCellActivityName = "SessionCell"
	// SessionCellCheckActivityName is the local activity that applies the policy to a submitted
	// cell (a CellCheckInput) and returns the guard.Cell, recorded in history.
	SessionCellCheckActivityName = "SessionCellCheck"
)

// Session states (SessionStatus.State and the SandboxStatus search attribute of a Session).
const (
	SessionChecking = "checking"
	SessionOpening  = "opening"
	SessionOpen     = "open"
	SessionClosing  = "closing"
	SessionClosed   = "closed"
	SessionError    = "error"
)

// Why a session ended (SessionStatus.End, SessionResult.End).
const (
	EndClosed   = "closed"    // the orchestrator closed it
	EndIdle     = "idle"      // no cell for the idle timeout
	EndLifetime = "lifetime"  // its lifetime was over
	EndMaxCells = "max_cells" // its cell cap was reached
	EndLost     = "lost"      // the sandbox (or its host) was lost: a SandboxLost error
	EndError    = "error"     // the check or the sandbox failed otherwise
	EndCanceled = "cancelled" // the workflow was cancelled
)

// Cell states (CellStatus.State): StatusAwaitingApproval, StatusRunning, then one of
// StatusSucceeded, StatusFailed, StatusTimedOut (it ran), StatusDenied, StatusExpired (it did
// not), StatusError (the host refused it or failed; Error says why), or CellDropped.
const CellDropped = "dropped" // the session ended while the cell waited; nothing ran

// SessionInput is the Session workflow's one argument.
type SessionInput struct {
	Request guard.SessionRequest `json:"request"`
	// SandboxTaskQueue is where SessionOpen is scheduled. Optional, as in Input.
	SandboxTaskQueue string `json:"sandbox_task_queue,omitempty"`
}

// SessionCheckInput is the SessionCheck activity's input.
type SessionCheckInput struct {
	Request guard.SessionRequest `json:"request"`
}

// SessionCheckResult is what SessionCheck records in history: the checked session and what the
// checking worker records with it (as CheckResult).
type SessionCheckResult struct {
	Session guard.CheckedSession `json:"session"`
	CheckedBy
	// Notify is CheckResult.Notify, for each cell's wait.
	Notify *NotifyOptions `json:"notify,omitempty"`
	// Hosts are the sandbox hosts' keys: the workflow refuses a cell result whose receipt does
	// not verify against them, or does not chain to the previous cell's. Absent without a hosts
	// file, and in histories recorded before receipts.
	Hosts *receipt.Hosts `json:"hosts,omitempty"`
	// Quorum is how many approvals by distinct reviewers each cell needs under this worker's
	// policy (guard.Policy.QuorumFor of the session's cells). Absent (one) in histories recorded
	// before session quorums.
	Quorum int `json:"quorum,omitempty"`
}

// SessionOpenInput is SessionOpen's input.
type SessionOpenInput struct {
	Session guard.CheckedSession `json:"session"`
}

// SessionOpened is what SessionOpen returns.
type SessionOpened struct {
	// HostTaskQueue is the task queue only the host that holds the sandbox polls; every cell's
	// statement binds it as its sandbox_task_queue.
	HostTaskQueue string `json:"host_task_queue"`
	// SandboxID names the sandbox (a container id).
	SandboxID string `json:"sandbox_id"`
	// ImageID is the image the sandbox runs, for backends that run images.
	ImageID string `json:"image_id,omitempty"`
}

// SessionHoldInput is SessionHold's input.
type SessionHoldInput struct {
	SandboxID string `json:"sandbox_id"`
}

// CellRequest is what an orchestrator submits (update "submit-cell").
type CellRequest struct {
	// Code is the cell's code. Required.
	Code string `json:"code"`
	// Language is one of the session's languages. Optional: python when offered, else the one.
	Language string `json:"language,omitempty"`
	// Metadata says who asked (a tool call id); recorded, not part of any digest.
	Metadata guard.Metadata `json:"metadata"`
	// RequestID is the caller's idempotency key. Optional: a submit whose request id names a
	// cell of the session gets that cell back (CellSubmitted as it was) instead of a new one,
	// so a retry after a lost answer submits nothing twice; the same id with other code or
	// language is refused. The Go client also sends it as the update's id. At most
	// MaxRequestIDBytes of UTF-8; recorded in the cell's status, not part of any digest.
	RequestID string `json:"request_id,omitempty"`
	// Retries is the earlier cell this one retries (one that was denied, expired, cancelled,
	// failed, timed out or ended in error), 0 for none: reviewers' views diff this cell's code
	// against that cell's, never against an unrelated one. The orchestrator's word, for reading
	// only: it changes nothing that runs and is part of no digest; the whole code is always shown.
	Retries int `json:"retries,omitempty"`
	// Packages is a lock (guard.ParseLock) of packages the cell adds to the session's set,
	// approved with the cell: part of its code digest. A package the session (or an earlier
	// cell) has at another version or with other hashes is refused. Optional.
	Packages string `json:"packages,omitempty"`
}

// MaxRequestIDBytes bounds CellRequest.RequestID.
const MaxRequestIDBytes = 200

// CellSubmitted is what "submit-cell" returns: the cell's index and what its reviewer approves.
type CellSubmitted struct {
	Cell       int    `json:"cell"`
	CodeDigest string `json:"code_digest"`
	// Chain is the chain over every earlier cell that ran; Digest is guard.CellDigest, the
	// digest the cell's statement signs.
	Chain  string `json:"chain"`
	Digest string `json:"digest"`
	// ApprovalDeadline is when the wait for the cell's decision ends.
	ApprovalDeadline time.Time `json:"approval_deadline"`
}

// CellDecision is a reviewer's decision for one cell (update "decide-cell"). Decision.Digest is
// the cell's digest (guard.CellDigest).
type CellDecision struct {
	Cell     int      `json:"cell"`
	Decision Decision `json:"decision"`
	// Wait asks the workflow to answer an accepted decision only once the cell has ended, with
	// its status (DecideResult.CellStatus): the approval and the cell's result in one call. It
	// is not part of what the reviewer signs (a sender chooses how long it waits, not what
	// runs). A worker from before it ignores it and answers at once, without CellStatus.
	Wait bool `json:"wait,omitempty"`
}

// AwaitCell names the cell update "await-cell" waits for.
type AwaitCell struct {
	Cell int `json:"cell"`
}

// CloseSession asks for the session's end (update "close-session").
type CloseSession struct {
	Reason string `json:"reason,omitempty"`
}

// CellCheckInput is SessionCellCheck's input: the session's checked settings and the cell.
type CellCheckInput struct {
	Session  guard.CheckedSession `json:"session"`
	Index    int                  `json:"index"`
	Language string               `json:"language,omitempty"`
	Code     string               `json:"code"`
	// Packages is the cell's lock (CellRequest.Packages); EarlierPackages the packages earlier
	// cells of the session brought, which the cell's may add to but not change. Both empty for
	// a cell without packages.
	Packages        string          `json:"packages,omitempty"`
	EarlierPackages []guard.Package `json:"earlier_packages,omitempty"`
}

// CellRunInput is SessionCell's input: the approved cell and its decision. The host checks the
// settings digest, the index and the chain against its own record of the sandbox.
type CellRunInput struct {
	Cell     guard.Cell `json:"cell"`
	Chain    string     `json:"chain"`
	Decision Decision   `json:"decision"`
	// Decisions are every approval the workflow accepted for the cell, in order (the first is
	// Decision); empty in inputs recorded before session quorums, which carry Decision alone.
	// The host verifies each and counts them against its own policy, as a run's.
	Decisions []Decision `json:"decisions,omitempty"`
}

// CellStatus is one cell as the status reports it.
type CellStatus struct {
	Cell       int    `json:"cell"`
	Language   string `json:"language"`
	Code       string `json:"code"`
	CodeBytes  int    `json:"code_bytes"`
	CodeDigest string `json:"code_digest"`
	// Packages are the packages the cell brings (guard.Cell.Packages), bound by CodeDigest.
	Packages []guard.Package `json:"packages,omitempty"`
	Chain    string          `json:"chain"`
	Digest   string          `json:"digest"`
	State    string          `json:"state"`
	Metadata guard.Metadata  `json:"metadata"`
	// RequestID is the submit's CellRequest.RequestID (empty: none given).
	RequestID string    `json:"request_id,omitempty"`
	Submitted time.Time `json:"submitted"`
	// DecisionWait is the cell's wait for its decision. Its quorum is absent for sessions
	// checked before session quorums.
	DecisionWait
	// Result is the cell's result, as the sandbox host returned it; ResultDigest is
	// guard.ResultDigest of it, which the next cell's chain binds.
	Result       *guard.Result `json:"result,omitempty"`
	ResultDigest string        `json:"result_digest,omitempty"`
	// Retries is CellRequest.Retries: the earlier cell this one retries (0: none).
	Retries int `json:"retries,omitempty"`
	// Cancel is the accepted cancel request of the cell (the update "cancel-cell"), if any: who
	// asked and why, as they said it. It is kept here, not in the result, which the host signs.
	Cancel *guard.Cancellation `json:"cancel,omitempty"`
	// SuspiciousCharacters lists invisible and direction-changing characters in the code.
	SuspiciousCharacters []pysource.Suspicious `json:"suspicious_characters,omitempty"`
	Error                string                `json:"error,omitempty"`
	// Notification is Status.Notification, for this cell's wait.
	Notification *NotifyRecord `json:"notification,omitempty"`
	// Phases is Status.Phases, for this cell: its check from its submit, its wait, its queue
	// (to its code's start: the sandbox is already open), its run and its receipt.
	Phases *AuditPhases `json:"phases,omitempty"`
}

// SessionStatus is what the query "session-status" returns.
type SessionStatus struct {
	State      string `json:"state"`
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	// SandboxTaskQueue is the host's task queue, which every cell's statement binds. Empty
	// until the sandbox is open.
	SandboxTaskQueue string `json:"sandbox_task_queue,omitempty"`
	SandboxID        string `json:"sandbox_id,omitempty"`
	StatementVersion int    `json:"statement_version,omitempty"`
	// Quorum is how many approvals by distinct reviewers each cell needs (absent for sessions
	// checked before session quorums).
	Quorum int `json:"quorum,omitempty"`
	// Rules is what the checking worker's policy rules decided for the session (its hash, the
	// groups whose approvals each cell needs, warnings). Absent without a policy.
	Rules *guard.RuleDecision `json:"rules,omitempty"`
	// Settings are the checked session's settings as a reviewer reads them; its Digest is the
	// settings digest.
	Settings guard.SessionSummary `json:"settings"`
	// Chain is the chain over every cell that ran so far: the next cell's chain.
	Chain string       `json:"chain,omitempty"`
	Cells []CellStatus `json:"cells"`
	// Opened is when the sandbox opened; Deadline when the lifetime ends; IdleDeadline when the
	// idle timeout ends unless a cell comes (zero while a cell waits or runs).
	Opened       time.Time `json:"opened,omitzero"`
	Deadline     time.Time `json:"deadline,omitzero"`
	IdleDeadline time.Time `json:"idle_deadline,omitzero"`
	// End says why the session ended; Error is the error that ended it, if any.
	End               string `json:"end,omitempty"`
	Error             string `json:"error,omitempty"`
	RejectedDecisions int    `json:"rejected_decisions"`
	LastRejection     string `json:"last_rejection,omitempty"`
}

// SessionResult is what a Session workflow returns when it ends without an error.
type SessionResult struct {
	End            string       `json:"end"`
	SettingsDigest string       `json:"settings_digest"`
	Chain          string       `json:"chain"`
	Cells          []CellStatus `json:"cells"`
}

// Final reports whether a cell state is final.
func (c CellStatus) Final() bool {
	switch c.State {
	case StatusAwaitingApproval, StatusRunning, "":
		return false
	}
	return true
}

// CancelCell is the update "cancel-cell"'s argument: the cell to cancel (the one that waits or
// runs) and the request, as for a run's cancel.
type CancelCell struct {
	Cell int `json:"cell"`
	CancelRequest
}
