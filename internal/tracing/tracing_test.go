package tracing

import (
	"context"
	"testing"
)

func TestOffUnlessAnEndpointIsSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
	}{
		{"nothing set", nil, false},
		{"an endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"a traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
				t.Setenv(k, tc.env[k])
			}
			s, err := On(context.Background(), "test")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown(context.Background())
			if got := s.Interceptor != nil; got != tc.on || Enabled() != tc.on {
				t.Errorf("interceptor %t, Enabled %t; want %t", got, Enabled(), tc.on)
			}
		})
	}
}

// TestStartWithoutATraceRecordsNothing: a context the interceptor put no span on (tracing off)
// gives spans that record nothing.
func TestStartWithoutATraceRecordsNothing(t *testing.T) {
	_, span := Start(context.Background(), SpanRun)
	if span.IsRecording() {
		t.Error("a span without a trace records")
	}
	End(span, nil, "")
}
