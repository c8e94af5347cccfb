package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/tracing"
)

// startTracing turns on OpenTelemetry traces when the OTEL_EXPORTER_OTLP_* variables name an
// endpoint (internal/tracing): the tracing interceptor goes on conn, so the Temporal client and
// every worker made from it trace each workflow, activity, signal, update and query, and
// sandboxflow's own steps as their children. stop flushes the spans.
func startTracing(ctx context.Context, conn *client.Connection, logger *slog.Logger) (stop func(), err error) {
	tr, err := tracing.On(ctx, "sandboxflow-worker")
	if err != nil {
		return nil, err
	}
	if tr.Interceptor == nil {
		return func() {}, nil
	}
	conn.Interceptors = append(conn.Interceptors, tr.Interceptor)
	logger.Info("tracing on: spans go to the OTLP endpoint of OTEL_EXPORTER_OTLP_*")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			logger.Warn("tracing: spans not flushed", "error", err)
		}
	}, nil
}
