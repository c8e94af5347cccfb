package metrics

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	tclient "go.temporal.io/sdk/client"
)

// TemporalHandler returns the Temporal SDK metrics handler (client.Options.MetricsHandler) whose
// counters, gauges and timers are served with the other metrics, under the SDK's own names
// (temporal_...). Timers are histograms in seconds.
func (m *Metrics) TemporalHandler() tclient.MetricsHandler {
	return &sdkHandler{c: m.temporal}
}

// timerBuckets are the upper bounds, in seconds, of the SDK's timers.
var timerBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// sdkCollector keeps the SDK's metrics by name and tags and turns them into Prometheus metrics
// when scraped. The SDK uses varying tag sets under one name; a scrape fills absent tags with ""
// so that each family has one label set.
type sdkCollector struct {
	mu     sync.Mutex
	series map[string]*series
}

type series struct {
	name   string
	kind   prometheus.ValueType // CounterValue, GaugeValue, or UntypedValue for a timer
	tags   map[string]string
	value  float64
	count  uint64
	bucket []uint64
}

func newSDKCollector() *sdkCollector { return &sdkCollector{series: map[string]*series{}} }

func (c *sdkCollector) get(name string, kind prometheus.ValueType, tags map[string]string) *series {
	keys := slices.Sorted(maps.Keys(tags))
	var b strings.Builder
	b.WriteString(name)
	for _, k := range keys {
		b.WriteString("\x00" + k + "=" + tags[k])
	}
	id := b.String()
	s, ok := c.series[id]
	if !ok {
		s = &series{name: sanitize(name), kind: kind, tags: tags}
		if kind == prometheus.UntypedValue {
			s.bucket = make([]uint64, len(timerBuckets))
		}
		c.series[id] = s
	}
	return s
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, name)
}

// Describe sends nothing: the collector is unchecked, as its series appear over time.
func (c *sdkCollector) Describe(chan<- *prometheus.Desc) {}

// Collect sends every series, each family with the union of its tags as labels.
func (c *sdkCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	labels := map[string]map[string]bool{}
	for _, s := range c.series {
		if labels[s.name] == nil {
			labels[s.name] = map[string]bool{}
		}
		for k := range s.tags {
			labels[s.name][sanitize(k)] = true
		}
	}
	for _, s := range c.series {
		names := slices.Sorted(maps.Keys(labels[s.name]))
		values := make([]string, len(names))
		for i, n := range names {
			for k, v := range s.tags {
				if sanitize(k) == n {
					values[i] = v
				}
			}
		}
		c.send(ch, s, names, values)
	}
}

func (c *sdkCollector) send(ch chan<- prometheus.Metric, s *series, names, values []string) {
	if s.kind != prometheus.UntypedValue {
		desc := prometheus.NewDesc(s.name, "Temporal SDK metric "+s.name+".", names, nil)
		ch <- prometheus.MustNewConstMetric(desc, s.kind, s.value, values...)
		return
	}
	desc := prometheus.NewDesc(s.name+"_seconds", "Temporal SDK timer "+s.name+", in seconds.", names, nil)
	buckets := make(map[float64]uint64, len(timerBuckets))
	for i, ub := range timerBuckets {
		buckets[ub] = s.bucket[i]
	}
	ch <- prometheus.MustNewConstHistogram(desc, s.count, s.value, buckets, values...)
}

type sdkHandler struct {
	c    *sdkCollector
	tags map[string]string
}

func (h *sdkHandler) WithTags(tags map[string]string) tclient.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return &sdkHandler{c: h.c, tags: merged}
}

func (h *sdkHandler) Counter(name string) tclient.MetricsCounter {
	return counterFunc(func(d int64) {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		h.c.get(name, prometheus.CounterValue, h.tags).value += float64(d)
	})
}

func (h *sdkHandler) Gauge(name string) tclient.MetricsGauge {
	return gaugeFunc(func(v float64) {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		h.c.get(name, prometheus.GaugeValue, h.tags).value = v
	})
}

func (h *sdkHandler) Timer(name string) tclient.MetricsTimer {
	return timerFunc(func(d time.Duration) {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		s := h.c.get(name, prometheus.UntypedValue, h.tags)
		s.count++
		s.value += d.Seconds()
		for i, ub := range timerBuckets {
			if d.Seconds() <= ub {
				s.bucket[i]++
			}
		}
	})
}

type (
	counterFunc func(int64)
	gaugeFunc   func(float64)
	timerFunc   func(time.Duration)
)

func (f counterFunc) Inc(d int64)          { f(d) }
func (f gaugeFunc) Update(v float64)       { f(v) }
func (f timerFunc) Record(d time.Duration) { f(d) }
