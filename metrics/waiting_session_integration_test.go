//go:build integration

package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
	"github.com/sandboxflow/sandboxflow/metrics"
)

// The waiting-cells gauge through a real dev server and a session in a real sandbox (Docker):
// an open session with no cell counts nothing; its cell waiting for a decision counts one cell
// (not a run), whose wait is aged from the cell's submit, not the session's start; the denial
// ends it.
func TestIntegrationWaitingGaugesFollowACell(t *testing.T) {
	e := sessionenv.Setup(t)
	m := metrics.New()
	m.WaitingFor([]string{e.TaskQueue}, metrics.ReadWaiting(e.Temporal), time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	label := `{task_queue="` + e.TaskQueue + `"} `
	cells, runs, oldest := "sandboxflow_cells_waiting"+label, "sandboxflow_runs_waiting"+label, "sandboxflow_oldest_wait_seconds"+label
	waitFor := func(want ...string) string {
		t.Helper()
		for {
			body := scrape(t, m)
			n := 0
			for _, w := range want {
				if strings.Contains(body, w+"\n") {
					n++
				}
			}
			if n == len(want) {
				return body
			}
			if ctx.Err() != nil {
				t.Fatalf("scrape never had %q:\n%s", want, grep(body, "wait"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	s, err := e.Client.OpenSession(ctx, guard.SessionRequest{Languages: []string{guard.Python}}, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.Client.CloseSession(context.Background(), s.WorkflowID, "test over") })
	for {
		st, err := e.Client.SessionStatus(ctx, s.WorkflowID)
		if err == nil && st.State == contract.SessionOpen {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the session never opened: %+v, %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(cells+"0", runs+"0")
	time.Sleep(3 * time.Second) // the session is older than its cell's wait by this much
	if _, err := e.Client.SubmitCell(ctx, s.WorkflowID, contract.CellRequest{Code: "print('waits')"}); err != nil {
		t.Fatal(err)
	}
	body := waitFor(cells+"1", runs+"0")
	if age := value(t, body, oldest); age >= 3 {
		t.Errorf("oldest wait %v s a moment after the cell's submit; want it aged from the submit, not the session's start 3 s earlier", age)
	}
	sessionenv.Decide(t, e, s.WorkflowID, false)
	body = waitFor(cells+"0", runs+"0")
	if age := value(t, body, oldest); age != 0 {
		t.Errorf("oldest wait %v s with nothing waiting; want 0", age)
	}
}
