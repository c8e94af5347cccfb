package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// Waiting is what waits for a person on one task queue now.
type Waiting struct {
	// Runs are the RunCode runs waiting for a decision; Cells the session cells (a session
	// waits for at most one cell at a time).
	Runs, Cells int
	// OldestSince is when the oldest of those waits began; zero when nothing waits.
	OldestSince time.Time
}

// WaitingReader reads what waits on a task queue from a source of truth (ReadWaiting reads
// Temporal's visibility store).
type WaitingReader func(ctx context.Context, taskQueue string) (Waiting, error)

// DefaultWaitingMaxAge is how long a read of what waits serves scrapes before the next read.
const DefaultWaitingMaxAge = 15 * time.Second

// waitingReadTimeout bounds one read of one task queue, made during a scrape.
const waitingReadTimeout = 10 * time.Second

// WaitingFor serves, for each of taskQueues (call it once), the runs and cells waiting for a person and the age
// of the oldest wait (sandboxflow_runs_waiting, sandboxflow_cells_waiting,
// sandboxflow_oldest_wait_seconds), read with read at scrape time and reused for maxAge (zero
// means DefaultWaitingMaxAge). The age is computed at each scrape from the oldest wait's start,
// so it grows between reads. Nothing is kept by workflow code: a replay, a restarted worker or
// a run another worker checked changes nothing of what is served. A failed read serves no value
// for its queue and counts sandboxflow_waiting_read_errors_total.
func (m *Metrics) WaitingFor(taskQueues []string, read WaitingReader, maxAge time.Duration) {
	if maxAge <= 0 {
		maxAge = DefaultWaitingMaxAge
	}
	m.waiting = &waitingCollector{queues: taskQueues, read: read, maxAge: maxAge, now: time.Now, cache: map[string]waitingRead{}}
	m.reg.MustRegister(m.waiting)
}

var (
	runsWaitingDesc = prometheus.NewDesc(Namespace+"_runs_waiting",
		"RunCode runs waiting for a person's decision now, by the workflow's task queue.", []string{"task_queue"}, nil)
	cellsWaitingDesc = prometheus.NewDesc(Namespace+"_cells_waiting",
		"Session cells waiting for a person's decision now, by the session's task queue.", []string{"task_queue"}, nil)
	oldestWaitDesc = prometheus.NewDesc(Namespace+"_oldest_wait_seconds",
		"Age of the oldest wait for a person's decision (a run's or a cell's), 0 when nothing waits, by task queue.", []string{"task_queue"}, nil)
	waitingErrorsDesc = prometheus.NewDesc(Namespace+"_waiting_read_errors_total",
		"Reads of what waits for a person that failed (the scrape then has no waiting values for the queue), by task queue.", []string{"task_queue"}, nil)
)

type waitingRead struct {
	at      time.Time
	waiting Waiting
	err     error
	errors  uint64
}

type waitingCollector struct {
	queues []string
	read   WaitingReader
	maxAge time.Duration
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]waitingRead
}

func (c *waitingCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{runsWaitingDesc, cellsWaitingDesc, oldestWaitDesc, waitingErrorsDesc} {
		ch <- d
	}
}

func (c *waitingCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for _, q := range c.queues {
		r, ok := c.cache[q]
		if !ok || now.Sub(r.at) >= c.maxAge {
			ctx, cancel := context.WithTimeout(context.Background(), waitingReadTimeout)
			r.waiting, r.err = c.read(ctx, q)
			cancel()
			r.at = now
			if r.err != nil {
				r.errors++
				slog.Warn("metrics: read what waits for a person", "task_queue", q, "error", r.err)
			}
			c.cache[q] = r
		}
		ch <- prometheus.MustNewConstMetric(waitingErrorsDesc, prometheus.CounterValue, float64(r.errors), q)
		if r.err != nil {
			continue
		}
		age := 0.0
		if !r.waiting.OldestSince.IsZero() {
			age = max(now.Sub(r.waiting.OldestSince).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(runsWaitingDesc, prometheus.GaugeValue, float64(r.waiting.Runs), q)
		ch <- prometheus.MustNewConstMetric(cellsWaitingDesc, prometheus.GaugeValue, float64(r.waiting.Cells), q)
		ch <- prometheus.MustNewConstMetric(oldestWaitDesc, prometheus.GaugeValue, age, q)
	}
}

// VisibilityClient is what ReadWaiting calls of the Temporal client.
type VisibilityClient interface {
	ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
}

// maxWaitingPages bounds one read: at most this many pages of waiting workflows are listed.
const maxWaitingPages = 20

// ReadWaiting returns a WaitingReader over Temporal's visibility store: the workflows on the
// queue whose SandboxStatus is awaiting_approval (client.PendingQuery), as the workflows
// themselves set it. A run's wait is taken to begin at its start (its check takes seconds); a
// session's waiting cell is read from the session's status query (its submit time), so a
// session open for hours whose cell waits a minute counts a minute. Visibility is eventually
// consistent: a wait that began or ended a moment ago may show a second or so late.
func ReadWaiting(tc VisibilityClient) WaitingReader {
	return func(ctx context.Context, taskQueue string) (Waiting, error) {
		var w Waiting
		query := fmt.Sprintf("%s AND TaskQueue = '%s'", client.PendingQuery, escapeQuery(taskQueue))
		var token []byte
		for range maxWaitingPages {
			resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
			if err != nil {
				return Waiting{}, fmt.Errorf("metrics: list waiting workflows on %s: %w", taskQueue, err)
			}
			for _, e := range resp.GetExecutions() {
				since := e.GetStartTime().AsTime()
				if e.GetType().GetName() == contract.SessionWorkflowName {
					w.Cells++
					if s, ok := cellWaitingSince(ctx, tc, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()); ok {
						since = s
					}
				} else {
					w.Runs++
				}
				if w.OldestSince.IsZero() || since.Before(w.OldestSince) {
					w.OldestSince = since
				}
			}
			if token = resp.GetNextPageToken(); len(token) == 0 {
				break
			}
		}
		return w, nil
	}
}

// cellWaitingSince is when the session's waiting cell was submitted, read from its status query;
// false when the query fails (the session's start is used instead, which is never later).
func cellWaitingSince(ctx context.Context, tc VisibilityClient, workflowID, runID string) (time.Time, bool) {
	v, err := tc.QueryWorkflow(ctx, workflowID, runID, contract.QuerySessionStatus)
	if err != nil {
		return time.Time{}, false
	}
	var st contract.SessionStatus
	if v.Get(&st) != nil {
		return time.Time{}, false
	}
	for _, c := range st.Cells {
		if c.State == contract.StatusAwaitingApproval && !c.Submitted.IsZero() {
			return c.Submitted, true
		}
	}
	return time.Time{}, false
}

// escapeQuery escapes a value for a single-quoted visibility query string.
func escapeQuery(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '\'' || r == '\\' {
			out = append(out, '\\')
		}
		out = append(out, r)
	}
	return string(out)
}
