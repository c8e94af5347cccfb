package workflows

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/internal/tracing"
)

// waitSpan records the wait for a decision that began at start as a span (tracing.SpanWait),
// with how it ended: approved, denied, expired or cancelled, and the counts of refused and
// ignored decisions. It changes nothing the workflow does.
func (r *runCode) waitSpan(ctx workflow.Context, start time.Time, decided bool, err error) {
	outcome := "expired"
	switch {
	case err != nil || r.cancel != nil:
		outcome = "cancelled"
	case decided && r.decision.Approve:
		outcome = "approved"
	case decided:
		outcome = "denied"
	}
	tracing.RecordSpan(ctx, tracing.SpanWait, start, attribute.String("sandboxflow.outcome", outcome),
		attribute.Int("sandboxflow.rejected_decisions", r.status.RejectedDecisions),
		attribute.Int("sandboxflow.ignored_decisions", r.status.IgnoredDecisions))
}
