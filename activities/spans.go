package activities

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/tracing"
)

// The sandbox host's spans (tracing.SpanCheck, SpanClaim, SpanRun), children of the activity's
// span when the worker traces (internal/tracing). Their attributes are sizes, counts, exit codes
// and outcomes: never code, env values or output.

// checkSpan starts the span of the policy check of r.
func checkSpan(ctx context.Context, r guard.Request) trace.Span {
	var inputBytes int
	for _, b := range r.Files {
		inputBytes += len(b)
	}
	_, span := tracing.Start(ctx, tracing.SpanCheck,
		attribute.Int("sandboxflow.code_bytes", len(r.Code)), attribute.Int("sandboxflow.input_files", len(r.Files)),
		attribute.Int("sandboxflow.input_bytes", inputBytes), attribute.Int("sandboxflow.env_vars", len(r.Env)),
		attribute.Bool("sandboxflow.network", r.Network), attribute.Int("sandboxflow.egress_patterns", len(r.Egress)))
	return span
}

// endSpan ends span with err's guard type, if any.
func endSpan(span trace.Span, err error) {
	tracing.End(span, err, guard.TypeOf(err))
}

// runSpan starts the span of the code's run on the guarded backend.
func runSpan(ctx context.Context, c guard.Checked) (context.Context, trace.Span) {
	return tracing.Start(ctx, tracing.SpanRun,
		attribute.String("sandboxflow.backend", c.Backend), attribute.String("sandboxflow.language", c.Language),
		attribute.Int64("sandboxflow.timeout_ms", c.Limits.Timeout.Milliseconds()))
}

// endRunSpan ends the run's span with what the result measured.
func endRunSpan(span trace.Span, res guard.Result, err error) {
	if err == nil {
		span.SetAttributes(attribute.String("sandboxflow.outcome", res.Outcome.String()), attribute.Int("sandboxflow.exit_code", res.ExitCode),
			attribute.Int("sandboxflow.stdout_bytes", len(res.Stdout)), attribute.Int("sandboxflow.stderr_bytes", len(res.Stderr)),
			attribute.Bool("sandboxflow.stdout_truncated", res.StdoutTruncated), attribute.Bool("sandboxflow.stderr_truncated", res.StderrTruncated),
			attribute.Int("sandboxflow.files", len(res.Files)), attribute.Int64("sandboxflow.duration_ms", res.Duration.Milliseconds()))
	}
	endSpan(span, err)
}
