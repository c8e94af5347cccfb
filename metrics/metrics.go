// Package metrics serves Prometheus metrics for operators: runs by final state, the wait for a
// reviewer, sandbox run durations, limit kills, sandboxes in use, refused egress and refused
// decisions, sessions open, session cells run and session sandbox lifetimes, what runs and cells
// cost (by backend and a bounded set of agent names), and the Temporal SDK's own metrics.
//
// Sandbox metrics come from the activities' events (Metrics.Sink wraps the worker's Sink); workflow
// metrics from a worker interceptor (Metrics.WorkerInterceptor) that counts only when the workflow
// is not replaying, so a replay never counts a run twice in one process.
// What waits for a person now (Metrics.WaitingFor) is read from Temporal's visibility store at
// scrape time, never kept by workflow code.
package metrics

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Namespace prefixes every sandboxflow metric.
const Namespace = "sandboxflow"

// Metrics holds the collectors of one worker process. Create it with New.
type Metrics struct {
	reg              *prometheus.Registry
	runs             *prometheus.CounterVec
	approvalWait     *prometheus.HistogramVec
	sandboxDuration  *prometheus.HistogramVec
	limitKills       *prometheus.CounterVec
	inUse            prometheus.Gauge
	egressRefused    prometheus.Counter
	decisionRefusals *prometheus.CounterVec
	approvalRefusals *prometheus.CounterVec
	policyRefusals   *prometheus.CounterVec
	sessionsOpen     prometheus.Gauge
	cellsRun         *prometheus.CounterVec
	sandboxLifetime  prometheus.Histogram
	temporal         *sdkCollector
	usage            *usageMetrics
	waiting          *waitingCollector // set by WaitingFor
}

// New returns metrics registered on a registry of their own, with Go and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "runs_total",
			Help: "RunCode runs that ended, by final state (succeeded, failed, timed_out, denied, expired, cancelled, error)."}, []string{"state"}),
		approvalWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "approval_wait_seconds",
			Help:    "Time from a run's announcement to the end of its wait for a reviewer, by how the wait ended.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600}}, []string{"decision"}),
		sandboxDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "sandbox_run_seconds",
			Help:    "Duration of sandbox runs (the activity's own measure), by backend and runtime.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, []string{"backend", "runtime"}),
		limitKills: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "limit_kills_total",
			Help: "Runs ended by a resource limit of the sandbox, by kind (memory_limit, pids_limit)."}, []string{"kind"}),
		inUse: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "sandboxes_in_use",
			Help: "Sandboxes this worker runs now."}),
		egressRefused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "egress_refused_total",
			Help: "Connection attempts from sandboxes that the egress policy refused."}),
		decisionRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "decision_refusals_total",
			Help: "Reviewer decisions refused, by reason and by how they came (signal, update)."}, []string{"reason", "via"}),
		approvalRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "approval_refusals_total",
			Help: "Approved runs whose approval a sandbox host refused (nothing ran), by reason (no_approval, mismatch, not_verified, not_scheduled, already_used)."}, []string{"reason"}),
		policyRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "policy_refusals_total",
			Help: "Requests the policy refused at their check (nothing waited or ran), by what refused: rule, or the cap (waiting.per_agent, waiting.total, running.per_agent, running.total)."}, []string{"by"}),
		sessionsOpen: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "sessions_open",
			Help: "Session sandboxes this sandbox host keeps now."}),
		cellsRun: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "session_cells_total",
			Help: "Session cells this host ran, by outcome (succeeded, failed, timed_out, memory_limit, ..., or error when the host failed)."}, []string{"outcome"}),
		sandboxLifetime: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "session_sandbox_lifetime_seconds",
			Help:    "Lifetime of session sandboxes, from open to removal.",
			Buckets: []float64{1, 10, 30, 60, 300, 600, 1200, 1800, 3600, 2 * 3600, 4 * 3600}}),
		temporal: newSDKCollector(),
		usage:    newUsageMetrics(),
	}
	m.reg.MustRegister(m.runs, m.approvalWait, m.sandboxDuration, m.limitKills, m.inUse, m.egressRefused, m.decisionRefusals, m.approvalRefusals,
		m.policyRefusals, m.sessionsOpen, m.cellsRun, m.sandboxLifetime, m.temporal, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.usage.collectors()...)
	return m
}

