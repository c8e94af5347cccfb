//go:build integration

package inbox_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// liveDockerBackend is the Docker backend (runc) on the real daemon, closed when t ends.
func liveDockerBackend(t *testing.T) *docker.Backend {
	t.Helper()
	need.Need(t, need.Docker)
	img := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE")
	if img == "" {
		img = "sandboxflow-test-python:bookworm-full"
	}
	b, err := docker.New(docker.Config{Image: img, Deployment: "inbox-live", Labels: map[string]string{"test.sandboxflow.suite": "inbox-live"}})
	if err != nil {
		t.Fatalf("docker backend: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Close(ctx)
	})
	return b
}

// The run page shows a running run's output live, to a signed-in reviewer only. Hostile code in a
// real Docker sandbox (runc) prints ANSI and OSC escape sequences, bytes that are not UTF-8 and
// HTML, then, seconds after the page showed its first lines, one more line: the page appends
// it without a reload, every byte as text (no element is made, no control character reaches
// the page), then shows the result. The live endpoint refuses a read without a session, from
// another origin, from another site's fetch and without the page's CSRF token.
func TestBrowserInboxLiveOutput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startEnvWith(t, ctx, liveDockerBackend(t))
	signInAlice(t, e)

	code := "import sys, time\n" +
		"print('first line', flush=True)\n" +
		"sys.stdout.buffer.write(b'red \\x1b[31mX\\x1b[0m title \\x1b]0;pwned\\x07 bad \\xff <b id=\"injected\">bold</b><img src=x onerror=\"document.title=1\">\\n'); sys.stdout.flush()\n" +
		"sys.stderr.write('warn \\x1b[2J\\n'); sys.stderr.flush()\n" +
		"time.sleep(6)\n" +
		"print('late line', flush=True)\n" +
		"time.sleep(2)\n"
	if _, err := e.sc.Start(ctx, guard.Request{Code: code, Language: guard.Python, Settings: guard.Settings{Limits: guard.Limits{Timeout: 30 * time.Second}}},
		client.StartOptions{WorkflowID: "inbox-live"}); err != nil {
		t.Fatal(err)
	}
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-live"))
	e.WaitFor("the run page", `!!document.getElementById("approve")`, 20*time.Second)
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("the first lines, live", `!!document.getElementById("live-stdout") && document.getElementById("live-stdout").textContent.includes("bold")`, 60*time.Second)
	// The page stays as it is from here on: a reload would drop this mark.
	e.Text(`(window.__sameDocument = "yes")`)
	if got := e.Text(`document.querySelector("#live .live-unsigned") ? document.querySelector("#live .live-unsigned").textContent : ""`); !strings.HasPrefix(got, "Unsigned:") {
		t.Errorf("the live output is not labelled unsigned: %q", got)
	}
	if got := e.Text(`document.getElementById("live-stdout").textContent`); strings.Contains(got, "late line") {
		t.Fatalf("the late line was on the page before it was printed: %q", got)
	}
	csrf := e.Text(`document.querySelector('meta[name="csrf-token"]').content`)
	checkLiveReads(t, e, ctx, csrf)

	// The whole line: under python -u, print writes the text and its newline with two writes,
	// which may reach the page in two heartbeats.
	e.WaitFor("the late line, appended", `document.getElementById("live-stdout").textContent.includes("late line\n")`, 20*time.Second)
	if mark := e.Text(`String(window.__sameDocument)`); mark != "yes" {
		t.Fatalf("the page reloaded to show the late line (mark %q); want it appended live", mark)
	}
	stdout := e.Text(`document.getElementById("live-stdout").textContent`)
	stderr := e.Text(`document.getElementById("live-stderr").textContent`)
	wantOut := `first line
red \x1b[31mX\x1b[0m title \x1b]0;pwned\x07 bad \xff <b id="injected">bold</b><img src=x onerror="document.title=1">
late line
`
	if stdout != wantOut || stderr != `warn \x1b[2J`+"\n" {
		t.Errorf("live stdout %q, stderr %q; want %q and the escaped stderr", stdout, stderr, wantOut)
	}
	if n := e.Text(`String(document.querySelectorAll("#live-stdout *, #live-stderr *, #injected").length)`); n != "0" {
		t.Errorf("%s elements made from the output; want none (text only)", n)
	}
	if title := e.Text(`document.title`); title == "1" {
		t.Error("the output ran script on the page")
	}
	for _, c := range stdout + stderr {
		if c < 0x20 && c != '\n' || c == 0x7f || c == 0xfffd {
			t.Fatalf("a control or replaced character %U reached the page: %q", c, stdout)
		}
	}
	// The output is not UTF-8: the result offers it as a download.
	e.WaitFor("the result", `!!document.getElementById("result-outcome") && document.getElementById("result-outcome").textContent === "succeeded"`, 60*time.Second)
}

