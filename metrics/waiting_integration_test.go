//go:build integration

package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/metrics"
)

// The waiting gauges follow runs as they start waiting and as their decisions end the waits,
// read from the server's visibility store by a Metrics that no worker feeds: what any worker
// (or none, after a restart) saw does not matter.
func TestIntegrationWaitingGaugesFollowRuns(t *testing.T) {
	e := agenttest.Setup(t, agenttest.Options{NoStarter: true})
	m := metrics.New()
	m.WaitingFor([]string{e.TaskQueue}, metrics.ReadWaiting(e.Temporal), time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs := "sandboxflow_runs_waiting{task_queue=\"" + e.TaskQueue + "\"} "
	oldest := "sandboxflow_oldest_wait_seconds{task_queue=\"" + e.TaskQueue + "\"} "
	waitFor := func(want string) string {
		t.Helper()
		for {
			body := scrape(t, m)
			if strings.Contains(body, want+"\n") {
				return body
			}
			if ctx.Err() != nil {
				t.Fatalf("scrape never had %q:\n%s", want, grep(body, "waiting"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor(runs + "0")
	var ids []string
	for range 2 {
		s, err := e.Client.Start(ctx, guard.Request{Code: "print(1)"}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.WorkflowID)
	}
	waitFor(runs + "2")
	time.Sleep(1100 * time.Millisecond)
	if age := value(t, scrape(t, m), oldest); age < 1 {
		t.Errorf("oldest wait %v s after more than a second; want at least 1", age)
	}
	agenttest.Decide(t, e, ids[0], true)
	waitFor(runs + "1")
	agenttest.Decide(t, e, ids[1], false)
	body := waitFor(runs + "0")
	if age := value(t, body, oldest); age != 0 {
		t.Errorf("oldest wait %v s with nothing waiting; want 0", age)
	}
}

func value(t *testing.T, body, prefix string) float64 {
	t.Helper()
	for _, l := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return v
		}
	}
	t.Fatalf("scrape lacks %s", prefix)
	return 0
}
