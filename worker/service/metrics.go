package service

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/httpserve"
	"github.com/sandboxflow/sandboxflow/metrics"
)

// startMetrics serves Prometheus metrics on --metrics-listen until ctx ends; without the flag it
// returns nil metrics, which every hook below accepts.
func startMetrics(ctx context.Context, cfg *Options, logger *slog.Logger) (*metrics.Metrics, error) {
	if cfg.MetricsListen == "" {
		return nil, nil
	}
	m := metrics.New()
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", cfg.MetricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	httpserve.Background(ctx, srv, ln, func(err error) { logger.Error("metrics server stopped", "error", err) })
	logger.Info("metrics on http://" + ln.Addr().String() + "/metrics")
	return m, nil
}

// dialTemporal dials like client.Dial, with the SDK's metrics going to m when it is set.
func dialTemporal(ctx context.Context, conn client.Connection, m *metrics.Metrics) (tclient.Client, error) {
	if m == nil {
		return client.Dial(ctx, conn)
	}
	opts, err := conn.Options()
	if err != nil {
		return nil, err
	}
	opts.MetricsHandler = m.TemporalHandler()
	tc, err := tclient.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("client: dial Temporal at %s (namespace %s): %w", opts.HostPort, opts.Namespace, err)
	}
	return tc, nil
}

// metricsSink feeds the sandbox metrics from the activity's events, then passes them on.
func metricsSink(m *metrics.Metrics, next activities.Sink, cfg *Options) activities.Sink {
	if m == nil {
		return next
	}
	return m.Sink(next, metricsLabel(cfg))
}

// serveWaiting adds the gauges of what waits for a person on the workflow task queue, read from
// Temporal's visibility store at scrape time (a worker that runs no workflows serves none).
func serveWaiting(m *metrics.Metrics, cfg *Options, tc tclient.Client) {
	if m == nil || cfg.Role == RoleSandboxes {
		return
	}
	m.WaitingFor([]string{cfg.TaskQueue}, metrics.ReadWaiting(tc), 0)
}

// metricsInterceptors feeds the workflow metrics.
func metricsInterceptors(m *metrics.Metrics) []interceptor.WorkerInterceptor {
	if m == nil {
		return nil
	}
	return []interceptor.WorkerInterceptor{m.WorkerInterceptor()}
}
