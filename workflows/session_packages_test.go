package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A cell's packages: cell 1 adds beta to the session's alpha, is approved over the digest that
// binds beta, and reaches the host with them; cell 2 brings beta at another version than cell 1
// brought and is refused (a ToolUsageError naming it) before it waits for anyone; cell 3 names
// beta as cell 1 did and alpha as the settings do, and is taken.
func TestSessionCellPackagesAgainstTheSetSoFar(t *testing.T) {
	policy := sessionPolicy
	policy.Packages = true
	h := newSessionHarness(t, policy)
	hash := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	req := sessionRequest()
	req.Packages = "alpha==1.0 --hash=" + hash("a") + "\n"
	settings := h.settings(req)
	beta := "beta==2.0 --hash=" + hash("b") + "\n"
	submit := func(code, lock string) *outcome {
		return h.update(contract.UpdateSubmitCell, contract.CellRequest{Code: code, Packages: lock}, nil)
	}
	var refused, taken *outcome
	h.at(time.Minute, func() { submit("import beta", beta) })
	h.at(2*time.Minute, func() {
		c := h.status().Cells[0]
		pkgs, _ := guard.ParseLock(beta)
		want := guard.CellDigest(settings.Digest, 1, guard.CellCodeDigest(guard.Python, "import beta", pkgs...), guard.ChainStart(settings.Digest))
		if len(c.Packages) != 1 || c.Packages[0].Name != "beta" || c.Digest != want {
			t.Errorf("cell 1: packages %+v, digest %s; want beta, bound by %s", c.Packages, c.Digest, want)
		}
		h.expectAccepted("approve cell 1", h.decide(1, approve(c.Digest)))
	})
	h.at(4*time.Minute, func() { refused = submit("import beta", "beta==2.1 --hash="+hash("b")+"\n") })
	h.at(5*time.Minute, func() { taken = submit("import alpha, beta", beta+"alpha==1.0 --hash="+hash("a")+"\n") })
	h.at(6*time.Minute, func() { h.closeSession() })
	h.run(req)
	if _, err := h.result(); err != nil {
		t.Fatal(err)
	}
	if _, rejected, _, _, err := refused.get(); guard.TypeOf(contract.FromFailure(err)) != guard.TypeToolUsageError && guard.TypeOf(contract.FromFailure(rejected)) != guard.TypeToolUsageError {
		t.Errorf("cell 2 with beta 2.1 after cell 1's beta 2.0: rejected %v, err %v; want a ToolUsageError", rejected, err)
	}
	if _, rejected, done, _, err := taken.get(); !done || rejected != nil || err != nil {
		t.Errorf("cell 3 naming the set's packages as they are: rejected %v, err %v; want it taken", rejected, err)
	}
	ran := h.backend.Sandboxes()[0].Ran()
	if len(ran) != 1 || len(ran[0].Packages) != 1 || ran[0].Packages[0].Name != "beta" {
		t.Errorf("the host ran %+v; want cell 1 with beta", ran)
	}
}
