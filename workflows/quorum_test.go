package workflows

import (
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A session's cell takes no edit: a decision that carries one is refused by the validator
// (it would approve the cell as submitted, not the edit), and the genuine approval then runs it.
func TestSessionCellRefusesAnEdit(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	req := sessionRequest()
	settings := h.settings(req)
	h.at(time.Minute, func() { h.submit("print(1)") })
	h.at(2*time.Minute, func() {
		d := guard.CellDigest(settings.Digest, 1, guard.CellCodeDigest(guard.Python, "print(1)"), guard.ChainStart(settings.Digest))
		edited := approve(d)
		edited.Edit = &contract.DecisionEdit{Code: "print(2)", OriginalDigest: d}
		h.expectRejected("a cell's decision with an edit", h.decide(1, edited), contract.RejectEdit)
	})
	h.at(3*time.Minute, func() {
		st := h.status()
		h.expectAccepted("the cell's approval", h.decide(1, approve(st.Cells[0].Digest)))
	})
	h.at(5*time.Minute, func() { h.closeSession() })
	h.run(req)
	boxes := h.backend.Sandboxes()
	if len(boxes) != 1 || len(boxes[0].Ran()) != 1 || boxes[0].Ran()[0].Code != "print(1)" {
		t.Fatalf("sandboxes %d; want one that ran print(1) once", len(boxes))
	}
}
