package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Scrape returns the metrics as Prometheus serves them.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(body, l+"\n") {
			t.Errorf("scrape lacks %q", l)
		}
	}
}

func TestSinkFeedsSandboxMetrics(t *testing.T) {
	m := New()
	mem := &activities.MemorySink{}
	s := m.Sink(mem, "runsc")
	ctx := context.Background()
	s.Emit(ctx, activities.Event{Type: contract.EventSandboxStarted, Data: map[string]any{"backend": "docker"}})
	s.Emit(ctx, activities.Event{Type: contract.EventSandboxStarted, Data: map[string]any{"backend": "docker"}})
	s.Emit(ctx, activities.Event{Type: contract.EventSandboxFinished, Data: map[string]any{"backend": "docker", "duration_ms": int64(1200), "limit_killed": "memory_limit"}})
	wantLines(t, scrape(t, m),
		`sandboxflow_sandboxes_in_use 1`,
		`sandboxflow_limit_kills_total{kind="memory_limit"} 1`,
		`sandboxflow_sandbox_run_seconds_count{backend="docker",runtime="runsc"} 1`,
		`sandboxflow_sandbox_run_seconds_sum{backend="docker",runtime="runsc"} 1.2`,
	)
	if got := len(mem.Events()); got != 3 {
		t.Errorf("next sink got %d events; want 3", got)
	}
}

func TestSinkCountsRefusedApprovals(t *testing.T) {
	m := New()
	s := m.Sink(nil, "runc")
	ctx := context.Background()
	for _, r := range []guard.RefusedReason{guard.RefusedAlreadyUsed, guard.RefusedAlreadyUsed, guard.RefusedNotVerified} {
		s.Emit(ctx, activities.Event{Type: contract.EventSandboxRefused, Data: map[string]any{"reason": r}})
	}
	body := scrape(t, m)
	wantLines(t, body, `sandboxflow_approval_refusals_total{reason="already_used"} 2`, `sandboxflow_approval_refusals_total{reason="not_verified"} 1`,
		`sandboxflow_sandboxes_in_use 0`)
}

// A policy refusal is counted by what refused: "rule" for any rule (the operator's names stay
// out of the labels), else the cap's name.
func TestSinkCountsPolicyRefusals(t *testing.T) {
	m := New()
	s := m.Sink(nil, "runc")
	ctx := context.Background()
	for _, d := range []map[string]any{{"rule": "no-raw-sockets"}, {"rule": "other"}, {"cap": "waiting.per_agent"}} {
		s.Emit(ctx, activities.Event{Type: contract.EventPolicyRefused, Data: d})
	}
	wantLines(t, scrape(t, m), `sandboxflow_policy_refusals_total{by="rule"} 2`, `sandboxflow_policy_refusals_total{by="waiting.per_agent"} 1`)
}

func TestTemporalHandler(t *testing.T) {
	m := New()
	h := m.TemporalHandler()
	h.WithTags(map[string]string{"namespace": "default", "task_queue": "q"}).Counter("temporal_request").Inc(2)
	h.Counter("temporal_request").Inc(1)
	h.Gauge("temporal_num_pollers").Update(3)
	h.WithTags(map[string]string{"operation": "Poll"}).Timer("temporal_request_latency").Record(20 * time.Millisecond)
	wantLines(t, scrape(t, m),
		`temporal_request{namespace="default",task_queue="q"} 2`,
		`temporal_request{namespace="",task_queue=""} 1`,
		`temporal_num_pollers 3`,
		`temporal_request_latency_seconds_count{operation="Poll"} 1`,
	)
}

// TestRejectionOfReadsTheTypedReason: a refused signalled decision is counted by the typed reason
// the workflow logs with it, never by sorting its text.
func TestRejectionOfReadsTheTypedReason(t *testing.T) {
	kv := []any{"event", "approval.rejected", "why", "wrong digest: the decision is for ...", "rejection", contract.RejectWrongDigest, "via", contract.ViaSignal}
	if r, ok := rejectionOf(kv); !ok || r != contract.RejectWrongDigest || viaOf(kv) != contract.ViaSignal {
		t.Errorf("rejectionOf = %q, %t, via %q; want wrong_digest by signal", r, ok, viaOf(kv))
	}
	text := []any{"why", "wrong digest: the decision is for ...", "rejection", "wrong_digest"}
	if r, ok := rejectionOf(text); ok {
		t.Errorf("an untyped rejection was read as %q", r)
	}
}

func TestWarmPoolMetrics(t *testing.T) {
	m := New()
	idle, taken := 2, uint64(5)
	m.WarmPool(func() (int, uint64, uint64, uint64) { return idle, taken, 1, 3 })
	wantLines(t, scrape(t, m), "sandboxflow_warm_sandboxes 2", "sandboxflow_warm_sandboxes_taken_total 5",
		"sandboxflow_cold_sandboxes_total 1", "sandboxflow_warm_sandboxes_discarded_total 3")
	idle, taken = 1, 6 // read again at each scrape
	wantLines(t, scrape(t, m), "sandboxflow_warm_sandboxes 1", "sandboxflow_warm_sandboxes_taken_total 6")
}

