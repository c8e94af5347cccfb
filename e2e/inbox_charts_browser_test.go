//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/internal/testkit/browsertest"
)

// signInInbox starts chromium with a virtual passkey authenticator (the DevTools protocol's), and
// signs in at the inbox on origin as principal: it registers a passkey, adds the line the page
// gives to the reviewers file, as an operator would, and signs in with it.
func signInInbox(t *testing.T, ctx context.Context, origin, reviewers, principal string) *browsertest.Browser {
	t.Helper()
	b := browsertest.Start(t, ctx)
	if _, err := chromedp.Call(b.Ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	if _, err := chromedp.Call(b.Ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
		Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21, Transport: webauthn.AuthenticatorTransportInternal,
		HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
	}}); err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
	b.Do(chromedp.Navigate(origin + "/"))
	b.WaitFor("the sign-in page", `location.pathname === "/signin" && !!document.getElementById("register-name")`, 30*time.Second)
	b.Do(chromedp.SendKeys(chromedp.ID("register-name"), principal), chromedp.Click(chromedp.ID("register")))
	b.WaitFor("the reviewers-file line", `document.getElementById("register-line").textContent.length > 0`, 20*time.Second)
	line := b.Text(`document.getElementById("register-line").textContent`)
	f, err := os.OpenFile(reviewers, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(line + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("add the passkey to the reviewers file: %v", err)
	}
	b.Do(chromedp.Click(chromedp.ID("signin")))
	b.WaitFor("the pending list", `location.pathname === "/"`, 30*time.Second)
	return b
}

// picturesDrawn is a JavaScript expression: the pictures under the element sel selects are there
// and decoded.
func picturesDrawn(sel string) string {
	return fmt.Sprintf(`(() => { const imgs = document.querySelectorAll(%q);
		return imgs.length > 0 && Array.from(imgs).every(i => i.complete && i.naturalWidth > 0); })()`, sel+" img.picture")
}