// Handler serves the metrics in Prometheus' exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the registry the metrics are on, to add an operator's own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Sink returns an activities.Sink that updates the sandbox metrics and then passes every event to
// next (nil for none). runtime labels the run duration (for example "runc" or "runsc").
func (m *Metrics) Sink(next activities.Sink, runtime string) activities.Sink {
	return &sink{m: m, next: next, runtime: runtime}
}

type sink struct {
	m       *Metrics
	next    activities.Sink
	runtime string
}

// Emit updates the metrics from a sandbox.started, sandbox.finished or sandbox.refused event.
func (s *sink) Emit(ctx context.Context, e activities.Event) {
	switch e.Type {
	case contract.EventSandboxStarted:
		s.m.inUse.Inc()
	case contract.EventSandboxFinished:
		s.m.inUse.Dec()
		backend, _ := e.Data["backend"].(string)
		if ms, ok := e.Data["duration_ms"].(int64); ok {
			s.m.sandboxDuration.WithLabelValues(backend, s.runtime).Observe(float64(ms) / 1000)
		}
		s.m.usage.observe(e.Data)
		if kind, ok := e.Data["limit_killed"].(string); ok && kind != "" {
			s.m.limitKills.WithLabelValues(kind).Inc()
		}
		if _, isCell := e.Data["cell"]; isCell {
			outcome, ok := e.Data["outcome"].(string)
			if !ok {
				outcome = "error"
			}
			s.m.cellsRun.WithLabelValues(outcome).Inc()
		}
	case contract.EventSessionOpened:
		s.m.sessionsOpen.Inc()
	case contract.EventSessionEnded:
		s.m.sessionsOpen.Dec()
		if ms, ok := e.Data["lifetime_ms"].(int64); ok {
			s.m.sandboxLifetime.Observe(float64(ms) / 1000)
		}
	case contract.EventSandboxRefused:
		if reason, ok := e.Data["reason"].(guard.RefusedReason); ok {
			s.m.approvalRefusals.WithLabelValues(string(reason)).Inc()
		}
	case contract.EventPolicyRefused:
		by := "rule" // rule names are the operator's, many: the label stays bounded
		if c, ok := e.Data["cap"].(string); ok {
			by = c
		}
		s.m.policyRefusals.WithLabelValues(by).Inc()
	}
	if s.next != nil {
		s.next.Emit(ctx, e)
	}
}

// WarmPool exposes a sandbox backend's warm pool, read from stats at each scrape: the started
// containers waiting now (sandboxflow_warm_sandboxes), and counters of runs served from the pool,
// runs that started cold, and waiting containers removed unused.
func (m *Metrics) WarmPool(stats func() (idle int, taken, cold, discarded uint64)) {
	m.reg.MustRegister(warmPool{stats: stats})
}

// warmPool collects the warm pool's metrics from one call of stats a scrape, so the four values
// are of the same moment.
type warmPool struct {
	stats func() (idle int, taken, cold, discarded uint64)
}

// warmPoolMetrics are the warm pool's metrics, in the order of stats' results.
var warmPoolMetrics = [...]struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
}{
	{prometheus.NewDesc(Namespace+"_warm_sandboxes", "Started sandboxes waiting in the warm pool for their one run.", nil, nil), prometheus.GaugeValue},
	{prometheus.NewDesc(Namespace+"_warm_sandboxes_taken_total", "Runs served by a sandbox from the warm pool.", nil, nil), prometheus.CounterValue},
	{prometheus.NewDesc(Namespace+"_cold_sandboxes_total", "Runs of a backend with a warm pool that had to create their sandbox (pool empty, image changed, open network).", nil, nil), prometheus.CounterValue},
	{prometheus.NewDesc(Namespace+"_warm_sandboxes_discarded_total", "Waiting sandboxes removed without serving a run (too old, image replaced, ended while waiting, shutdown).", nil, nil), prometheus.CounterValue},
}

func (w warmPool) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range warmPoolMetrics {
		ch <- m.desc
	}
}

func (w warmPool) Collect(ch chan<- prometheus.Metric) {
	idle, taken, cold, discarded := w.stats()
	for i, v := range [...]float64{float64(idle), float64(taken), float64(cold), float64(discarded)} {
		ch <- prometheus.MustNewConstMetric(warmPoolMetrics[i].desc, warmPoolMetrics[i].kind, v)
	}
}
