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

	"github.com/sandboxflow/sandboxflow/client"
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
