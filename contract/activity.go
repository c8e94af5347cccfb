package contract

import (
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// CheckInput is the input of the check activity (CheckActivityName).
type CheckInput struct {
	Request guard.Request `json:"request"`
}

// CheckResult is what the check activity records in the workflow's history: the checked request
// with its digest, and the settings of the worker that checked it, so that a later change of the
// worker's configuration never changes how a recorded run replays.
type CheckResult struct {
	Checked guard.Checked `json:"checked"`
	CheckedBy
	// Hosts are the sandbox hosts' keys (the checking worker's hosts file): the workflow refuses
	// a result whose receipt does not verify against them. Absent when the worker has no hosts
	// file, and in histories recorded before receipts: results are then taken as they come.
	Hosts *receipt.Hosts `json:"hosts,omitempty"`
	// Notify says how the workflow schedules the notify activity when the run starts waiting;
	// nil when the checking worker has no notification channels (and in histories recorded
	// before notifications).
	Notify *NotifyOptions `json:"notify,omitempty"`
	// Quorum is how many distinct reviewers must approve the run (guard.Policy.QuorumFor), fixed
	// here so that it replays. Absent (1) in histories recorded before quorums.
	Quorum int `json:"quorum,omitempty"`
}

// CheckedBy is what the worker that checked a run or a session records with it (CheckResult,
// SessionCheckResult): its settings as they were then and the start-up warnings its check
// found, so that a replay never depends on today's configuration. It has no JSON methods of
// its own: its fields are encoded as fields of the result that embeds it.
type CheckedBy struct {
	// ApprovalTimeout is how long a decision is waited for (the policy's).
	ApprovalTimeout time.Duration `json:"approval_timeout"`
	Run             RunOptions    `json:"run"`
	// Reviewers are the keys the workflow verifies decisions against: the checking worker's
	// reviewers file as it was then, so that editing the file never changes a replay.
	Reviewers *approval.Reviewers `json:"reviewers"`
	// Warnings are the start-up warnings the check found (pysource.StartupWarnings): recorded in
	// the history with the check, for an audit of what reviewers were warned of. Empty in
	// histories recorded before it existed; nothing the workflow decides depends on it.
	Warnings []pysource.StartupWarning `json:"warnings,omitempty"`
	// StatementVersion is the statement version decisions must sign (approval.StatementVersion2:
	// it names the reviewer). Absent in run histories recorded before it, which replay with
	// version 1. A session's check has recorded it from the start, and always writes it: the
	// check sets approval.StatementVersion, never zero, so omitempty never drops it there.
	StatementVersion int `json:"statement_version,omitempty"`
	// Rules is what the checking worker's policy rules decided (its policy's hash, a quorum,
	// group approvals, warnings); nil when the worker has no policy file, and in histories
	// recorded before policy rules.
	Rules *guard.RuleDecision `json:"rules,omitempty"`
}

// RunOptions say how the workflow schedules the sandbox activity.
type RunOptions struct {
	// TaskQueue is the sandbox activity's task queue; empty means the workflow's own.
	TaskQueue string `json:"task_queue,omitempty"`
	// Grace is added to the run's timeout for the backstop.
	Grace time.Duration `json:"grace"`
	// ScheduleToStartTimeout bounds how long the approved activity may wait in the sandbox
	// task queue; past it the run ends with the approval unused. Zero means none (histories
	// recorded before it existed).
	ScheduleToStartTimeout time.Duration `json:"schedule_to_start_timeout,omitempty"`
	// HeartbeatTimeout is the sandbox activity's heartbeat timeout.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	// ReportMargin is added to timeout + grace for the activity's StartToCloseTimeout.
	ReportMargin time.Duration `json:"report_margin"`
	// StartAttempts bounds how often the workflow schedules the sandbox activity after failures
	// from before the code could start; StartBackoff doubles up to MaxStartBackoff between them.
	StartAttempts   int           `json:"start_attempts"`
	StartBackoff    time.Duration `json:"start_backoff"`
	MaxStartBackoff time.Duration `json:"max_start_backoff"`
	// LateResultWait is how long the workflow waits for a late result (SignalLateResult) after
	// the server timed out a sandbox activity whose host claimed the approval, before it ends the
	// run "outcome unknown". Zero: it does not wait (histories recorded before late results, and
	// a worker without a hosts file, whose results carry no receipt to check).
	LateResultWait time.Duration `json:"late_result_wait,omitempty"`
}

// RunInput is the input of the sandbox activity (RunActivityName): a checked request and the
// signed approval that lets it run. The activity verifies Decision itself, against its own
// reviewers file and its own activity info, before anything starts; the approval id and digest
// it runs under are the decision's. (Inputs recorded before this shape also carried
// "approval_id", "reviewer" and "digest" beside the decision; they are ignored.)
type RunInput struct {
	Checked guard.Checked `json:"checked"`
	// Decision is the signed decision as the reviewer sent it, with Reviewer as the workflow
	// verified it.
	Decision Decision `json:"decision"`
	// Decisions are every approval the workflow accepted, in order, when the run needed a
	// quorum (the first is Decision); empty in inputs recorded before quorums, which carry
	// Decision alone. The sandbox host verifies each and counts them against its own policy.
	Decisions []Decision `json:"decisions,omitempty"`
	// Edit, when set, says that Checked is a reviewer's edit of the request the run was
	// started with: the sandbox host checks that its editor is one of the approvers and its
	// digest the one they signed.
	Edit *guard.Edit `json:"edit,omitempty"`
}
