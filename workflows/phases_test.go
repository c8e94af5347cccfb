package workflows

import (
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// msOf is *p, or -1 when the phase is absent.
func msOf(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// TestStatusPhasesFollowARun: the status query says where a run's time went as it goes: the
// check alone while it waits, the wait (the minute before the decision) once it is scheduled,
// and the run and the receipt from the host's receipt once it has ended.
func TestStatusPhasesFollowARun(t *testing.T) {
	host := hosttest.New(t, "host-a")
	cfg := activities.Config{ReviewersFile: reviewertest.WriteAllowedSigners(t, t.TempDir(), testReviewer()), Policy: testPolicy}
	withHost(host)(&cfg)
	h := newHarness(t, okBackend(), cfg)
	req := pyRequest()
	dg := h.digest(req)
	h.at(30*time.Second, func() {
		p := h.status().Phases
		if p == nil || p.CheckMS == nil || p.WaitMS != nil || p.RunMS != nil {
			t.Errorf("phases while waiting = %+v; want the check's only", p)
		}
	})
	h.at(time.Minute, func() { h.signal(decision(id1, dg, true)) })
	h.run(req)
	if _, err := h.result(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	p := h.status().Phases
	if p == nil {
		t.Fatal("final status has no phases")
	}
	if got := msOf(p.WaitMS); got < 59_000 || got > 61_000 {
		t.Errorf("wait = %d ms; want about a minute", got)
	}
	if msOf(p.CheckMS) < 0 || msOf(p.QueueMS) < 0 || msOf(p.RunMS) < 0 || msOf(p.ReceiptMS) < 0 {
		t.Errorf("final phases = check %d, queue %d, run %d, receipt %d; want each present", msOf(p.CheckMS), msOf(p.QueueMS), msOf(p.RunMS), msOf(p.ReceiptMS))
	}
}

// TestStatusPhasesOfADeniedRun: a denied run's wait runs to its denial, and it has no queue.
func TestStatusPhasesOfADeniedRun(t *testing.T) {
	h := newHarness(t, okBackend(), activities.Config{})
	req := pyRequest()
	h.at(2*time.Minute, func() { h.signal(decision(id1, h.digest(req), false)) })
	h.run(req)
	p := h.status().Phases
	if p == nil || msOf(p.WaitMS) < 119_000 || msOf(p.WaitMS) > 121_000 || p.QueueMS != nil || p.RunMS != nil {
		t.Fatalf("phases = %+v; want a two-minute wait and nothing after", p)
	}
}

// TestCellStatusPhases: each cell's status says where its time went: its wait for its own
// decision, and its queue and run once it ran.
func TestCellStatusPhases(t *testing.T) {
	host := hosttest.New(t, "host-a")
	h := newSessionHarnessWith(t, sessionPolicy, withHost(host))
	req := sessionRequest()
	h.at(time.Minute, func() { h.submit("x = 41") })
	h.at(90*time.Second, func() {
		p := h.status().Cells[0].Phases
		if p == nil || p.CheckMS == nil || p.WaitMS != nil {
			t.Errorf("cell 1's phases while it waits = %+v; want the check's only", p)
		}
	})
	h.at(4*time.Minute, func() {
		h.expectAccepted("approve cell 1", h.decide(1, approve(h.status().Cells[0].Digest)))
	})
	h.at(6*time.Minute, func() { h.closeSession() })
	h.run(req)
	res, err := h.result()
	if err != nil || len(res.Cells) != 1 {
		t.Fatalf("result %+v, %v; want one cell", res, err)
	}
	p := h.status().Cells[0].Phases
	if p == nil {
		t.Fatal("cell 1 has no phases")
	}
	if got := msOf(p.WaitMS); got < 179_000 || got > 181_000 {
		t.Errorf("cell 1 waited %d ms; want about three minutes", got)
	}
	if msOf(p.QueueMS) < 0 || msOf(p.RunMS) < 0 || msOf(p.ReceiptMS) < 0 || p.SandboxStartMS != nil {
		t.Errorf("cell 1's phases = %+v; want a queue, a run and a receipt, no sandbox start", p)
	}
}
