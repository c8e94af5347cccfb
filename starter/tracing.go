package main

import (
	"context"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/tracing"
)

// startTracing traces the command's Temporal calls when the OTEL_EXPORTER_OTLP_* variables name
// an endpoint: `starter run` then starts the run inside a trace that the workflow, its check,
// the wait for a decision, the claim and the run continue. stop flushes the spans.
func startTracing(ctx context.Context, conn *client.Connection) (stop func(), err error) {
	tr, err := tracing.On(ctx, "sandboxflow-starter")
	if err != nil {
		return nil, err
	}
	if tr.Interceptor == nil {
		return func() {}, nil
	}
	conn.Interceptors = append(conn.Interceptors, tr.Interceptor)
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(sctx)
	}, nil
}
