//go:build integration

package inbox_test

// The reviewers' inbox in a real browser: Debian's chromium, driven over the DevTools protocol
// (chromedp), with the DevTools virtual authenticator as the reviewer's passkey, against an
// in-process Temporal server and a worker with the local backend running real Python.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/inbox"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/browsertest"
)

// env is the test's server, worker, inbox and browser.
type env struct {
	t         *testing.T
	c         tclient.Client
	sc        *client.Client
	origin    string
	queue     string
	reviewers string
	counter   string
	*browsertest.Browser
}

func startEnv(t *testing.T, ctx context.Context) *env {
	t.Helper()
	return startEnvWith(t, ctx, nil)
}

// startEnvWith is startEnv with backend b running the code (nil: the local backend).
func startEnvWith(t *testing.T, ctx context.Context, b guard.Backend) *env {
	t.Helper()
	browsertest.Chromium(t) // skip (or fail under make test) before anything starts
	const queue = "sandboxflow-inbox-it"
	dir := t.TempDir()
	reviewers := filepath.Join(dir, "allowed_signers")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	// The local backend with the host's python3 runs the code.
	a := agenttest.Setup(t, agenttest.Options{
		Backend: b,
		// Mixed indentation is allowed here so that the tab attack reaches the page (the
		// default policy refuses it); TOKEN's value is shown as its length only.
		Policy: &guard.Policy{Languages: []string{guard.Python, guard.Shell}, ApprovalTimeout: time.Hour,
			AllowMixedIndentation: true, SensitiveEnv: []string{"TOKEN"}, Packages: true},
		TaskQueue: queue,
		// The same file the inbox reads: the workflow and the sandbox activity verify the
		// passkey decisions against it too.
		ReviewersFile: reviewers,
		// Passkey decisions count only when made on the inbox's page, with a growing counter.
		PasskeyOrigin:       origin,
		PasskeyCountersFile: filepath.Join(dir, "passkey-counters.json"),
		NoStarter:           true,
	})
	c, sc := a.Temporal, a.Client

	e := &env{t: t, c: c, sc: sc, queue: queue, reviewers: reviewers, counter: filepath.Join(dir, "ran")}
	e.origin = origin
	srv, err := inbox.New(inbox.Config{Temporal: c, TaskQueue: queue, ReviewersPath: e.reviewers, Origin: e.origin,
		PasskeyCountersPath: filepath.Join(dir, "inbox-passkey-counters.json")})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	e.Browser = browsertest.Start(t, ctx)
	if _, err := chromedp.Call(e.Ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	if _, err := chromedp.Call(e.Ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
		Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21, Transport: webauthn.AuthenticatorTransportInternal,
		HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
	}}); err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
	return e
}

