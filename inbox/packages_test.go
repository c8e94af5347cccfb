package inbox

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

var (
	pkgHashA = "sha256:" + strings.Repeat("a", 64)
	pkgHashB = "sha256:" + strings.Repeat("b", 64)
)

// packagesFixture is a session whose settings carry a lock of one package, with a first cell
// that ran and a second that waits and brings a package of its own.
func packagesFixture(t *testing.T, id string) *sessionFixture {
	t.Helper()
	f := newSessionFixture(t, id)
	f.policy.Packages = true
	f.input.Request.Packages = "alpha==1.0 --hash=" + pkgHashA + "\n"
	cs, err := f.policy.CheckSession(f.input.Request, "docker")
	if err != nil {
		t.Fatal(err)
	}
	f.checked = cs
	f.status.Settings, f.status.Chain = cs.Summary(), guard.ChainStart(cs.Digest)
	f.add("import alpha\n", contract.StatusSucceeded, &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true})
	beta, err := guard.ParseLock("beta==2.0 --hash=" + pkgHashB)
	if err != nil {
		t.Fatal(err)
	}
	cell, err := f.policy.CheckCell(f.checked, 2, "", "import beta\n", beta...)
	if err != nil {
		t.Fatal(err)
	}
	c := f.add("import beta\n", contract.StatusAwaitingApproval, nil)
	c.Packages, c.CodeDigest = cell.Packages, cell.CodeDigest
	c.Digest = guard.CellDigest(f.checked.Digest, 2, cell.CodeDigest, c.Chain)
	return f
}

// The session page shows the settings' packages and the waiting cell's, each with every hash,
// and what the cell adds to the session's set; the approval offered signs the digest that
// binds the cell's packages.
func TestSessionPageShowsPackages(t *testing.T) {
	f := packagesFixture(t, "session-pkgs")
	door := &sessionDoorFake{}
	door.set(f)
	b := newSessionServer(t, door, f.start.Add(5*time.Minute))
	code, page := b.get("/session/session-pkgs")
	if code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, page)
	}
	settings := regexp.MustCompile(`(?s)<dd id="packages">(.*?)</dd>`).FindStringSubmatch(page)
	if settings == nil || !strings.Contains(settings[1], "alpha==1.0") || !strings.Contains(settings[1], "--hash="+pkgHashA) {
		t.Errorf("the settings' packages %q; want alpha==1.0 with its hash", settings)
	}
	cell := regexp.MustCompile(`(?s)<dd id="cell-2-packages">(.*?)</dd>`).FindStringSubmatch(page)
	if cell == nil || !strings.Contains(cell[1], "beta==2.0") || !strings.Contains(cell[1], "--hash="+pkgHashB) {
		t.Errorf("cell 2's packages %q; want beta==2.0 with its hash", cell)
	}
	changes := regexp.MustCompile(`(?s)<dd id="cell-2-package-changes">(.*?)</dd>`).FindStringSubmatch(page)
	if changes == nil || !strings.Contains(html.UnescapeString(changes[1]), "added beta==2.0") {
		t.Errorf("cell 2's package changes %q; want added beta==2.0", changes)
	}
	if strings.Contains(page, `id="cell-1-packages"`) {
		t.Error("cell 1, which brings no packages, shows some")
	}
	ap, ok := statements(page)["approve"]
	if !ok || !strings.Contains(ap.Text, "digest: "+f.status.Cells[1].Digest) {
		t.Fatalf("approve statement %+v; want cell 2's digest %s", ap, f.status.Cells[1].Digest)
	}
}

// A status that shows the waiting cell with another hash than its code digest binds, or the
// session's settings without a package the session started with, is not offered for approval.
func TestSessionPageRefusesPackagesItDoesNotBind(t *testing.T) {
	for name, lie := range map[string]func(f *sessionFixture){
		"the cell's hash swapped": func(f *sessionFixture) {
			f.status.Cells[1].Packages = []guard.Package{{Name: "beta", Version: "2.0", Hashes: []string{pkgHashA}}}
		},
		"the cell's package hidden": func(f *sessionFixture) { f.status.Cells[1].Packages = nil },
		"a settings package hidden": func(f *sessionFixture) { f.status.Settings.Packages = nil },
	} {
		f := packagesFixture(t, "session-pkg-lie")
		lie(f)
		door := &sessionDoorFake{}
		door.set(f)
		b := newSessionServer(t, door, f.start.Add(5*time.Minute))
		_, page := b.get("/session/session-pkg-lie")
		if _, ok := statements(page)["approve"]; ok {
			t.Errorf("%s: the page offers an approval", name)
		}
		if !strings.Contains(page, `id="approve-refused"`) {
			t.Errorf("%s: the page does not say why it offers no approval", name)
		}
	}
}
