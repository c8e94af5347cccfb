//go:build integration

package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
)

// An audit record says where a run's time went as typed phases (issue 47): a run that ran has
// all six, the wait holds the time before the decision, and together they fit within the run;
// a denied run has a check and a wait, and nothing after.
func TestIntegrationAuditPhases(t *testing.T) {
	e := agenttest.Setup(t, agenttest.Options{NoStarter: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(approve bool) contract.AuditRecord {
		t.Helper()
		s, err := e.Client.Start(ctx, guard.Request{Code: "import time; time.sleep(0.3)"}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		agenttest.Decide(t, e, s.WorkflowID, approve)
		_, _ = e.Client.Result(ctx, s.WorkflowID)
		rec, err := e.Client.Audit(ctx, s.WorkflowID, "")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Phases == nil {
			t.Fatalf("%s's record has no phases", s.WorkflowID)
		}
		return rec
	}

	rec := run(true)
	p := rec.Phases
	t.Logf("phases: %s", mustJSON(t, p))
	for name, v := range map[string]*int64{"check": p.CheckMS, "wait": p.WaitMS, "queue": p.QueueMS,
		"sandbox start": p.SandboxStartMS, "run": p.RunMS, "receipt": p.ReceiptMS} {
		if v == nil {
			t.Errorf("phase %s absent: %+v", name, p)
		}
	}
	if t.Failed() {
		return
	}
	if *p.WaitMS < 400 {
		t.Errorf("wait %d ms; want at least the 500 ms before the decision", *p.WaitMS)
	}
	if *p.RunMS < 250 {
		t.Errorf("run %d ms; want at least the code's 300 ms sleep", *p.RunMS)
	}
	sum := *p.CheckMS + *p.WaitMS + *p.QueueMS + *p.SandboxStartMS + *p.RunMS + *p.ReceiptMS
	if whole := rec.Closed.Sub(rec.Started).Milliseconds(); sum > whole+50 {
		t.Errorf("phases sum to %d ms; the run took %d ms", sum, whole)
	}

	denied := run(false).Phases
	if denied.CheckMS == nil || denied.WaitMS == nil || denied.QueueMS != nil || denied.RunMS != nil {
		t.Errorf("denied run's phases %+v; want a check and a wait only", denied)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
