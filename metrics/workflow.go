package metrics

import (
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// WorkerInterceptor returns the interceptor that feeds the workflow metrics: the final state of
// every RunCode run, the wait for a reviewer, refused egress and refused decisions. It counts
// only while the workflow is not replaying.
func (m *Metrics) WorkerInterceptor() interceptor.WorkerInterceptor {
	return &workerInterceptor{m: m}
}

type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
	m *Metrics
}

func (w *workerInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	switch workflow.GetInfo(ctx).WorkflowType.Name {
	case contract.WorkflowName:
	case contract.SessionWorkflowName:
		return &sessionInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, m: w.m}
	default:
		return next
	}
	return &inbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, m: w.m}
}

// inbound is one RunCode execution's interceptor; its fields are workflow state, set the same way
// on every replay.
type inbound struct {
	interceptor.WorkflowInboundInterceptorBase
	m            *Metrics
	state        string
	waitingSince time.Time
}

func (i *inbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&outboundInterceptor{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, in: i})
}

// ExecuteWorkflow counts the run's final state and refused egress once the workflow returns.
func (i *inbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	res, err := i.Next.ExecuteWorkflow(ctx, in)
	if workflow.IsReplaying(ctx) {
		return res, err
	}
	state := i.state
	if state == "" || state == contract.StatusChecking {
		state = contract.StatusError
	}
	i.m.runs.WithLabelValues(state).Inc()
	if r, ok := res.(guard.Result); ok && r.Egress != nil {
		for _, a := range r.Egress.Attempts {
			if !a.Allowed {
				i.m.egressRefused.Inc()
			}
		}
	}
	return res, err
}

// ValidateUpdate counts decisions the update validator refuses (validators never run on replay).
func (i *inbound) ValidateUpdate(ctx workflow.Context, in *interceptor.UpdateInput) error {
	err := i.Next.ValidateUpdate(ctx, in)
	if rej, ok := contract.RejectionOf(err); ok && in.Name == contract.UpdateDecide {
		i.m.decisionRefusals.WithLabelValues(string(rej.Reason), contract.ViaUpdate).Inc()
	}
	return err
}

// sessionInbound is one Session execution's interceptor: it counts the cell decisions the
// update validator refuses.
type sessionInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	m *Metrics
}

func (i *sessionInbound) ValidateUpdate(ctx workflow.Context, in *interceptor.UpdateInput) error {
	err := i.Next.ValidateUpdate(ctx, in)
	if rej, ok := contract.RejectionOf(err); ok && in.Name == contract.UpdateDecideCell {
		i.m.decisionRefusals.WithLabelValues(string(rej.Reason), contract.ViaUpdate).Inc()
	}
	return err
}

type outboundInterceptor struct {
	interceptor.WorkflowOutboundInterceptorBase
	in *inbound
}

// UpsertTypedSearchAttributes follows SandboxStatus: the time the wait started and how it ended.
func (o *outboundInterceptor) UpsertTypedSearchAttributes(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) error {
	err := o.Next.UpsertTypedSearchAttributes(ctx, updates...)
	state, ok := temporal.NewSearchAttributes(updates...).GetKeyword(contract.StatusKey)
	if err != nil || !ok || state == o.in.state {
		return err
	}
	prev := o.in.state
	o.in.state = state
	now := workflow.Now(ctx)
	switch {
	case state == contract.StatusAwaitingApproval:
		o.in.waitingSince = now
	case prev == contract.StatusAwaitingApproval && !workflow.IsReplaying(ctx):
		decision := state
		if state == contract.StatusRunning {
			decision = "approved"
		}
		o.in.m.approvalWait.WithLabelValues(decision).Observe(now.Sub(o.in.waitingSince).Seconds())
	}
	return err
}

// GetLogger watches the workflow's events for refused signalled decisions: an
// approval.rejected record's typed "rejection" (a contract.RejectReason). A signalled decision
// has no answer to read it from, and the workflow's replay-safe logger is how the workflow tells
// of it without recording anything in history.
func (o *outboundInterceptor) GetLogger(ctx workflow.Context) log.Logger {
	return &eventLogger{Logger: o.Next.GetLogger(ctx), ctx: ctx, m: o.in.m}
}

type eventLogger struct {
	log.Logger
	ctx workflow.Context
	m   *Metrics
}

func (l *eventLogger) Info(msg string, keyvals ...any) {
	if msg == string(contract.EventApprovalRejected) && !workflow.IsReplaying(l.ctx) {
		if reason, ok := rejectionOf(keyvals); ok && viaOf(keyvals) == contract.ViaSignal {
			l.m.decisionRefusals.WithLabelValues(string(reason), contract.ViaSignal).Inc()
		}
	}
	l.Logger.Info(msg, keyvals...)
}

// rejectionOf returns the typed reason of an approval.rejected record.
func rejectionOf(keyvals []any) (contract.RejectReason, bool) {
	for k := 0; k+1 < len(keyvals); k += 2 {
		if r, ok := keyvals[k+1].(contract.RejectReason); ok && keyvals[k] == "rejection" {
			return r, true
		}
	}
	return "", false
}

// viaOf returns how an approval.rejected record's decision came.
func viaOf(keyvals []any) string {
	for k := 0; k+1 < len(keyvals); k += 2 {
		if keyvals[k] == "via" {
			v, _ := keyvals[k+1].(string)
			return v
		}
	}
	return ""
}