// pictureSizes is a JavaScript expression: the decoded sizes of the pictures under sel, as
// "WxH WxH".
func pictureSizes(sel string) string {
	return fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(i => i.naturalWidth + "x" + i.naturalHeight).join(" ")`, sel+" img.picture")
}

// screenshot writes the page as name into the test's temporary folder, and into
// SANDBOXFLOW_SCREENSHOTS when it is set (browsertest.Screenshot).
func screenshot(t *testing.T, b *browsertest.Browser, name string) {
	t.Helper()
	shot, err := chromedp.Run(b.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	b.Screenshot(name)
}

// TestBrowserInboxChartsThroughTheBinaries: worker --dev with the Docker backend (runc) in the
// data image serves the reviewers' inbox; a reviewer signed in there with a passkey approves, in
// chromium, a run whose code draws a 6x4-inch, 100-dpi line chart and calls plt.show(), and the
// run's page draws the chart as a picture of 600x400 pixels. Then a session: cell 1 draws the
// chart, leaves it open and ends with a DataFrame; once it ran, the session's page for cell 2's
// decision draws cell 1's chart and its table, so the next cell's reviewer sees what earlier
// cells showed.
func TestBrowserInboxChartsThroughTheBinaries(t *testing.T) {
	browsertest.Chromium(t)
	port := freePort(t)
	w := startChartWorker(t, "e2e-inbox-charts", "--inbox-port", strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	origin := "http://localhost:" + strconv.Itoa(port)
	b := signInInbox(t, ctx, origin, filepath.Join(w.data, "reviewer", "allowed_signers"), "carol")
	want := fmt.Sprintf("%dx%d", chartWidth, chartHeight)

	var st startedJSON
	w.starter.mustJSON(&st, "run", "--code", revenueFrame+revenueChart+"plt.show()\n")
	waitPending(t, w.starter, st.WorkflowID)
	b.Do(chromedp.Navigate(origin + "/run/" + st.WorkflowID))
	b.WaitFor("the run's page", `!!document.getElementById("approve")`, 30*time.Second)
	b.Do(chromedp.Click(chromedp.ID("approve")))
	// The page goes on to the next waiting run (here none: the list), whose note links back.
	b.WaitFor("the note after the decision", `!!document.getElementById("decided-link")`, 30*time.Second)
	b.Do(chromedp.Click(chromedp.ID("decided-link")))
	b.WaitFor("the run's chart, decoded", picturesDrawn("#result"), 2*time.Minute)
	if got := b.Text(pictureSizes("#result")); got != want {
		t.Errorf("the run's page draws pictures of %q; want the one chart, %s", got, want)
	}
	// Where the run's time went, from its history.
	if got := b.Text(`(document.getElementById("result-phases") || {}).textContent || ""`); !strings.Contains(got, "wait for a person") || !strings.Contains(got, ", run ") {
		t.Errorf("the run's page says of its time %q; want its phases", got)
	}
	b.Do(chromedp.Evaluate[chromedp.Void](`document.querySelector("#result .outputs").scrollIntoView()`))
	screenshot(t, b, "inbox-run-chart.png")

	s := sessionCLI{w.starter}
	id := s.open().WorkflowID
	var sub contract.CellSubmitted
	s.mustJSON(&sub, "session", "cell", id, "--code", revenueFrame+revenueChart+"df\n")
	w.waitCell(id, 1, time.Minute)
	b.Do(chromedp.Navigate(origin + "/session/" + id))
	b.WaitFor("cell 1's sign form", `!!document.getElementById("decide") && document.getElementById("decide").dataset.cell === "1" && !!document.getElementById("approve")`, 30*time.Second)
	b.Do(chromedp.Click(chromedp.ID("approve")))
	deadline := time.Now().Add(2 * time.Minute)
	for r := s.show(id); len(r.Cells) == 0 || r.Cells[0].Result == nil; r = s.show(id) {
		if time.Now().After(deadline) {
			t.Fatalf("cell 1 has no result 2 minutes after its approval: %+v", r.Cells)
		}
		time.Sleep(300 * time.Millisecond)
	}
	s.mustJSON(&sub, "session", "cell", id, "--code", "print(df['revenue'].max())\n")
	w.waitCell(id, 2, time.Minute)
	b.Navigate(origin + "/session/" + id) // the page of cell 1 may be reloading itself
	b.WaitFor("cell 2's sign form under cell 1's chart, decoded", `!!document.getElementById("decide") && document.getElementById("decide").dataset.cell === "2" && `+
		picturesDrawn("#result-1"), time.Minute)
	if got := b.Text(pictureSizes("#result-1")); got != want {
		t.Errorf("cell 2's page draws cell 1's pictures as %q; want the one chart, %s", got, want)
	}
	if n := b.Text(`String(document.querySelectorAll("#result-1 table.output-table").length)`); n != "1" {
		t.Errorf("cell 2's page draws %s tables of cell 1's; want the DataFrame's", n)
	}
	table := b.Text(`document.querySelector("#result-1 table.output-table")?.innerText ?? ""`)
	for _, cell := range []string{"month", "revenue", "Jun", "21.0"} {
		if !strings.Contains(table, cell) {
			t.Errorf("cell 1's table on cell 2's page lacks %q:\n%s", cell, table)
		}
	}
	// Tall enough for cell 1's heading, table and chart in one picture (docs/reviewing.md).
	b.Do(chromedp.EmulateViewport(1280, 900), chromedp.Evaluate[chromedp.Void](`Array.from(document.querySelectorAll("#result-1 h3")).
		find(h => h.textContent.startsWith("What the code showed")).scrollIntoView()`))
	screenshot(t, b, "inbox-chart.png")
	if _, code := s.run("session", "close", id); code != 0 {
		t.Errorf("starter session close %s exited %d", id, code)
	}
}
