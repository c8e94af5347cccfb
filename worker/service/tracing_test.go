package service

import (
	"context"
	"log/slog"
	"testing"

	"github.com/sandboxflow/sandboxflow/client"
)

// TestTracingFollowsTheEnvironment: the worker's Temporal connection gets the tracing interceptor
// only when an OTLP endpoint is set.
func TestTracingFollowsTheEnvironment(t *testing.T) {
	for _, endpoint := range []string{"", "http://127.0.0.1:4318"} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
		var conn client.Connection
		stop, err := startTracing(context.Background(), &conn, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		opts, err := conn.Options()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(opts.Interceptors), map[bool]int{false: 0, true: 1}[endpoint != ""]; got != want {
			t.Errorf("endpoint %q: %d interceptors on the Temporal client; want %d", endpoint, got, want)
		}
		stop()
	}
}
