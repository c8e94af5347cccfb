//go:build integration

package inbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A run with packages in chromium: its page lists each package with its version and every hash
// in full, and, in a conversation, what changed in the packages since the previous run (a
// version, a package removed, one added, one hash) above the line diff that shows each hash.
func TestBrowserRunShowsPackages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	signInAlice(t, e)
	hash := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return "sha256:" + hex.EncodeToString(h[:])
	}
	start := func(id, lock string) {
		t.Helper()
		if _, err := e.sc.Start(ctx, guard.Request{Code: "import alpha\n", Conversation: "task-pkg", Settings: guard.Settings{Packages: lock}},
			client.StartOptions{WorkflowID: id}); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
	}
	start("pkg-first", "alpha==1.0 --hash="+hash("alpha-1.0")+"\nbeta==2.0 --hash="+hash("beta-2.0")+"\ndelta==4 --hash="+hash("delta-4")+"\n")
	start("pkg-second", "alpha==1.1 --hash="+hash("alpha-1.1")+"\ngamma[fast]==3.0 --hash="+hash("gamma-3.0")+" --hash="+hash("gamma-3.0-cp312")+
		"\ndelta==4 --hash="+hash("delta-4b")+"\n")

	deadline := time.Now().Add(30 * time.Second)
	for {
		e.Do(chromedp.Navigate(e.origin + "/run/pkg-second"))
		e.WaitFor("the second run's page", `!!document.getElementById("packages")`, 20*time.Second)
		if e.Text(`String(!!document.getElementById("conversation-packages"))`) == "true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no package changes on the second run's page: %s", e.Text(`document.getElementById("conversation") ? document.getElementById("conversation").innerText : "no conversation"`))
		}
		time.Sleep(300 * time.Millisecond)
	}
	pkgs := e.Text(`document.getElementById("packages").innerText`)
	for _, want := range []string{"alpha==1.1", "gamma[fast]==3.0", "delta==4", "--hash=" + hash("alpha-1.1"), "--hash=" + hash("gamma-3.0"),
		"--hash=" + hash("gamma-3.0-cp312"), "--hash=" + hash("delta-4b")} {
		if !strings.Contains(pkgs, want) {
			t.Errorf("the page's packages lack %q:\n%s", want, pkgs)
		}
	}
	if strings.Contains(pkgs, "beta") {
		t.Errorf("the page lists beta, which this run's lock leaves out:\n%s", pkgs)
	}
	changes := e.Text(`document.getElementById("conversation-packages").innerText`)
	for _, want := range []string{"alpha: version 1.0 -> 1.1", "removed beta==2.0", "delta==4: hashes changed (+1 -1)", "added gamma[fast]==3.0"} {
		if !strings.Contains(changes, want) {
			t.Errorf("the package changes lack %q:\n%s", want, changes)
		}
	}
	diff := e.Text(`document.getElementById("conversation-diff").innerText`)
	for _, want := range []string{"--- previous/packages", "-    --hash=" + hash("delta-4"), "+    --hash=" + hash("delta-4b")} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff lacks %q:\n%s", want, diff)
		}
	}
	e.Text(`document.getElementById("packages").scrollIntoView(), ""`)
	e.Screenshot("inbox-packages.png")
}

// A session with packages in chromium: the settings list the session's, and the waiting cell
// lists the packages it brings, with every hash and what they add to the session's set, above
// the approval that binds them.
func TestBrowserSessionShowsCellPackages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	signInAlice(t, e)
	alpha, beta := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	const id = "session-pkgs"
	if _, err := e.c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: id, TaskQueue: e.queue}, contract.SessionWorkflowName, contract.SessionInput{
		Request: guard.SessionRequest{Settings: guard.Settings{Packages: "alpha==1.0 --hash=" + alpha + "\n"}},
	}); err != nil {
		t.Fatal(err)
	}
	requireSessionWorkflow(t, e, ctx, id)
	h, err := e.c.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{WorkflowID: id, UpdateName: contract.UpdateSubmitCell,
		Args:         []any{contract.CellRequest{Code: "import alpha, beta\n", Packages: "beta==2.0 --hash=" + beta + "\nalpha==1.0 --hash=" + alpha + "\n"}},
		WaitForStage: tclient.WorkflowUpdateStageCompleted})
	if err != nil {
		t.Fatal(err)
	}
	var sub contract.CellSubmitted
	if err := h.Get(ctx, &sub); err != nil {
		t.Fatalf("submit-cell with packages: %v", err)
	}
	e.Do(chromedp.Navigate(e.origin + "/session/" + id))
	e.WaitFor("cell 1's sign form", `!!document.getElementById("approve") && document.getElementById("decide").dataset.cell === "1"`, 20*time.Second)
	if got := e.Text(`document.getElementById("packages").innerText`); !strings.Contains(got, "alpha==1.0") || !strings.Contains(got, "--hash="+alpha) {
		t.Errorf("the session's packages: %q", got)
	}
	cell := e.Text(`document.getElementById("cell-1-packages").innerText`)
	for _, want := range []string{"alpha==1.0", "beta==2.0", "--hash=" + beta} {
		if !strings.Contains(cell, want) {
			t.Errorf("cell 1's packages lack %q:\n%s", want, cell)
		}
	}
	if got := e.Text(`document.getElementById("cell-1-package-changes").innerText`); strings.TrimSpace(got) != "added beta==2.0" {
		t.Errorf("cell 1's package changes %q; want only added beta==2.0 (alpha is the session's as it is)", got)
	}
	if got := e.Text(`document.getElementById("decide").innerText`); !strings.Contains(got, sub.Digest) {
		t.Errorf("the statement offered does not name the cell's digest %s:\n%s", sub.Digest, got)
	}
	e.Text(`document.getElementById("cell-1").scrollIntoView(), ""`)
	e.Screenshot("inbox-session-packages.png")
}
