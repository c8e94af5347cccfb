package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// notifyVersion1 is the contract.NotifyVersion under which workflows notify reviewers and RunCode
// sets SandboxConversation.
const notifyVersion1 workflow.Version = 1

// minNotifyWindow is the shortest ScheduleToClose a notification gets, however close its
// deadline.
const minNotifyWindow = time.Second

// notifyPlan returns how this run notifies reviewers: nil when its history is from before
// notifications (contract.NotifyVersion) or the checking worker recorded no channels. It records
// the version marker, so it must be called at the same point of every run.
func notifyPlan(ctx workflow.Context, recorded *contract.NotifyOptions) (enabled bool, opts *contract.NotifyOptions) {
	if workflow.GetVersion(ctx, contract.NotifyVersion, workflow.DefaultVersion, notifyVersion1) < notifyVersion1 {
		return false, nil
	}
	return true, recorded
}

// notifyRun prepares RunCode's notifications and conversation: under contract.NotifyVersion it
// sets SandboxConversation when the request names one, and schedules the notify activity when
// the checking worker has channels. Call it once the run waits (after announce).
func (r *runCode) notifyRun(ctx workflow.Context, check contract.CheckResult) error {
	enabled, opts := notifyPlan(ctx, check.Notify)
	if !enabled {
		return nil
	}
	c := r.checked
	if c.Conversation != "" {
		if err := workflow.UpsertTypedSearchAttributes(ctx, contract.ConversationKey.ValueSet(c.Conversation)); err != nil {
			return err
		}
	}
	if opts == nil {
		return nil
	}
	s := c.Summary()
	in := contract.NotifyInput{
		Event: contract.EventRunAwaiting, WorkflowID: r.status.WorkflowID, RunID: r.status.RunID,
		Digest: c.Digest, Language: c.Language, Code: c.Code, Files: s.Files,
		Network: c.Network, Egress: c.Egress, Secrets: c.Secrets, Image: c.Image, Packages: c.Packages, Metadata: c.Metadata,
		Conversation: c.Conversation, Since: workflow.Now(ctx), Deadline: r.status.ApprovalDeadline,
		PolicyWarnings: policyWarnings(r.status.Rules),
	}
	scheduleNotify(ctx, *opts, in,
		func() bool { return r.decision == nil && r.status.State == contract.StatusAwaitingApproval },
		func(rec contract.NotifyRecord) { r.status.Notification = &rec })
	return nil
}

// notifyCell schedules the notify activity for the session's cell st, which starts waiting now.
func (r *session) notifyCell(ctx workflow.Context, st contract.CellStatus) {
	if r.notify == nil {
		return
	}
	s := r.checked.Summary()
	in := contract.NotifyInput{
		Event: contract.EventCellAwaiting, WorkflowID: r.status.WorkflowID, RunID: r.status.RunID, Cell: st.Cell,
		Digest: st.Digest, Language: st.Language, Code: st.Code, Files: s.Files,
		Network: r.checked.Network, Egress: r.checked.Egress, Secrets: r.checked.Secrets, Image: r.checked.Image, Packages: st.Packages, Metadata: st.Metadata,
		Since: st.Submitted, Deadline: st.ApprovalDeadline, PolicyWarnings: policyWarnings(r.status.Rules),
	}
	i := st.Cell - 1
	scheduleNotify(ctx, *r.notify, in,
		func() bool { return r.status.Cells[i].State == contract.StatusAwaitingApproval },
		func(rec contract.NotifyRecord) { r.status.Cells[i].Notification = &rec })
}

// scheduleNotify runs the notify activity in a coroutine of its own, so the wait for a decision
// goes on beside it: it never blocks, approves or denies anything. The activity is retried with
// backoff up to opts' bounds and the deadline, and cancelled once waiting() turns false (a
// decision came, or the wait ended). record is told its state: pending, then delivered or
// failed; a failure is also logged.
func scheduleNotify(ctx workflow.Context, opts contract.NotifyOptions, in contract.NotifyInput, waiting func() bool, record func(contract.NotifyRecord)) {
	o := opts.WithDefaults()
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: max(in.Deadline.Sub(workflow.Now(ctx)), minNotifyWindow),
		StartToCloseTimeout:    o.StartToCloseTimeout,
		HeartbeatTimeout:       o.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    o.InitialInterval,
			BackoffCoefficient: 2,
			MaximumInterval:    o.MaximumInterval,
			MaximumAttempts:    int32(o.MaximumAttempts),
		},
	})
	actx, cancel := workflow.WithCancel(actx)
	record(contract.NotifyRecord{State: contract.NotifyPending})
	workflow.Go(ctx, func(ctx workflow.Context) {
		f := workflow.ExecuteActivity(actx, contract.NotifyActivityName, in)
		if err := workflow.Await(ctx, func() bool { return f.IsReady() || !waiting() }); err != nil {
			return
		}
		if !f.IsReady() {
			cancel()
			return
		}
		var res contract.NotifyResult
		err := f.Get(ctx, &res)
		var cancelled *temporal.CanceledError
		switch {
		case err == nil:
			record(contract.NotifyRecord{State: contract.NotifyDelivered, Delivered: res.Delivered})
		case errors.As(err, &cancelled):
		default:
			record(contract.NotifyRecord{State: contract.NotifyFailed, Error: err.Error()})
			workflow.GetLogger(ctx).Warn(string(contract.EventNotifyFailed), "event", string(contract.EventNotifyFailed),
				"digest", in.Digest, "cell", in.Cell, "error", err.Error())
			workflow.GetMetricsHandler(ctx).Counter(notifyFailedMetric).Inc(1)
		}
	})
}

// notifyFailedMetric counts notifications that failed after their last attempt (the SDK's
// metrics handler, which skips replays).
const notifyFailedMetric = "sandboxflow_notify_failed"

// policyWarnings is what a notification says of the policy rules' decision: each warning, and
// each group's approvals the subject needs.
func policyWarnings(r *guard.RuleDecision) []string {
	if r == nil {
		return nil
	}
	out := slices.Clone(r.Warnings)
	for _, g := range r.Groups {
		out = append(out, fmt.Sprintf("needs %d approval(s) from %s", g.Approvals, g.Group))
	}
	return out
}
