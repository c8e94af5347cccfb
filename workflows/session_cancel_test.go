package workflows

import (
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
)

func (h *sessionHarness) cancelCell(cell int, by string) *outcome {
	return h.update(contract.UpdateCancelCell, contract.CancelCell{Cell: cell, CancelRequest: contract.CancelRequest{By: by, Reason: "enough"}}, nil)
}

// TestSessionCancelWaitingCell: a cell cancelled while it waits for its decision ends cancelled,
// with nothing run and who asked recorded; a decision for it is then refused, and the session
// takes the next cell. A cancel of another cell, of an ended one or without a name is refused.
func TestSessionCancelWaitingCell(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	var digest string
	h.at(time.Minute, func() { h.submit("print('one')") })
	h.at(90*time.Second, func() {
		digest = h.status().Cells[0].Digest
		h.expectRejectedCancel("a cell the session has not", h.cancelCell(2, "agent-7"))
		h.expectRejectedCancel("no one", h.cancelCell(1, ""))
		h.expectAcceptedCancel("cancel 1", h.cancelCell(1, "agent-7"))
	})
	h.at(2*time.Minute, func() {
		st := h.status()
		if c := st.Cells[0]; c.State != contract.StatusCancelled || c.Cancel == nil || c.Cancel.By != "agent-7" || c.Result != nil {
			t.Errorf("cell 1 after its cancel: %s, cancel %+v, result %v; want cancelled by agent-7, nothing run", c.State, c.Cancel, c.Result)
		}
		h.expectRejected("approval of the cancelled cell", h.decide(1, approve(digest)), contract.RejectNotWaiting)
		h.expectRejectedCancel("the cancelled cell again", h.cancelCell(1, "agent-7"))
		h.submit("print('two')")
	})
	h.at(3*time.Minute, func() { h.expectAccepted("approve 2", h.decide(2, approve(h.status().Cells[1].Digest))) })
	h.at(5*time.Minute, func() { h.closeSession() })
	h.run(sessionRequest())
	res, err := h.result()
	if err != nil {
		t.Fatal(err)
	}
	ran := h.backend.Sandboxes()[0].Ran()
	if len(ran) != 1 || ran[0].Index != 2 || res.Cells[1].State != contract.StatusSucceeded {
		t.Fatalf("ran %+v, cell 2 %s; want only cell 2, succeeded", ran, res.Cells[1].State)
	}
}

func (h *sessionHarness) expectAcceptedCancel(what string, o *outcome) {
	h.t.Helper()
	h.checks = append(h.checks, func() {
		h.t.Helper()
		if accepted, rejected, _, _, _ := o.get(); !accepted || rejected != nil {
			h.t.Errorf("%s: accepted %v, rejected %v; want accepted", what, accepted, rejected)
		}
	})
}

func (h *sessionHarness) expectRejectedCancel(what string, o *outcome) {
	h.t.Helper()
	h.checks = append(h.checks, func() {
		h.t.Helper()
		if _, rejected, _, _, _ := o.get(); rejected == nil {
			h.t.Errorf("cancel of %s: accepted; want refused", what)
		}
	})
}
