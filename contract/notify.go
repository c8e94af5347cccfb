package contract

import (
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// NotifyActivityName is the activity that tells reviewers a run (or a session's cell) waits for
// a decision. It is a regular activity on the workflow's own task queue, registered by every
// worker that runs workflows (notify.Activities); a failure of it is logged and counted, never
// part of the decision.
const NotifyActivityName = "SandboxNotify"

// NotifyVersion is the workflow.GetVersion change id under which RunCode and Session schedule
// the notify activity and RunCode sets SandboxConversation. Histories recorded before it replay
// without either.
const NotifyVersion = "notify-v1"

// EventNotifyFailed is logged by the workflow when a notification failed after its last
// attempt; the run goes on waiting.
const EventNotifyFailed EventType = "notify.failed"

// Events a notification announces (NotifyInput.Event; the webhook body's "type").
const (
	// EventRunAwaiting: a RunCode run waits for a decision.
	EventRunAwaiting = "run.awaiting_approval"
	// EventCellAwaiting: a session's cell waits for a decision.
	EventCellAwaiting = "cell.awaiting_approval"
)

// Defaults of NotifyOptions.
const (
	DefaultNotifyStartToClose     = time.Minute
	DefaultNotifyHeartbeatTimeout = 20 * time.Second
	DefaultNotifyInitialInterval  = 2 * time.Second
	DefaultNotifyMaximumInterval  = 5 * time.Minute
	DefaultNotifyMaximumAttempts  = 12
)

// NotifyOptions say how a workflow schedules the notify activity. The checking worker records
// them in CheckResult (and SessionCheckResult) when it has notification channels, so a change of
// its settings never changes how a recorded run replays; absent, nothing is notified.
type NotifyOptions struct {
	// StartToCloseTimeout bounds one attempt (every channel, in turn). Optional: 1 min.
	StartToCloseTimeout time.Duration `json:"start_to_close_timeout,omitempty"`
	// HeartbeatTimeout notices a lost worker mid-attempt, so another worker retries soon.
	// Optional: 20 s.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	// InitialInterval is the wait before the second attempt; it doubles up to MaximumInterval.
	// Optional: 2 s and 5 min.
	InitialInterval time.Duration `json:"initial_interval,omitempty"`
	MaximumInterval time.Duration `json:"maximum_interval,omitempty"`
	// MaximumAttempts bounds the attempts; the approval deadline bounds them too (a notification
	// after it is of no use). Optional: 12.
	MaximumAttempts int `json:"maximum_attempts,omitempty"`
}

// WithDefaults returns o with each zero field set to its default.
func (o NotifyOptions) WithDefaults() NotifyOptions {
	if o.StartToCloseTimeout <= 0 {
		o.StartToCloseTimeout = DefaultNotifyStartToClose
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = DefaultNotifyHeartbeatTimeout
	}
	if o.InitialInterval <= 0 {
		o.InitialInterval = DefaultNotifyInitialInterval
	}
	if o.MaximumInterval <= 0 {
		o.MaximumInterval = DefaultNotifyMaximumInterval
	}
	if o.MaximumAttempts <= 0 {
		o.MaximumAttempts = DefaultNotifyMaximumAttempts
	}
	return o
}

// NotifyInput is the notify activity's input: what a notification may say about the waiting
// run or cell. Code is here for the operator who asks for it (notify.Config.IncludeCode); the
// activity leaves it out otherwise. Env values and input files are never here.
type NotifyInput struct {
	// Event is EventRunAwaiting or EventCellAwaiting.
	Event string `json:"event"`
	// WorkflowID and RunID name the run (or the session); Cell is the cell's index (0 for a run).
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Cell       int    `json:"cell,omitempty"`
	// Digest is what a decision must name.
	Digest   string `json:"digest"`
	Language string `json:"language"`
	Code     string `json:"code"`
	// Files are the input files' names and sizes (a run's, or the session's); never their bytes.
	Files   []guard.FileSummary `json:"files,omitempty"`
	Network bool                `json:"network,omitempty"`
	Egress  []string            `json:"egress,omitempty"`
	Secrets []string            `json:"secrets,omitempty"`
	// Image is the checked request's image ID (guard.Checked.Image), when it names one.
	Image string `json:"image,omitempty"`
	// Packages are the run's packages, or the packages the cell brings.
	Packages []guard.Package `json:"packages,omitempty"`
	// Metadata says who asked, as the orchestrator wrote it.
	Metadata guard.Metadata `json:"metadata"`
	// Conversation is the request's conversation, if it named one.
	Conversation string `json:"conversation,omitempty"`
	// PolicyWarnings are the policy rules' warnings and the group approvals they need
	// (guard.RuleDecision), one text each; absent without a policy.
	PolicyWarnings []string `json:"policy_warnings,omitempty"`
	// Since is when the wait started; Deadline is when it ends.
	Since    time.Time `json:"since,omitzero"`
	Deadline time.Time `json:"deadline"`
}

// NotifyResult is what the notify activity returns: the channels it delivered to.
type NotifyResult struct {
	Delivered []string `json:"delivered,omitempty"`
}

// States of a NotifyRecord.
const (
	NotifyPending   = "pending"
	NotifyDelivered = "delivered"
	NotifyFailed    = "failed"
)

// NotifyRecord is what the status says of a run's notification: pending, delivered (to which
// channels) or failed (why, after its last attempt). It never changes what the run does.
type NotifyRecord struct {
	State     string   `json:"state"`
	Delivered []string `json:"delivered,omitempty"`
	Error     string   `json:"error,omitempty"`
}