// checkLiveReads reads the live endpoint as others would, with the reviewer's own cookie where
// a thief could replay it: only the page's own script is answered.
func checkLiveReads(t *testing.T, e *env, ctx context.Context, csrf string) {
	t.Helper()
	res, err := chromedp.Call(e.Ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{e.origin}})
	if err != nil || len(res.Cookies) == 0 {
		t.Fatalf("cookies: %v", err)
	}
	cookie := &http.Cookie{Name: res.Cookies[0].Name, Value: res.Cookies[0].Value}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		name    string
		cookie  bool
		headers map[string]string
		want    int
	}{
		{"no session", false, map[string]string{"X-CSRF-Token": csrf}, http.StatusUnauthorized},
		{"another origin", true, map[string]string{"X-CSRF-Token": csrf, "Origin": "https://evil.example"}, http.StatusForbidden},
		{"another site's fetch", true, map[string]string{"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"no CSRF token", true, nil, http.StatusForbidden},
		{"a wrong CSRF token", true, map[string]string{"X-CSRF-Token": "x" + csrf}, http.StatusForbidden},
		{"the page's own read", true, map[string]string{"X-CSRF-Token": csrf, "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
	} {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.origin+"/run/inbox-live/live", nil)
		if tc.cookie {
			req.AddCookie(cookie)
		}
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 4096)
		n, _ := resp.Body.Read(body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %q; want %d", tc.name, resp.StatusCode, body[:n], tc.want)
		}
		if tc.want != http.StatusOK && strings.Contains(string(body[:n]), "first line") {
			t.Errorf("%s: the answer holds the output: %q", tc.name, body[:n])
		}
		if tc.want == http.StatusOK && !strings.Contains(string(body[:n]), "first line") {
			t.Errorf("%s: %q; want the output", tc.name, body[:n])
		}
	}
}

// A session's page shows its running cell's output live the same way: a line the cell prints
// seconds after the page showed its first one is appended without a reload, as text.
func TestBrowserSessionLiveOutput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startEnvWith(t, ctx, liveDockerBackend(t))
	signInAlice(t, e)
	const id = "inbox-live-session"
	if _, err := e.c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: id, TaskQueue: e.queue}, contract.SessionWorkflowName,
		contract.SessionInput{Request: guard.SessionRequest{}}); err != nil {
		t.Fatal(err)
	}
	requireSessionWorkflow(t, e, ctx, id)
	submit(t, e, ctx, id, "import time\nprint('cell first <i>x</i> \\x1b[1m', flush=True)\ntime.sleep(6)\nprint('cell late', flush=True)\ntime.sleep(1)\n")
	e.Do(chromedp.Navigate(e.origin + "/session/" + id))
	e.WaitFor("cell 1's sign form", `!!document.getElementById("approve") && document.getElementById("decide").dataset.cell === "1"`, 20*time.Second)
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("the cell's first line, live", `!!document.getElementById("live-stdout") && document.getElementById("live-stdout").textContent.includes("cell first")`, 60*time.Second)
	e.Text(`(window.__sameDocument = "yes")`)
	if got := e.Text(`document.getElementById("live-stdout").textContent`); strings.Contains(got, "cell late") {
		t.Fatalf("the late line was on the page before it was printed: %q", got)
	}
	e.WaitFor("the late line, appended", `document.getElementById("live-stdout").textContent.includes("cell late\n")`, 20*time.Second) // its newline may come a heartbeat later
	if mark := e.Text(`String(window.__sameDocument)`); mark != "yes" {
		t.Fatalf("the page reloaded to show the late line (mark %q); want it appended live", mark)
	}
	if got, want := e.Text(`document.getElementById("live-stdout").textContent`), "cell first <i>x</i> \\x1b[1m\ncell late\n"; got != want {
		t.Errorf("live stdout %q; want %q", got, want)
	}
	if n := e.Text(`String(document.querySelectorAll("#live-stdout *").length)`); n != "0" {
		t.Errorf("%s elements made from the output; want none", n)
	}
	e.WaitFor("the cell's result", `!!document.querySelector("#result-1 pre.stdout") && document.querySelector("#result-1 pre.stdout").textContent.includes("cell late")`, 60*time.Second)
	if _, err := e.c.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{WorkflowID: id, UpdateName: contract.UpdateCloseSession,
		Args: []any{contract.CloseSession{Reason: "test over"}}, WaitForStage: tclient.WorkflowUpdateStageAccepted}); err != nil {
		t.Errorf("close the session: %v", err)
	}
}
