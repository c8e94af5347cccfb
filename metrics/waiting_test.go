package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWaitingAgeIsComputedAtScrapeTimeFromACachedRead(t *testing.T) {
	m := New()
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := start
	reads := 0
	var fail error
	m.WaitingFor([]string{"agents"}, func(ctx context.Context, q string) (Waiting, error) {
		reads++
		if q != "agents" {
			t.Errorf("read queue %q; want agents", q)
		}
		return Waiting{Runs: 2, Cells: 1, OldestSince: start.Add(-30 * time.Second)}, fail
	}, time.Minute)
	c := m.waiting
	c.now = func() time.Time { return now }

	wantLines(t, scrape(t, m),
		`sandboxflow_runs_waiting{task_queue="agents"} 2`,
		`sandboxflow_cells_waiting{task_queue="agents"} 1`,
		`sandboxflow_oldest_wait_seconds{task_queue="agents"} 30`,
	)
	now = start.Add(10 * time.Second)
	wantLines(t, scrape(t, m), `sandboxflow_oldest_wait_seconds{task_queue="agents"} 40`)
	if reads != 1 {
		t.Errorf("reads = %d within maxAge; want 1", reads)
	}
	now = start.Add(2 * time.Minute)
	fail = errors.New("visibility down")
	body := scrape(t, m)
	wantLines(t, body, `sandboxflow_waiting_read_errors_total{task_queue="agents"} 1`)
	if got := grepLines(body, "sandboxflow_runs_waiting{"); got != "" {
		t.Errorf("a failed read served %q; want no value", got)
	}
	if reads != 2 {
		t.Errorf("reads = %d after maxAge; want 2", reads)
	}
}

func TestNothingWaitingIsAgeZero(t *testing.T) {
	m := New()
	m.WaitingFor([]string{"q"}, func(context.Context, string) (Waiting, error) { return Waiting{}, nil }, 0)
	wantLines(t, scrape(t, m),
		`sandboxflow_runs_waiting{task_queue="q"} 0`,
		`sandboxflow_oldest_wait_seconds{task_queue="q"} 0`,
	)
}

func TestEscapeQuery(t *testing.T) {
	if got, want := escapeQuery(`a'b\c`), `a\'b\\c`; got != want {
		t.Errorf("escapeQuery = %s; want %s", got, want)
	}
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
