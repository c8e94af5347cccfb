package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxAgentLabels is how many distinct agent names (the request's metadata.agent) the usage
// metrics label by their own name, in the order this worker process first saw them; every later
// name is labelled AgentOther, so an orchestrator that invents names cannot grow the series
// without bound. A run without an agent name is labelled AgentNone.
const MaxAgentLabels = 32

// Agent labels besides the names kept.
const (
	AgentOther = "other"
	AgentNone  = "none"
)

// usageMetrics are what runs and cells cost, from the sandbox.finished events' usage figures.
type usageMetrics struct {
	cpu, wall *prometheus.CounterVec
	egress    *prometheus.CounterVec
	peak      *prometheus.HistogramVec
	files     *prometheus.HistogramVec
	agents    agentLabels
}

func newUsageMetrics() *usageMetrics {
	labels := []string{"backend", "agent"}
	mib := float64(1 << 20)
	return &usageMetrics{
		cpu: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "usage_cpu_seconds_total",
			Help: "CPU time that runs and cells used, as the sandbox host measured it (the sandbox's cgroup), by backend and agent."}, labels),
		wall: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "usage_wall_seconds_total",
			Help: "Wall time over which that CPU time was measured, by backend and agent."}, labels),
		egress: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "usage_egress_bytes_total",
			Help: "Bytes the egress proxy relayed for runs and cells, by backend, agent and direction (out, in)."}, []string{"backend", "agent", "direction"}),
		peak: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "usage_peak_memory_bytes",
			Help:    "Peak memory of each run or cell above its idle sandbox, by backend and agent.",
			Buckets: []float64{8 * mib, 32 * mib, 64 * mib, 128 * mib, 256 * mib, 512 * mib, 1024 * mib, 2048 * mib, 4096 * mib}}, labels),
		files: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "usage_files_bytes",
			Help:    "What each run's or cell's writable folders held when its code ended, by backend and agent.",
			Buckets: []float64{0, 64 << 10, mib, 16 * mib, 64 * mib, 256 * mib, 1024 * mib}}, labels),
	}
}

func (u *usageMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{u.cpu, u.wall, u.egress, u.peak, u.files}
}

// observe counts one sandbox.finished event's usage. Events without measured figures
// (usage_measured_by "") count only their egress bytes.
func (u *usageMetrics) observe(data map[string]any) {
	backend, _ := data["backend"].(string)
	name, _ := data["agent"].(string)
	agent := u.agents.label(name)
	for dir, key := range map[string]string{"out": "egress_bytes_out", "in": "egress_bytes_in"} {
		if n, ok := data[key].(int64); ok && n > 0 {
			u.egress.WithLabelValues(backend, agent, dir).Add(float64(n))
		}
	}
	if by, _ := data["usage_measured_by"].(string); by == "" {
		return
	}
	ms := func(k string) float64 { v, _ := data[k].(int64); return float64(v) / 1000 }
	bytes := func(k string) float64 { v, _ := data[k].(int64); return float64(v) }
	u.cpu.WithLabelValues(backend, agent).Add(ms("usage_cpu_time_ms"))
	u.wall.WithLabelValues(backend, agent).Add(ms("usage_wall_time_ms"))
	u.peak.WithLabelValues(backend, agent).Observe(bytes("usage_peak_memory_bytes"))
	u.files.WithLabelValues(backend, agent).Observe(bytes("usage_files_bytes"))
}

// agentLabels keeps the first MaxAgentLabels agent names seen.
type agentLabels struct {
	mu   sync.Mutex
	kept map[string]bool
}

// label is name's label value.
func (a *agentLabels) label(name string) string {
	if name == "" {
		return AgentNone
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.kept == nil {
		a.kept = map[string]bool{}
	}
	if a.kept[name] {
		return name
	}
	if len(a.kept) < MaxAgentLabels && name != AgentOther && name != AgentNone {
		a.kept[name] = true
		return name
	}
	return AgentOther
}
