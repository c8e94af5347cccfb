package contract

import (
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/guard"
)

// AuditVersion is an audit record's "audit" field.
const AuditVersion = "sandboxflow-audit/v1"

// AuditRecord is one run's whole record, read from its history alone (starter audit ID): what was
// asked, what the check recorded, every decision that reached the history with the statement it
// had to sign, the sandbox hosts' claims, the receipt and the result. It is checkable offline
// (starter audit verify) by someone who trusts neither the Temporal server nor the orchestrator.
// docs/audit.schema.json is its JSON Schema.
type AuditRecord struct {
	// Audit is AuditVersion.
	Audit      string `json:"audit"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	// Started and Closed are the history's times of the run's start and end (Closed is zero
	// while it runs).
	Started time.Time `json:"started"`
	Closed  time.Time `json:"closed,omitzero"`
	// Request is the request as the orchestrator started the run.
	Request guard.Request `json:"request"`
	// Checked is the request as the check recorded it, with its digest.
	Checked guard.Checked `json:"checked"`
	// Rules is what the checking worker's policy rules decided, with the policy's hash (the
	// receipt's policy_hash is the sandbox host's own); absent without a policy.
	Rules *guard.RuleDecision `json:"rules,omitempty"`
	// SandboxTaskQueue is where the code was to run (every statement binds it).
	SandboxTaskQueue string `json:"sandbox_task_queue"`
	// StatementVersion is the approval statement version the check required.
	StatementVersion int `json:"statement_version"`
	// ReviewerKeys and HostKeys are the keys the check recorded (what the workflow verified
	// against; an offline check uses its own files).
	ReviewerKeys []approval.Key `json:"reviewer_keys"`
	HostKeys     []approval.Key `json:"host_keys"`
	// Decisions are every decision in the history, in order, each judged as the workflow
	// judged it.
	Decisions []AuditDecision `json:"decisions"`
	// Claims are the sandbox hosts' claims on the approval.
	Claims []SandboxClaim `json:"claims"`
	// Receipt is the sandbox host's receipt (the result's), when there is one.
	Receipt *guard.Receipt `json:"receipt,omitempty"`
	// Result is the sandbox activity's result as the history holds it (whether the workflow
	// accepted it or refused it).
	Result *guard.Result `json:"result,omitempty"`
	// Error is how the run ended when it did not end with a result (its type and message).
	Error *AuditError `json:"error,omitempty"`
	// Phases is where the run's time went, read from the history's event times and the
	// receipt; absent for a Session (its cells each have their own) and for a record from before
	// it.
	Phases *AuditPhases `json:"phases,omitempty"`
	// Session is a Session's checked settings, with its settings digest; Cells are the cells
	// that ran, in order, each with its result and receipt. Both are absent for a RunCode run
	// (whose request and checked request they replace).
	Session *guard.CheckedSession `json:"session,omitempty"`
	Cells   []AuditCell           `json:"cells,omitempty"`
}

// AuditPhases is where a RunCode run's time went, each phase in milliseconds. A phase the run
// has not reached (yet, or ever: a denied run has no queue) is absent. The history's times are
// the Temporal server's clock; the run's own start and end are the sandbox host's (its
// receipt's), so a phase that spans both clocks (SandboxStartMS, ReceiptMS) carries their skew,
// and is 0 rather than negative.
type AuditPhases struct {
	// CheckMS: from the run's start to the check's record (the policy check and its digest).
	CheckMS *int64 `json:"check_ms,omitempty"`
	// WaitMS: from the check's record to the accepted decision's effect, when the sandbox
	// activity is scheduled; for a run that never ran, to the run's end (or, open, absent).
	WaitMS *int64 `json:"wait_ms,omitempty"`
	// QueueMS: from the sandbox activity's scheduling to a sandbox host's taking it.
	QueueMS *int64 `json:"queue_ms,omitempty"`
	// SandboxStartMS: from the host's taking the activity to the code's start (the approval
	// verified and claimed, the sandbox created or taken from the warm pool).
	SandboxStartMS *int64 `json:"sandbox_start_ms,omitempty"`
	// RunMS: the code's run, from the receipt's started to its ended (the host's clock).
	RunMS *int64 `json:"run_ms,omitempty"`
	// ReceiptMS: from the code's end to the activity's completion in history (the receipt
	// signed, the sandbox removed, the result delivered).
	ReceiptMS *int64 `json:"receipt_ms,omitempty"`
}

// AuditCell is one cell of a session that its sandbox host ran.
type AuditCell struct {
	// Cell is the cell as the workflow scheduled it (index, language, code, code digest).
	Cell guard.Cell `json:"cell"`
	// Result is the cell's result, with the host's receipt, which chains to the previous cell's.
	Result guard.Result `json:"result"`
}

// AuditDecision is one decision of the history.
type AuditDecision struct {
	// Via is ViaSignal or ViaUpdate; Time is the history's time of its event.
	Via  string    `json:"via"`
	Time time.Time `json:"time"`
	// Decision is the decision as sent, signature and all.
	Decision Decision `json:"decision"`
	// Statement is the statement bytes this decision had to sign for this run.
	Statement string `json:"statement"`
	// Accepted says it was the decision the run took; Refused why not (the approval package's
	// refusal, or that another was accepted first).
	Accepted bool   `json:"accepted"`
	Refused  string `json:"refused,omitempty"`
	// Fingerprint is the verifying key's fingerprint, for an accepted decision.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// AuditError is how a run ended without a result.
type AuditError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
