package activities

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
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