// runs counts the lines the approved code appended to the counter file: a side effect outside
// the workflow's own word.
func (e *env) runs() int {
	b, err := os.ReadFile(e.counter)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func (e *env) start(ctx context.Context, id, code string, files map[string][]byte) {
	e.t.Helper()
	_, err := e.sc.Start(ctx, guard.Request{
		Code: code, Language: guard.Python, Settings: guard.Settings{
			Files:    files,
			Env:      map[string]string{"MODE": "dry run ", "TOKEN": sensitiveToken},
			Metadata: guard.Metadata{Agent: "report-agent", RequestedBy: "orchestrator@ci"},
		}}, client.StartOptions{WorkflowID: id})
	if err != nil {
		e.t.Fatalf("start %s: %v", id, err)
	}
}

// sensitiveToken is the value of an env var the policy marks sensitive: 32 bytes.
const sensitiveToken = "tok-0123456789abcdef0123456789ab"

func TestBrowserInbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)

	// A stranger registers a passkey: the page gives only the line for the reviewers file.
	e.Do(chromedp.Navigate(e.origin + "/"))
	e.WaitFor("the sign-in page", `location.pathname === "/signin" && !!document.getElementById("register-name")`, 20*time.Second)
	e.Do(chromedp.SendKeys(chromedp.ID("register-name"), "alice"), chromedp.Click(chromedp.ID("register")))
	e.WaitFor("the reviewers-file line", `document.getElementById("register-line").textContent.length > 0`, 20*time.Second)
	line := e.Text(`document.getElementById("register-line").textContent`)
	if !strings.HasPrefix(line, "alice sk-ecdsa-sha2-nistp256@openssh.com ") || !strings.Contains(line, "rp=localhost") {
		t.Fatalf("reviewers-file line %q", line)
	}
	if w := e.Text(`document.getElementById("register-warning").textContent`); w != "" {
		t.Errorf("a name nobody was listed under got a warning: %q", w)
	}
	// Until an operator adds it, signing in is refused: the file lists only bob's SSH key.
	bob := otherReviewer(t)
	if err := os.WriteFile(e.reviewers, []byte(bob), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Do(chromedp.Click(chromedp.ID("signin")))
	e.WaitFor("the refused sign-in", `document.getElementById("signin-msg").textContent.includes("unknown_key")`, 20*time.Second)

	if err := os.WriteFile(e.reviewers, []byte(bob+line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start(ctx, "inbox-approve", fmt.Sprintf("import os\n# count the run outside the sandbox\nwith open(%q, 'a') as f:\n    f.write('ran\\n')\nprint('hello from the sandbox', 6 * 7)\n", e.counter),
		map[string][]byte{"data.csv": []byte("a,b\n1,2\n"), "blob.bin": {0, 1, 2, 0xff}, "helper.py": []byte(helperModule)})
	e.start(ctx, "inbox-deny", fmt.Sprintf("open(%q, 'a').write('denied run ran\\n')\n", e.counter), nil)
	e.start(ctx, "inbox-tamper", fmt.Sprintf("user = 'guest' # \u202e \u2066admin\u2069\nopen(%q, 'a').write('tampered run ran\\n')\n", e.counter), nil)

	// Still anonymous: a run's page sends the browser to sign in and shows no code.
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-approve"))
	e.WaitFor("the sign-in page", `location.pathname === "/signin"`, 20*time.Second)
	if body := e.Text(`document.documentElement.outerHTML`); strings.Contains(body, "hello from the sandbox") {
		t.Fatal("an anonymous sign-in saw the code")
	}
	checkNoSession(t, e)

	// Sign in with the listed passkey and find the runs in the list.
	e.Do(chromedp.Click(chromedp.ID("signin")))
	e.WaitFor("the pending list", `location.pathname === "/" && !!document.querySelector('a[href="/run/inbox-approve"]') &&
		!!document.querySelector('a[href="/run/inbox-tamper"]') && !!document.querySelector('a[href="/run/inbox-deny"]')`, 60*time.Second)
	if got := e.Text(`document.getElementById("pending-rows").innerText`); !strings.Contains(got, "report-agent") || !strings.Contains(got, "orchestrator@ci") {
		t.Errorf("the list lacks agent or requested_by: %q", got)
	}
	e.Screenshot("inbox-list.png")

	approveRun(t, e)
	denyRun(t, e)
	tamperedRun(t, e, ctx)
	crossSitePost(t, e, ctx)
	lyingRun(t, e, ctx)
	tabRun(t, e, ctx)
	wrapRun(t, e, ctx)
	registerListedName(t, e)
}

// registerListedName: someone registers a passkey under bob, whom the reviewers file lists: the
// page warns that the line would give bob another key (the first registration, under a name the
// file did not list then, got no warning). It comes last: the virtual authenticator then holds a
// second passkey, which a later sign-in could offer.
func registerListedName(t *testing.T, e *env) {
	if _, err := chromedp.Call(e.Ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatalf("Network.clearBrowserCookies: %v", err)
	}
	e.Do(chromedp.Navigate(e.origin + "/signin"))
	e.WaitFor("the sign-in page", `!!document.getElementById("register-name")`, 20*time.Second)
	e.Do(chromedp.SendKeys(chromedp.ID("register-name"), "bob"), chromedp.Click(chromedp.ID("register")))
	e.WaitFor("the warning", `document.getElementById("register-warning").textContent.includes("bob is already listed")`, 20*time.Second)
	if got := e.Text(`document.getElementById("register-line").textContent`); !strings.HasPrefix(got, "bob sk-ecdsa-sha2-nistp256@openssh.com ") {
		t.Errorf("the second registration's line %q", got)
	}
}

// wrapRun is code whose sixth line, padded with spaces, goes on with "|     delete()": wrapped
// by the browser, that tail started a row of its own at the left edge of the code, under the
// if's body, where Python runs it on line 6 (x = 0 | delete()) with dry_run True. The page must
// start the tail left of where every line starts.
func wrapRun(t *testing.T, e *env, ctx context.Context) {
	code := "import os\n" +
		"def delete(): print('DELETED'); return 0\n" +
		"dry_run = True\n" +
		"if not dry_run:\n" +
		"    print('about to delete')\n" +
		"x = 0" + strings.Repeat(" ", 400) + "|     delete()\n"
	// The same in an input module, indented with tabs: the tail after the padding starts with a
	// tab, drawn ⇥, so that wrapped it read as a line of the if's body.
	helper := "def f(dry_run):\n\tif not dry_run:\n\t\tprint('about to delete')\n\tx = 0 |" + strings.Repeat(" ", 400) + "\tdelete()\n"
	e.start(ctx, "inbox-wrap", code, map[string][]byte{"helper.py": []byte(helper)})
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-wrap"))
	e.WaitFor("the run page", `!!document.getElementById("approve")`, 20*time.Second)
	got := e.Text(`(() => {
		const at = (td, ch) => {
			const w = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
			for (let n = w.nextNode(); n; n = w.nextNode()) {
				const i = n.textContent.indexOf(ch);
				if (i >= 0) { const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1); return r.getBoundingClientRect(); }
			}
			return null;
		};
		const rows = document.querySelectorAll("#code td.src");
		const start = at(rows[0], "i"), body = at(rows[4], "p"), x = at(rows[5], "x"), bar = at(rows[5], "|");
		return [start.left, body.left, x.left, x.top, bar.left, bar.top].map(Math.round).join(" ");
	})()`)
	var startX, bodyX, lineX, lineY, tailX, tailY int
	if _, err := fmt.Sscan(got, &startX, &bodyX, &lineX, &lineY, &tailX, &tailY); err != nil {
		t.Fatalf("positions %q: %v", got, err)
	}
	if tailY <= lineY {
		t.Fatalf("line 6 did not wrap (positions %q): the test shows nothing", got)
	}
	if lineX != startX || tailX >= startX {
		t.Errorf("x: lines start at %d, line 6 at %d, its wrapped tail at %d (the if's body at %d); want the tail left of every line's start", startX, lineX, tailX, bodyX)
	}
	got = e.Text(`(() => {
		document.querySelectorAll("details.file").forEach(d => d.open = true);
		const spans = document.querySelectorAll("details.file pre.preview span.pl");
		const at = (el, ch, last) => {
			const n = el.firstChild, i = last ? n.textContent.lastIndexOf(ch) : n.textContent.indexOf(ch);
			const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1); return r.getBoundingClientRect();
		};
		const start = at(spans[0], "d", false), line = at(spans[3], "x", false), tail = at(spans[3], "⇥", true);
		return [spans.length, start.left, line.left, line.top, tail.left, tail.top].map(Math.round).join(" ");
	})()`)
	var n int
	if _, err := fmt.Sscan(got, &n, &startX, &lineX, &lineY, &tailX, &tailY); err != nil || n != 4 {
		t.Fatalf("helper.py positions %q: %v; want 4 lines", got, err)
	}
	if tailY <= lineY {
		t.Fatalf("helper.py line 4 did not wrap (positions %q): the test shows nothing", got)
	}
	if tailX >= startX {
		t.Errorf("helper.py: lines start at x %d, line 4's wrapped tail (⇥ delete()) at %d; want it left of every line's start", startX, tailX)
	}
	if note := e.Text(`document.getElementById("wrap-note").innerText`); !strings.Contains(note, "2 columns left") {
		t.Errorf("wrap note %q", note)
	}
	e.Screenshot("inbox-wrap.png")
}

// tabRun is code whose last `open` line reads as inside `if not dry_run:` with a tab 4 columns
// wide (as the page drew tabs before) but that Python, with tab stops 8 apart, runs after the if:
// the page must draw it at the if's column, left of the if's body. Approved, it runs and the
// line in the if does not: what the page showed is what ran. Its input files warn: json.py
// replaces the standard json, a .pth file is a start-up hook.
func tabRun(t *testing.T, e *env, ctx context.Context) {
	code := fmt.Sprintf("def main(dry_run):\n"+
		" \t   \tif not dry_run:\n"+
		" \t   \t    open(%[1]q, 'a').write('deleted\\n')\n"+
		"    \t\topen(%[1]q, 'a').write('launched\\n')\n"+
		"main(True)\n"+
		"p\u0430ypal = 'a Cyrillic a in a Latin name'\n", e.counter)
	e.start(ctx, "inbox-tabs", code, map[string][]byte{"json.py": []byte("loads = eval\n"), "hook.pth": []byte("import os\n"), "helper.py": []byte("def f():\n\treturn 1\n"),
		"sections.py": []byte("A = 1\n\f\nBANNER = '\x1b[2J'\n")})
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-tabs"))
	e.WaitFor("the run page", `!!document.getElementById("approve")`, 20*time.Second)
	// The left edge, in pixels, of the first occurrence of word in each code line.
	cols := e.Text(`(() => {
		const x = (td, word) => {
			const w = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
			for (let n = w.nextNode(); n; n = w.nextNode()) {
				const i = n.textContent.indexOf(word);
				if (i >= 0) { const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1); return Math.round(r.getBoundingClientRect().left); }
			}
			return -1;
		};
		const rows = document.querySelectorAll("#code td.src");
		return [x(rows[1], "if"), x(rows[2], "open"), x(rows[3], "open")].join(" ");
	})()`)
	var ifX, bodyX, launchX int
	if _, err := fmt.Sscan(cols, &ifX, &bodyX, &launchX); err != nil || ifX < 0 {
		t.Fatalf("code columns %q: %v", cols, err)
	}
	if launchX != ifX || bodyX <= ifX {
		t.Errorf("drawn at x: if %d, body %d, launch %d; want the launch at the if's x, left of the body (Python runs it after the if)", ifX, bodyX, launchX)
	}
	if got := e.Text(`Array.from(document.querySelectorAll("#code .t-tab")).length + " " + document.getElementById("tab-note").innerText`); !strings.HasPrefix(got, "6 ") || !strings.Contains(got, "is a tab") {
		t.Errorf("tabs drawn: %q; want 6 tab markers and the note saying what they are", got)
	}
	warn := e.Text(`document.getElementById("startup-warning") ? document.getElementById("startup-warning").innerText : ""`)
	for _, want := range []string{"2 input file(s)", "hook.pth: a .pth file", "json.py: module json shadows the standard module"} {
		if !strings.Contains(warn, want) {
			t.Errorf("start-up warning %q lacks %q", warn, want)
		}
	}
	if got := e.Text(`document.querySelector("details.file pre.preview") ? Array.from(document.querySelectorAll("details.file pre.preview")).map(p => p.textContent).join("|") : ""`); !strings.Contains(got, "def f():\n⇥       return 1") {
		t.Errorf("input files drawn as %q; want helper.py's tab as ⇥ and spaces to column 8", got)
	}
	// A module with a form feed and an escape sequence is drawn as text, those escaped, not as
	// "binary (not shown)".
	if got := e.Text(`Array.from(document.querySelectorAll("details.file pre.preview")).map(p => p.textContent).join("|")`); !strings.Contains(got, `BANNER = '\u001b[2J'`) || !strings.Contains(got, `\u000c`) {
		t.Errorf("input files drawn as %q; want sections.py's text with its form feed and escape written as \\u000c and \\u001b", got)
	}
	names := e.Text(`(document.getElementById("names-warning") ? document.getElementById("names-warning").innerText : "") + "|" +
		Array.from(document.querySelectorAll("#code .t-conf")).map(n => n.textContent).join(",")`)
	if !strings.Contains(names, "mixes scripts (Cyrillic, Latin)") || !strings.Contains(names, `written p\u0430ypal`) || !strings.HasSuffix(names, "|p\u0430ypal") {
		t.Errorf("confusable name shown as %q; want the warning and the name marked in the code", names)
	}
	e.Screenshot("inbox-tabs.png")
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("the result", `!!document.getElementById("result-outcome")`, 60*time.Second)
	b, err := os.ReadFile(e.counter)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.HasSuffix(got, "ran\nlaunched\n") || strings.Contains(got, "deleted") {
		t.Errorf("the counter file holds %q; want the launch line only, as drawn (outside the if)", got)
	}
}

// helperModule is an input file the code could import: its last line lies past the first 4 KiB,
// where a page that shows only the start of a file would hide it from the reviewer.
var helperModule = "# a helper module\n" + strings.Repeat("PADDING = 'innocent'\n", 250) + "LAST_LINE_PAST_4_KIB = True\n"

func approveRun(t *testing.T, e *env) {
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-approve"))
	e.WaitFor("the run page", `!!document.getElementById("approve")`, 20*time.Second)
	if kw := e.Text(`Array.from(document.querySelectorAll("#code .t-kw")).map(n => n.textContent).join(" ")`); !strings.Contains(kw, "import") || !strings.Contains(kw, "with") {
		t.Errorf("keywords highlighted: %q; want import and with", kw)
	}
	if n := e.Text(`String(document.querySelectorAll("#code td.ln").length)`); n != "5" {
		t.Errorf("numbered lines: %s; want 5", n)
	}
	page := e.Text(`document.body.innerText`)
	for _, want := range []string{`MODE = "dry run "`, "TOKEN = ‹sensitive, 32 bytes›", "data.csv", "a,b", "blob.bin", "binary (not shown)", "30s", "sha256:"} {
		if !strings.Contains(page, want) && !strings.Contains(e.Text(`document.body.textContent`), want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
	if strings.Contains(e.Text(`document.documentElement.outerHTML`), sensitiveToken) {
		t.Error("the run page shows the value of an env var the policy marks sensitive")
	}
	// An input file is what the reviewer approves too: shown whole, and downloadable whole
	// (input-2: blob.bin, data.csv, helper.py in name order) while the run waits.
	if !strings.Contains(e.Text(`document.body.textContent`), "LAST_LINE_PAST_4_KIB") {
		t.Error("the run page does not show helper.py past its first 4 KiB")
	}
	got := e.Text(`(() => { const a = document.querySelector('a[href="/run/inbox-approve/download/input-2"]');
		if (!a) return "no download link";
		const x = new XMLHttpRequest(); x.open("GET", a.getAttribute("href"), false); x.send();
		return x.status + " " + x.getResponseHeader("Content-Disposition") + "\n" + x.responseText; })()`)
	if want := "200 attachment; filename=\"helper.py\"; filename*=UTF-8''helper.py\n" + helperModule; got != want {
		t.Errorf("the download of helper.py: got %.200q; want the whole file as an attachment", got)
	}
	e.Screenshot("inbox-run.png")
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("the result", `!!document.getElementById("result-stdout") && document.getElementById("result-stdout").textContent.includes("hello from the sandbox 42")`, 60*time.Second)
	if got := e.Text(`document.getElementById("history").innerText`); !strings.Contains(got, "approve by alice") {
		t.Errorf("decision history %q; want the approval by alice", got)
	}
	time.Sleep(2 * time.Second) // a second run would have appended by now
	if n := e.runs(); n != 1 {
		t.Fatalf("the approved code ran %d times; want exactly once", n)
	}
}

func denyRun(t *testing.T, e *env) {
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-deny"))
	e.WaitFor("the run page", `!!document.getElementById("deny")`, 20*time.Second)
	// By keyboard: type the reason, focus the button, press Enter.
	e.decideAndReturn(chromedp.Focus(chromedp.ID("deny-reason")), chromedp.SendKeys(chromedp.ID("deny-reason"), "writes outside its folder"),
		chromedp.Focus(chromedp.ID("deny")), chromedp.KeyEvent("\r"))
	e.WaitFor("the denial", `document.getElementById("run-state") && document.getElementById("run-state").dataset.state === "denied"`, 30*time.Second)
	if got := e.Text(`document.body.innerText`); !strings.Contains(got, "writes outside its folder") {
		t.Errorf("the denied run's page does not show the reason: %q", got)
	}
	if n := e.runs(); n != 1 {
		t.Fatalf("runs = %d after a denial; want 1", n)
	}
}

// tamperedRun changes the digest in the statement the page shows, so the passkey signs a
// statement over another digest: the decision is refused and nothing runs.
func tamperedRun(t *testing.T, e *env, ctx context.Context) {
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-tamper"))
	e.WaitFor("the run page", `!!document.getElementById("approve")`, 20*time.Second)
	if got := e.Text(`Array.from(document.querySelectorAll("#code .t-inv")).map(n => n.textContent).join(" ")`); got != `\u202e \u2066 \u2069` {
		t.Errorf("invisible characters shown as %q", got)
	}
	if got := e.Text(`document.getElementById("invisible-warning") ? document.getElementById("invisible-warning").innerText : ""`); !strings.Contains(got, "3 invisible") {
		t.Errorf("warning %q", got)
	}
	other := "sha256:" + strings.Repeat("0", 64)
	e.Do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(function () {
		var pre = document.getElementById("statement-approve");
		pre.textContent = pre.textContent.replace(/digest: sha256:[0-9a-f]+/, "digest: %s");
	})()`, other)))
	e.Do(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("the refusal", `document.getElementById("decide-msg").textContent.includes("refused")`, 30*time.Second)
	msg := e.Text(`document.getElementById("decide-msg").textContent`)
	if !strings.Contains(msg, "statement_mismatch") || !strings.Contains(msg, "digest") || !strings.Contains(msg, "This page is out of date: its digest changed") {
		t.Errorf("refusal %q; want a statement mismatch on the digest, said as a page out of date", msg)
	}
	st, err := e.sc.Status(ctx, "inbox-tamper")
	if err != nil || st.State != contract.StatusAwaitingApproval {
		t.Fatalf("tampered run: state %q, %v; want it still waiting", st.State, err)
	}
	if n := e.runs(); n != 1 {
		t.Fatalf("runs = %d after a tampered decision; want 1", n)
	}
}

// lyingRun is a RunCode run whose workflow worker is a namespace writer's: its status shows
// harmless code under the digest of the code the run was started with. The page offers no
// approval (a denial stays possible) and the decide endpoint refuses one.
func lyingRun(t *testing.T, e *env, ctx context.Context) {
	policy := guard.Policy{Languages: []string{guard.Python, guard.Shell}, ApprovalTimeout: time.Hour}
	started := guard.Request{Code: fmt.Sprintf("open(%q, 'a').write('lying run ran\\n')\n", e.counter), Settings: guard.Settings{Env: map[string]string{"MODE": "secret-value"}}}
	evil, err := policy.Check(started, "local")
	if err != nil {
		t.Fatal(err)
	}
	shown, err := policy.Check(guard.Request{Code: "print('harmless')\n", Settings: guard.Settings{Env: started.Env}}, "local")
	if err != nil {
		t.Fatal(err)
	}
	lie := shown.Summary()
	lie.Digest = evil.Digest
	rogue := func(ctx workflow.Context, _ contract.Input) error {
		info := workflow.GetInfo(ctx)
		st := contract.Status{State: contract.StatusAwaitingApproval, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			SandboxTaskQueue: "sandboxflow-inbox-it", Request: lie, DecisionWait: contract.DecisionWait{ApprovalDeadline: workflow.Now(ctx).Add(time.Hour)}}
		if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.Status, error) { return st, nil }); err != nil {
			return err
		}
		workflow.GetSignalChannel(ctx, contract.SignalApproval).Receive(ctx, nil)
		return nil
	}
	const queue = "sandboxflow-inbox-rogue"
	w := worker.New(e.c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.WorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := e.c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: "inbox-lie", TaskQueue: queue}, contract.WorkflowName, contract.Input{Request: started}); err != nil {
		t.Fatal(err)
	}
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-lie"))
	e.WaitFor("the run page", `!!document.getElementById("deny")`, 20*time.Second)
	if got := e.Text(`document.getElementById("approve-refused") ? document.getElementById("approve-refused").innerText : ""`); !strings.Contains(got, "differ in their code") || !strings.Contains(got, "do not approve") {
		t.Errorf("approval refusal %q; want it to say the status shows other code than the run was started with", got)
	}
	if e.Text(`String(!!document.getElementById("approve") || !!document.getElementById("statement-approve"))`) != "false" {
		t.Error("the page of a lying run offers an approval")
	}
	// The endpoint refuses an approval whatever the page offers, before any signature is read.
	e.Do(chromedp.Evaluate[chromedp.Void](`(function () {
		var token = document.querySelector('meta[name="csrf-token"]').content;
		window.lieAnswer = "";
		fetch(location.pathname + "/decide", {method: "POST", credentials: "same-origin",
			headers: {"Content-Type": "application/json", "X-CSRF-Token": token}, body: JSON.stringify({approve: true})})
			.then(function (r) { return r.text().then(function (b) { window.lieAnswer = r.status + " " + b; }); });
	})()`))
	e.WaitFor("the decide answer", `window.lieAnswer !== ""`, 20*time.Second)
	if got := e.Text(`window.lieAnswer`); !strings.HasPrefix(got, "409 ") || !strings.Contains(got, "approval refused") {
		t.Errorf("decide answer %q; want 409 approval refused", got)
	}
	if n := e.runs(); n != 1 {
		t.Fatalf("runs = %d after the lying run; want 1", n)
	}
}

// otherReviewer is a reviewers-file line for another reviewer's SSH key.
func otherReviewer(t *testing.T) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return "bob " + string(ssh.MarshalAuthorizedKey(sp))
}

// checkNoSession: without a session nothing is shown, and a POST is refused.
func checkNoSession(t *testing.T, e *env) {
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/", "/run/inbox-approve", "/pending", "/run/inbox-approve/download/stdout", "/run/inbox-approve/download/input-1"} {
		resp, err := hc.Get(e.origin + path)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 4096)
		n, _ := resp.Body.Read(body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body[:n]), "sandbox") {
			t.Errorf("GET %s without a session: %d %q", path, resp.StatusCode, body[:n])
		}
	}
}

// crossSitePost replays the reviewer's own sign-in cookie from another origin: refused, and the
// run still waits.
func crossSitePost(t *testing.T, e *env, ctx context.Context) {
	res, err := chromedp.Call(e.Ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{e.origin}})
	if err != nil || len(res.Cookies) == 0 {
		t.Fatalf("cookies: %v", err)
	}
	c := res.Cookies[0]
	if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
		t.Errorf("sign-in cookie %+v; want HttpOnly and SameSite=Strict", c)
	}
	for _, origin := range []string{"https://evil.example", ""} {
		req, _ := http.NewRequestWithContext(ctx, "POST", e.origin+"/run/inbox-tamper/decide", strings.NewReader(`{"approve":true}`))
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site POST (Origin %q): %d; want 403", origin, resp.StatusCode)
		}
	}
	if st, err := e.sc.Status(ctx, "inbox-tamper"); err != nil || st.State != contract.StatusAwaitingApproval {
		t.Errorf("after cross-site POSTs: state %q, %v; want awaiting_approval", st.State, err)
	}
}

// decideAndReturn decides on the page in view with the given actions (a click on the Decide
// card's approve or deny), then, as a reviewer who wants to see the decided run or cell, follows
// the note that the next page shows (the page goes on to the next waiting run or cell, or the
// list, after a decision) back to it.
func (e *env) decideAndReturn(actions ...chromedp.Action[chromedp.Void]) {
	e.t.Helper()
	path := e.Text(`location.pathname`)
	e.Do(actions...)
	e.WaitFor("the page after the decision, with its note", fmt.Sprintf(`location.pathname !== %q && !!document.getElementById("decided-link")`, path), 30*time.Second)
	e.Do(chromedp.Click(chromedp.ID("decided-link")))
	e.WaitFor("the decided page, from the note's link", fmt.Sprintf(`location.pathname === %q && document.readyState === "complete"`, path), 30*time.Second)
}
