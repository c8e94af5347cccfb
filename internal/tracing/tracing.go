// Package tracing turns on OpenTelemetry traces for a worker or a client process when the
// standard OTEL_EXPORTER_OTLP_* variables name an endpoint, and leaves them off otherwise. It
// gives the Temporal SDK's OpenTelemetry interceptor (go.temporal.io/sdk/contrib/opentelemetry),
// which traces every workflow, activity, signal, update and query and carries the trace context
// in Temporal headers, and the spans of sandboxflow's own steps: Start in activities and
// backends, RecordSpan in workflow code. Every attribute is content-free (sizes, counts, exit
// codes, outcomes): never code, env values or output.
package tracing

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// Names of sandboxflow's own spans.
const (
	SpanCheck       = "sandboxflow.check"         // applying the policy to the request
	SpanWait        = "sandboxflow.wait_decision" // the wait for a reviewer's decision
	SpanClaim       = "sandboxflow.claim"         // the sandbox host claiming the approval
	SpanTakeSandbox = "sandboxflow.take_sandbox"  // the backend taking a sandbox (a container)
	SpanRun         = "sandboxflow.run"           // the code running, up to its result
)

// instrumentation names the tracer of sandboxflow's own spans.
const instrumentation = "github.com/sandboxflow/sandboxflow"

// spanKey is where the interceptor keeps the current span in a workflow context (its
// SpanContextKey), so that RecordSpan finds the workflow's span.
type spanKey struct{}

// Setup is what On made: the interceptor to give the Temporal client (nil when tracing is
// off: nothing to add) and Shutdown, which flushes and stops the exporter.
type Setup struct {
	Interceptor interceptor.Interceptor
	Shutdown    func(context.Context) error
}

// Enabled reports whether the environment asks for traces: an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), OTEL_TRACES_EXPORTER is
// not "none" and OTEL_SDK_DISABLED is not "true".
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// On returns the tracing interceptor, exporting over OTLP as the OTEL_EXPORTER_OTLP_* variables
// say (endpoint, headers, timeout, compression, certificates; OTEL_EXPORTER_OTLP_PROTOCOL or
// ..._TRACES_PROTOCOL "grpc" for gRPC, else HTTP/protobuf), with the resource's service.name
// from OTEL_SERVICE_NAME, else service. When Enabled is false it returns a Setup with no
// interceptor and a Shutdown that does nothing.
func On(ctx context.Context, service string) (Setup, error) {
	off := Setup{Shutdown: func(context.Context) error { return nil }}
	if !Enabled() {
		return off, nil
	}
	var (
		exp *otlptrace.Exporter
		err error
	)
	if protocol() == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return off, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	if name := os.Getenv("OTEL_SERVICE_NAME"); name != "" {
		service = name
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return off, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	icpt, err := NewInterceptor(tp)
	if err != nil {
		_ = tp.Shutdown(ctx)
		return off, fmt.Errorf("tracing: interceptor: %w", err)
	}
	return Setup{Interceptor: icpt, Shutdown: func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("tracing: flush spans: %w", err)
		}
		return nil
	}}, nil
}

// NewInterceptor returns the Temporal SDK's tracing interceptor over tp, keeping the workflow's
// span where RecordSpan finds it. On uses it with the OTLP exporter; tests give their own
// provider.
func NewInterceptor(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	icpt, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:         tp.Tracer("temporal-sdk-go"),
		SpanContextKey: spanKey{},
	})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return icpt, nil
}

func protocol() string {
	if p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" {
		return p
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
}

// Start starts a span of sandboxflow's own as a child of ctx's span (an activity's, which the
// interceptor put there), with the tracer provider that span came from: a context with no span
// gives a span that records nothing. attrs must be content-free.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(instrumentation)
	return tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// End ends span, recording err when it is not nil by its type only (errType, such as
// guard.TypeOf's name), never its text, which can quote code or output.
func End(span trace.Span, err error, errType string) {
	if err != nil {
		if errType == "" {
			errType = fmt.Sprintf("%T", err)
		}
		span.SetAttributes(attribute.String("error.type", errType))
		span.SetStatus(codes.Error, errType)
	}
	span.End()
}

// RecordSpan records, from workflow code, a span of sandboxflow's own that began at start and
// ends now (workflow time), as a child of the workflow's span. It records nothing while the
// workflow replays (the span was recorded when the history was made) or when tracing is off, and
// changes nothing the workflow does: it is deterministic.
func RecordSpan(ctx workflow.Context, name string, start time.Time, attrs ...attribute.KeyValue) {
	if workflow.IsReplaying(ctx) {
		return
	}
	parent, ok := ctx.Value(spanKey{}).(trace.Span)
	if !ok {
		return
	}
	end := workflow.Now(ctx)
	tracer := parent.TracerProvider().Tracer(instrumentation)
	_, span := tracer.Start(trace.ContextWithSpan(context.Background(), parent), name, //workflowcheck:ignore
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(end)) //workflowcheck:ignore
}
