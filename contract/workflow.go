package contract

import (
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Names a Temporal client uses to talk to a RunCode run.
const (
	// WorkflowName is the workflow type.
	WorkflowName = "RunCode"
	// SignalApproval is the signal that carries a Decision.
	SignalApproval = "approval"
	// UpdateDecide is the update that carries a Decision; its validator refuses a bad one and
	// says why. It returns a DecideResult.
	UpdateDecide = "decide"
	// QueryStatus is the query that returns a Status.
	QueryStatus = "status"
	// SignalSandboxClaim is the signal a sandbox host sends to a run, as a SandboxClaim, before it
	// lets code start, and again to release the claim when the code did not start. The workflow
	// reads and drops it; the history keeps it, where sandbox hosts read it (see SandboxClaim).
	SignalSandboxClaim = "sandbox-claim"
	// SignalLateResult is the signal a sandbox host sends, as a LateResult, with the result of a
	// run whose sandbox activity the server timed out while the code ran.
	SignalLateResult = "late-result"
	// CheckActivityName is the local activity that applies the worker's policy to a request.
	CheckActivityName = "SandboxCheck"
	// RunActivityName is the sandbox activity that runs an approved request.
	RunActivityName = "SandboxRun"
	// DefaultTaskQueue is the task queue of workflows and, unless configured otherwise, of
	// sandbox activities.
	DefaultTaskQueue = "sandboxflow"
	// DecisionRejectedType is the Type of the application error with which the update "decide"
	// refuses a decision.
	DecisionRejectedType = "DecisionRejected"
)

// Search attribute names. All are of type Keyword and must be registered on the namespace before
// a run starts (the dev server and `worker doctor` use SearchAttributeNames).
const (
	// AttrStatus is the run's state: one of the Status* values.
	AttrStatus = "SandboxStatus"
	// AttrDigest is the digest a reviewer approves.
	AttrDigest = "SandboxDigest"
	// AttrLanguage is the request's language.
	AttrLanguage = "SandboxLanguage"
	// AttrBackend is the backend that runs the code.
	AttrBackend = "SandboxBackend"
	// AttrReviewer is the reviewer whose decision was accepted.
	AttrReviewer = "SandboxReviewer"
	// AttrConversation is the request's conversation (guard.Request.Conversation), set when it
	// names one: the previous run of a conversation is found by it.
	AttrConversation = "SandboxConversation"
	// AttrAgent is the request's agent name (guard.Metadata.Agent), set when the checking
	// worker has policy rules: the policy's caps per agent count runs by it.
	AttrAgent = "SandboxAgent"
)

// Typed keys of the search attributes, for workflow.UpsertTypedSearchAttributes and for reading
// them from a client.
var (
	StatusKey       = temporal.NewSearchAttributeKeyKeyword(AttrStatus)
	DigestKey       = temporal.NewSearchAttributeKeyKeyword(AttrDigest)
	LanguageKey     = temporal.NewSearchAttributeKeyKeyword(AttrLanguage)
	BackendKey      = temporal.NewSearchAttributeKeyKeyword(AttrBackend)
	ReviewerKey     = temporal.NewSearchAttributeKeyKeyword(AttrReviewer)
	ConversationKey = temporal.NewSearchAttributeKeyKeyword(AttrConversation)
	AgentKey        = temporal.NewSearchAttributeKeyKeyword(AttrAgent)
)

// SearchAttributeKeys returns the typed keys of every search attribute RunCode sets.
func SearchAttributeKeys() []temporal.SearchAttributeKey {
	return []temporal.SearchAttributeKey{StatusKey, DigestKey, LanguageKey, BackendKey, ReviewerKey, ConversationKey, AgentKey}
}

// SearchAttributeNames returns the names of every search attribute RunCode sets, all of type
// Keyword.
func SearchAttributeNames() []string {
	return []string{AttrStatus, AttrDigest, AttrLanguage, AttrBackend, AttrReviewer, AttrConversation, AttrAgent}
}

// Values of the SandboxStatus search attribute and of Status.State.
const (
	// StatusChecking: the policy is being applied to the request.
	StatusChecking = "checking"
	// StatusAwaitingApproval: the run waits for a reviewer's decision.
	StatusAwaitingApproval = "awaiting_approval"
	// StatusRunning: approved; the sandbox activity is scheduled or running.
	StatusRunning = "running"
	// StatusSucceeded: the code ran and exited 0.
	StatusSucceeded = "succeeded"
	// StatusFailed: the code ran and exited non-zero, or a resource limit killed it.
	StatusFailed = "failed"
	// StatusTimedOut: the code ran past its timeout and was stopped.
	StatusTimedOut = "timed_out"
	// StatusDenied: a reviewer denied the run; nothing ran.
	StatusDenied = "denied"
	// StatusExpired: no decision came before the approval timeout; nothing ran.
	StatusExpired = "expired"
	// StatusCancelled: the workflow was cancelled; a running sandbox was stopped.
	StatusCancelled = "cancelled"
	// StatusError: the request failed its check, or the backend failed (the run's error says
	// whether the code may have started).
	StatusError = "error"
)

// FinalState is the SandboxStatus of a run that ended with a result: StatusSucceeded,
// StatusTimedOut, or StatusFailed (a non-zero exit or a resource limit).
func FinalState(o guard.Outcome) string {
	switch o {
	case guard.OutcomeSucceeded:
		return StatusSucceeded
	case guard.OutcomeTimedOut:
		return StatusTimedOut
	case guard.OutcomeCancelled:
		return StatusCancelled
	}
	return StatusFailed
}

// Input is the workflow's one argument.
type Input struct {
	// Request is what to run. Required.
	Request guard.Request `json:"request"`
	// SandboxTaskQueue is the task queue of the sandbox activity. Optional: defaults to the
	// checking worker's configured sandbox task queue, or else the workflow's own task queue.
	SandboxTaskQueue string `json:"sandbox_task_queue,omitempty"`
}

// MemoApprovals is the memo key under which a run checked with quorums keeps its ApprovalCount,
// so that a list of waiting runs (starter pending) shows approvals had and needed without
// querying each run. It is the workflow worker's word, shown only: the sandbox host counts the
// approvals itself.
const MemoApprovals = "sandboxflow_approvals"

// ApprovalCount is how many approvals a run has and needs (memo MemoApprovals).
type ApprovalCount struct {
	Approvals int `json:"approvals"`
	Quorum    int `json:"quorum"`
}

// DecideResult is what the update "decide" returns for an accepted decision.
type DecideResult struct {
	ApprovalID string `json:"approval_id"`
	Approve    bool   `json:"approve"`
	Reviewer   string `json:"reviewer"`
	Digest     string `json:"digest"`
	// State is where the decision leads: StatusRunning for an approval that completes the
	// quorum, StatusDenied for a denial, StatusAwaitingApproval for an approval that leaves
	// the run waiting for more.
	State string `json:"state"`
	// Approvals is how many approvals the run has now; Quorum how many it needs. Absent for
	// runs checked before quorums.
	Approvals int `json:"approvals,omitempty"`
	Quorum    int `json:"quorum,omitempty"`
	// CellStatus is, for a session's cell decided with CellDecision.Wait, the cell's status once
	// it ended (its result, or why it has none); State stays where the decision led.
	CellStatus *CellStatus `json:"cell_status,omitempty"`
	// Ended is, for an approval sent with Decision.Wait that started the run, that the run has
	// ended: Result is then its result, unless the run ended with an error (the workflow's
	// result returns it, typed) or its output was too large to be answered twice
	// (MaxAnsweredResultBytes: the workflow's result holds it). State stays where the
	// decision led.
	Ended  bool          `json:"ended,omitempty"`
	Result *guard.Result `json:"result,omitempty"`
}

// MaxAnsweredResultBytes bounds the output (stdout, stderr, produced files and outputs) of a
// result the update "decide" answers with (Decision.Wait): the answer is recorded in the run's
// history beside the workflow's result, so a larger result is left to the workflow's result
// alone.
const MaxAnsweredResultBytes = 128 << 10

// Status is what the query "status" returns.
type Status struct {
	// State is one of the Status* values.
	State string `json:"state"`
	// WorkflowID and RunID name this run; a reviewer's statement binds both.
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	// SandboxTaskQueue is where the approved code would run; a reviewer's statement binds it.
	// Empty while checking.
	SandboxTaskQueue string `json:"sandbox_task_queue,omitempty"`
	// StatementVersion is the version of the statement a decision must sign (2: it names the
	// reviewer's principal). Absent (1) for runs checked before version 2, and while checking.
	StatementVersion int `json:"statement_version,omitempty"`
	// Request is the checked request as a reviewer reads it: code, language, file names and
	// sizes, env names (never values), limits, network, backend and digest. Empty while checking
	// and when the check failed.
	Request guard.Summary `json:"request"`
	// DecisionWait is the run's wait for a decision. Its quorum is fixed when the run is
	// checked; absent for runs checked before quorums (which need one).
	DecisionWait
	// Rules is what the checking worker's policy rules decided: the policy's hash, the groups
	// whose approvals the run needs and the warnings every view shows. Absent without a policy.
	Rules *guard.RuleDecision `json:"rules,omitempty"`
	// Edit, when set, says that Request is a reviewer's edit of the request the run was
	// started with (Request.Code is the edited code): who edited it, and both digests.
	// Approvals made before the edit no longer count.
	Edit *guard.Edit `json:"edit,omitempty"`
	// RejectedDecisions counts signalled decisions refused while waiting (wrong digest, missing
	// id, a signature that does not verify); LastRejection says why the last one was. Updates
	// refused by the validator never reach the workflow and are not counted (the worker logs
	// them).
	RejectedDecisions int    `json:"rejected_decisions"`
	LastRejection     string `json:"last_rejection,omitempty"`
	// IgnoredDecisions counts signalled decisions that came after the accepted one.
	IgnoredDecisions int `json:"ignored_decisions"`
	// RunAttempts counts sandbox activities scheduled (more than one only after failures from
	// before the code could start).
	RunAttempts int `json:"run_attempts"`
	// LateResultDeadline is when the wait for a late result (SignalLateResult) ends, set when
	// the server timed out the run's sandbox activity after its host claimed the approval.
	// RejectedLateResults counts late results refused while waiting (a receipt that does not
	// verify, or is not of this run, of the timed-out activity or of a held claim);
	// LastLateRejection says why the last one was.
	LateResultDeadline  time.Time `json:"late_result_deadline,omitzero"`
	RejectedLateResults int       `json:"rejected_late_results,omitempty"`
	LastLateRejection   string    `json:"last_late_rejection,omitempty"`
	// Error is the error that ended the run, if any.
	Error string `json:"error,omitempty"`
	// Cancel is the accepted cancel request (the update "cancel"), if any: who asked, why and
	// when.
	Cancel *guard.Cancellation `json:"cancel,omitempty"`
	// Notification says whether reviewers were notified that the run waits (absent when the
	// checking worker has no notification channels). It never changes what the run does.
	Notification *NotifyRecord `json:"notification,omitempty"`
	// Phases is where the run's time went so far, from the workflow's own times and the
	// receipt's (the audit record's Phases, from the history, is the account of a run that
	// ended): a phase not reached yet is absent. Here the queue ends when the workflow sees a
	// host's claim on the approval (the audit record's when a host takes the activity). Absent
	// while checking, and in answers of runs that were waiting when their worker was older.
	Phases *AuditPhases `json:"phases,omitempty"`
}

// DecisionWait is what a run's or a cell's wait for a decision holds (Status, CellStatus): when
// it ends, the decision taken and the approvals counted towards the quorum. Its fields are
// encoded as fields of the status that embeds it.
type DecisionWait struct {
	// ApprovalDeadline is when the wait for a decision ends (zero before the wait).
	ApprovalDeadline time.Time `json:"approval_deadline,omitzero"`
	// Decision is the accepted decision, if any: the denial that ended the wait, or the first
	// approval once the quorum is reached.
	Decision *DecisionRecord `json:"decision,omitempty"`
	// Missing says what approvals the policy rules' groups still need ("1 approval from
	// security"), while the subject waits for them (a run's; a session's groups are in its
	// Rules). Absent when nothing is missing.
	Missing []string `json:"missing,omitempty"`
	// Quorum is how many approvals, by distinct reviewers with distinct keys, the subject needs;
	// Approvals are those it has, in order.
	Quorum    int              `json:"quorum,omitempty"`
	Approvals []DecisionRecord `json:"approvals,omitempty"`
}

// DecisionRecord is an accepted decision as the status reports it. Reviewer is the principal of
// the key whose signature verified.
type DecisionRecord struct {
	ApprovalID string    `json:"approval_id"`
	Approve    bool      `json:"approve"`
	Reviewer   string    `json:"reviewer"`
	Reason     string    `json:"reason,omitempty"`
	Digest     string    `json:"digest,omitempty"`
	Via        string    `json:"via"`
	Time       time.Time `json:"time"`
	// Fingerprint and KeyType name the key that signed; Method is approval.MethodSSH.
	Fingerprint string `json:"fingerprint,omitempty"`
	KeyType     string `json:"key_type,omitempty"`
	Method      string `json:"method,omitempty"`
	// Touched is true when a security key reported user presence; UserVerified when it also
	// verified the user (PIN or biometric).
	Touched      bool      `json:"touched"`
	UserVerified bool      `json:"user_verified,omitempty"`
	Expires      time.Time `json:"expires,omitzero"`
}

// Ways a decision arrives (DecisionRecord.Via).
const (
	ViaSignal = "signal"
	ViaUpdate = "update"
)
