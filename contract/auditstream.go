package contract

import (
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// AuditStreamVersion is an audit stream record's "schema_version".
const AuditStreamVersion = "sandboxflow-audit-stream/v1"

// The kinds of audit stream record (AuditStreamRecord.Kind).
const (
	// StreamCheck: the check recorded a request (its digest, agent, quorum).
	StreamCheck = "check"
	// StreamDecision: a reviewer's decision reached the run's history.
	StreamDecision = "decision"
	// StreamClaim: a sandbox host claimed the run's (or a cell's) approval.
	StreamClaim = "claim"
	// StreamEnd: a run, a session's cell or a session ended.
	StreamEnd = "end"
	// StreamRefusal: the check, a verification or a sandbox host refused the run, or a
	// decision that does not verify was refused.
	StreamRefusal = "refusal"
)

// The subjects of an audit stream record (AuditStreamRecord.Subject).
const (
	SubjectRun     = "run"
	SubjectSession = "session"
	SubjectCell    = "cell"
)

// AuditStreamRecord is one line of `starter audit --follow` (client.FollowAudit): one thing that
// happened to a run or a session, read from its history, in the order of the history's times.
// docs/schema/audit-stream.schema.json is its JSON Schema.
type AuditStreamRecord struct {
	// SchemaVersion is AuditStreamVersion.
	SchemaVersion string `json:"schema_version"`
	// Cursor is where a follower resumes after this record (opaque).
	Cursor string `json:"cursor"`
	// Kind is StreamCheck, StreamDecision, StreamClaim, StreamEnd or StreamRefusal.
	Kind string `json:"kind"`
	// Time is the history's time of the event the record is of (the Temporal server's clock).
	Time time.Time `json:"time"`
	// Subject is SubjectRun, SubjectSession or SubjectCell (then Cell is the cell's index).
	Subject    string `json:"subject"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Cell       *int   `json:"cell,omitempty"`
	// EventID is the history event the record is of.
	EventID int64 `json:"event_id"`
	// Late marks a record found after records later than it were emitted (a run the visibility
	// store listed later than the settle time): its cursor is the previous record's.
	Late bool `json:"late,omitempty"`
	// Agent is the request's metadata.agent: the orchestrator's word, not a verified identity.
	Agent string `json:"agent,omitempty"`
	// One of these is set, as Kind says.
	Check    *StreamCheckBody    `json:"check,omitempty"`
	Decision *StreamDecisionBody `json:"decision,omitempty"`
	Claim    *SandboxClaim       `json:"claim,omitempty"`
	End      *StreamEndBody      `json:"end,omitempty"`
	Refusal  *StreamRefusalBody  `json:"refusal,omitempty"`
}

// StreamCheckBody is what a check recorded.
type StreamCheckBody struct {
	// Digest is the checked request's digest (a session's settings digest).
	Digest string `json:"digest"`
	// Language is a run's language; empty for a session.
	Language string `json:"language,omitempty"`
	// Quorum is how many distinct reviewers must approve (one when the check recorded none).
	Quorum int `json:"quorum"`
	// SandboxTaskQueue is where the code is to run.
	SandboxTaskQueue string `json:"sandbox_task_queue,omitempty"`
	// ReviewerKeys and HostKeys count the keys the check recorded.
	ReviewerKeys int `json:"reviewer_keys"`
	HostKeys     int `json:"host_keys"`
	// PolicyHash is the hash of the policy file the check applied, when the check records one.
	PolicyHash string `json:"policy_hash,omitempty"`
	// Warnings are the start-up warnings the check found (their kinds).
	Warnings []string `json:"warnings,omitempty"`
}

// StreamDecisionBody is one decision as it reached the history, judged as the workflow judged it
// (a run's); a cell's decision is as sent (its end record's receipt names the approvals the host
// verified, with their keys' fingerprints).
type StreamDecisionBody struct {
	// Via is ViaSignal or ViaUpdate.
	Via        string `json:"via"`
	ApprovalID string `json:"approval_id"`
	Approve    bool   `json:"approve"`
	Reviewer   string `json:"reviewer,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Digest     string `json:"digest"`
	// Judged says Accepted, Refused and Fingerprint hold the workflow's judgement (a run's).
	Judged   bool   `json:"judged"`
	Accepted bool   `json:"accepted,omitempty"`
	Refused  string `json:"refused,omitempty"`
	// Fingerprint is the verifying key's SHA256 fingerprint, for an accepted decision.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// StreamEndBody is how a run, a cell or a session ended.
type StreamEndBody struct {
	// Outcome is the result's outcome; "error" for a run that ended without a result (Error
	// says how), "closed" for a session.
	Outcome string `json:"outcome"`
	// Result is the run's or the cell's result, its receipt (and usage) included.
	Result *guard.Result `json:"result,omitempty"`
	// Error is how a run ended without a result.
	Error *AuditError `json:"error,omitempty"`
	// Record is the run's or the session's whole audit record (starter audit ID's), which
	// starter audit verify checks; absent on a cell's end.
	Record *AuditRecord `json:"record,omitempty"`
}

// StreamRefusalBody is a refusal: of a decision, or one that ended a run or a session.
type StreamRefusalBody struct {
	// Stage is "check" (the check or a policy refused the request), "decision" (a decision
	// that does not verify: the run goes on without it), "approval" (the workflow refused the
	// approval), "sandbox" (the sandbox host refused: its verification, its own rules), or
	// "receipt" (the workflow refused the host's receipt).
	Stage string `json:"stage"`
	// Type and Message are the failure's.
	Type    string `json:"type"`
	Message string `json:"message"`
}
