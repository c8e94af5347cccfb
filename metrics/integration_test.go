//go:build integration

package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/metrics"
)

func TestIntegrationMetricsAfterRuns(t *testing.T) {
	m := metrics.New()
	e := agenttest.Setup(t, agenttest.Options{
		Sink:         m.Sink(&activities.MemorySink{}, "local"),
		Interceptors: []interceptor.WorkerInterceptor{m.WorkerInterceptor()},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(code string) client.Started {
		s, err := e.Client.Start(ctx, guard.Request{Code: code}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ok := start("print('ok')")
	agenttest.Decide(t, e, ok.WorkflowID, true)
	if _, err := e.Client.Result(ctx, ok.WorkflowID); err != nil {
		t.Fatal(err)
	}
	failed := start("raise SystemExit(3)")
	agenttest.Decide(t, e, failed.WorkflowID, true)
	if _, err := e.Client.Result(ctx, failed.WorkflowID); err != nil {
		t.Fatal(err)
	}
	denied := start("print('no')")
	// A wrong digest is refused by the update's validator and counted.
	f, err := e.Client.Statement(ctx, client.Run(denied.WorkflowID), client.StatementOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.Digest = "sha256:" + strings.Repeat("0", 64)
	wrong, err := client.SignDecision(e.Reviewer.Signer, f, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Decide(ctx, denied.WorkflowID, wrong); err == nil {
		t.Fatal("a wrong digest was accepted")
	}
	// The same decision signalled is rejected by the workflow and counted by its typed reason.
	tc, err := tclient.Dial(tclient.Options{HostPort: e.Address, Namespace: e.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if err := tc.SignalWorkflow(ctx, denied.WorkflowID, "", contract.SignalApproval, wrong); err != nil {
		t.Fatal(err)
	}
	for st, _ := e.Client.Status(ctx, denied.WorkflowID); st.RejectedDecisions == 0; st, _ = e.Client.Status(ctx, denied.WorkflowID) {
		if ctx.Err() != nil {
			t.Fatal("the signalled decision was never rejected")
		}
		time.Sleep(50 * time.Millisecond)
	}
	agenttest.Decide(t, e, denied.WorkflowID, false)
	var ad *guard.ApprovalDenied
	if _, err := e.Client.Result(ctx, denied.WorkflowID); !errors.As(err, &ad) {
		t.Fatalf("denied run: %v; want ApprovalDenied", err)
	}

	body := scrape(t, m)
	for _, want := range []string{
		`sandboxflow_runs_total{state="succeeded"} 1`,
		`sandboxflow_runs_total{state="failed"} 1`,
		`sandboxflow_runs_total{state="denied"} 1`,
		`sandboxflow_approval_wait_seconds_count{decision="approved"} 2`,
		`sandboxflow_approval_wait_seconds_count{decision="denied"} 1`,
		`sandboxflow_sandbox_run_seconds_count{backend="local",runtime="local"} 2`,
		`sandboxflow_sandboxes_in_use 0`,
		`sandboxflow_decision_refusals_total{reason="wrong_digest",via="update"} 1`,
		`sandboxflow_decision_refusals_total{reason="wrong_digest",via="signal"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", grep(body, "sandboxflow_"))
	}
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
