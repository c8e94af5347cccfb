package activities

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// A cell's packages are checked against the session's set so far: packages an earlier cell
// brought may be named again as they are, never at another version; a lock that does not
// parse is a ToolUsageError; a cell without packages is checked as it always was.
func TestSessionCellCheckPackages(t *testing.T) {
	h := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	a := &Activities{policy: guard.Policy{Languages: []string{guard.Python}, Packages: true}.WithDefaults()}
	s, err := a.policy.CheckSession(guard.SessionRequest{Settings: guard.Settings{Packages: "alpha==1.0 --hash=" + h("a")}}, "docker")
	if err != nil {
		t.Fatal(err)
	}
	earlier := []guard.Package{{Name: "beta", Version: "2.0", Hashes: []string{h("b")}}}
	in := contract.CellCheckInput{Session: s, Index: 2, Code: "import beta, gamma", EarlierPackages: earlier,
		Packages: "beta==2.0 --hash=" + h("b") + "\ngamma==3.0 --hash=" + h("c")}
	cell, err := a.SessionCellCheck(context.Background(), in)
	if err != nil || len(cell.Packages) != 2 || cell.CodeDigest != guard.CellCodeDigest(guard.Python, in.Code, cell.Packages...) {
		t.Fatalf("cell %+v, %v; want beta and gamma bound by the code digest", cell, err)
	}
	for lock, want := range map[string]string{
		"beta==2.1 --hash=" + h("b"):  guard.TypeToolUsageError,
		"alpha==1.0 --hash=" + h("c"): guard.TypeToolUsageError,
		"beta>=2 --hash=" + h("b"):    guard.TypeToolUsageError,
	} {
		in.Packages = lock
		if _, err := a.SessionCellCheck(context.Background(), in); guard.TypeOf(contract.FromFailure(err)) != want {
			t.Errorf("cell lock %q: %v; want a %s", lock, err, want)
		}
	}
	in.Packages, in.EarlierPackages = "", nil
	if cell, err := a.SessionCellCheck(context.Background(), in); err != nil || cell.CodeDigest != guard.CellCodeDigest(guard.Python, in.Code) || cell.Packages != nil {
		t.Errorf("a cell without packages: %+v, %v", cell, err)
	}
}

// The host binds a cell's packages as it binds its code: a cell approved with packages and
// sent without them (or with another hash) is refused as a mismatch, and a host whose policy
// offers no packages refuses a cell that brings some; nothing runs.
func TestCellAdmissionBindsPackages(t *testing.T) {
	h := newSessionHost(t)
	h.a.policy.Packages = true
	hs := h.a.sessions.get(sessionKey{testWorkflowID, testRunID})
	pkgs, err := guard.ParseLock("beta==2.0 --hash=sha256:" + strings.Repeat("b", 64))
	if err != nil {
		t.Fatal(err)
	}
	withPackages := func() contract.CellRunInput {
		c, err := h.a.policy.CheckCell(h.session, 1, "", "import beta", pkgs...)
		if err != nil {
			t.Fatal(err)
		}
		f := reviewertest.Fields(testWorkflowID, testRunID, guard.CellDigest(h.session.Digest, 1, c.CodeDigest, h.chain), testTaskQueue, true)
		return contract.CellRunInput{Cell: c, Chain: h.chain, Decision: testReviewer().Decision(t, f)}
	}
	admit := func(in contract.CellRunInput) error {
		_, err := h.a.verifyAdmission(h.a.cellAdmission(testInfo(1), hs, in))
		return err
	}
	if err := admit(withPackages()); err != nil {
		t.Fatalf("the cell as approved: %v; want admitted", err)
	}
	for name, alter := range map[string]func(*contract.CellRunInput){
		"packages dropped": func(in *contract.CellRunInput) { in.Cell.Packages = nil },
		"another hash": func(in *contract.CellRunInput) {
			in.Cell.Packages = []guard.Package{{Name: "beta", Version: "2.0", Hashes: []string{"sha256:" + strings.Repeat("c", 64)}}}
		},
	} {
		in := withPackages()
		alter(&in)
		var ar *guard.ApprovalRefused
		if err := admit(in); !errors.As(err, &ar) || ar.Reason != guard.RefusedMismatch {
			t.Errorf("%s: %v; want an ApprovalRefused (mismatch)", name, err)
		}
	}
	in := withPackages()
	h.a.policy.Packages = false
	var ce *guard.ConfigError
	if err := admit(in); !errors.As(err, &ce) {
		t.Errorf("a host offering no packages: %v; want its ConfigError", err)
	}
	if n := h.backend.Cells(); n != 0 {
		t.Errorf("%d cells ran", n)
	}
}