// TestSinkFeedsSessionMetrics: the events of a session host (activities/session.go) feed the
// sessions-open gauge, the cells counter by outcome and the sandbox lifetime histogram; a
// sandbox.finished of a run (no cell) is no cell.
func TestSinkFeedsSessionMetrics(t *testing.T) {
	m := New()
	s := m.Sink(nil, "runc")
	ctx := context.Background()
	s.Emit(ctx, activities.Event{Type: contract.EventSessionOpened, Data: map[string]any{"sandbox_id": "a"}})
	s.Emit(ctx, activities.Event{Type: contract.EventSessionOpened, Data: map[string]any{"sandbox_id": "b"}})
	for _, d := range []map[string]any{
		{"cell": 1, "outcome": "succeeded", "duration_ms": int64(10)},
		{"cell": 2, "outcome": "succeeded", "duration_ms": int64(10)},
		{"cell": 3, "outcome": "timed_out", "duration_ms": int64(10)},
		{"cell": 4, "error_type": guard.TypeIntegrationError, "duration_ms": int64(10)},
		{"outcome": "succeeded", "duration_ms": int64(10)},
	} {
		s.Emit(ctx, activities.Event{Type: contract.EventSandboxStarted, Data: map[string]any{}})
		s.Emit(ctx, activities.Event{Type: contract.EventSandboxFinished, Data: d})
	}
	s.Emit(ctx, activities.Event{Type: contract.EventSessionEnded, Data: map[string]any{"sandbox_id": "a", "lifetime_ms": int64(90_000)}})
	wantLines(t, scrape(t, m),
		`sandboxflow_sessions_open 1`,
		`sandboxflow_session_cells_total{outcome="succeeded"} 2`,
		`sandboxflow_session_cells_total{outcome="timed_out"} 1`,
		`sandboxflow_session_cells_total{outcome="error"} 1`,
		`sandboxflow_session_sandbox_lifetime_seconds_count 1`,
		`sandboxflow_session_sandbox_lifetime_seconds_sum 90`,
		`sandboxflow_sandboxes_in_use 0`,
	)
}

func TestSinkCountsUsageByBackendAndAgent(t *testing.T) {
	m := New()
	s := m.Sink(nil, "runc")
	ctx := context.Background()
	finished := func(agent string, cpuMS int64) {
		d := map[string]any{"backend": "docker", "usage_measured_by": "cgroup", "usage_cpu_time_ms": cpuMS, "usage_wall_time_ms": int64(2000),
			"usage_peak_memory_bytes": int64(100 << 20), "usage_files_bytes": int64(4096), "egress_bytes_out": int64(10), "egress_bytes_in": int64(300)}
		if agent != "" {
			d["agent"] = agent
		}
		s.Emit(ctx, activities.Event{Type: contract.EventSandboxFinished, Data: d})
	}
	finished("claude", 1500)
	finished("claude", 500)
	finished("", 250)
	// A runaway orchestrator inventing names: past MaxAgentLabels, they share one label.
	for i := range MaxAgentLabels + 10 {
		finished(fmt.Sprintf("agent-%d", i), 1000)
	}
	// Events of a backend that measured nothing count only their egress.
	s.Emit(ctx, activities.Event{Type: contract.EventSandboxFinished, Data: map[string]any{"backend": "http", "usage_measured_by": "", "usage_cpu_time_ms": int64(0),
		"egress_bytes_out": int64(7), "egress_bytes_in": int64(0)}})
	body := scrape(t, m)
	wantLines(t, body,
		`sandboxflow_usage_cpu_seconds_total{agent="claude",backend="docker"} 2`,
		`sandboxflow_usage_cpu_seconds_total{agent="none",backend="docker"} 0.25`,
		`sandboxflow_usage_cpu_seconds_total{agent="other",backend="docker"} 11`,
		`sandboxflow_usage_wall_seconds_total{agent="claude",backend="docker"} 4`,
		`sandboxflow_usage_egress_bytes_total{agent="claude",backend="docker",direction="in"} 600`,
		`sandboxflow_usage_egress_bytes_total{agent="none",backend="http",direction="out"} 7`,
		`sandboxflow_usage_peak_memory_bytes_bucket{agent="claude",backend="docker",le="1.34217728e+08"} 2`,
		`sandboxflow_usage_files_bytes_count{agent="claude",backend="docker"} 2`,
	)
	if n := strings.Count(body, "sandboxflow_usage_cpu_seconds_total{"); n != MaxAgentLabels+2 {
		t.Errorf("got %d cpu series; want %d (the kept names, none and other)", n, MaxAgentLabels+2)
	}
	if strings.Contains(body, `usage_cpu_seconds_total{agent="none",backend="http"}`) {
		t.Error("a backend that measured no CPU has a CPU series")
	}
}
