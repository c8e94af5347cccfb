//go:build integration

package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// signIn registers alice's passkey, lists it in the reviewers file and signs in with it.
func signIn(t *testing.T, e *env) {
	t.Helper()
	e.Do(chromedp.Navigate(e.origin + "/signin"))
	e.WaitFor("the sign-in page", `!!document.getElementById("register-name")`, 20*time.Second)
	e.Do(chromedp.SendKeys(chromedp.ID("register-name"), "alice"), chromedp.Click(chromedp.ID("register")))
	e.WaitFor("the reviewers-file line", `document.getElementById("register-line").textContent.length > 0`, 20*time.Second)
	line := e.Text(`document.getElementById("register-line").textContent`)
	if err := os.WriteFile(e.reviewers, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Do(chromedp.Click(chromedp.ID("signin")))
	e.WaitFor("the pending list", `location.pathname === "/"`, 30*time.Second)
}

// TestBrowserInboxCancel: a signed-in reviewer cancels a waiting run (nothing runs; the page says
// who cancelled) and a running one (the result is the output printed before, outcome
// cancelled, the reviewer's principal as who cancelled) with the run page's Cancel button; the
// cancel endpoint refuses a POST from another origin, without an origin, without a session, and
// from a session that is not signed in, and the run goes on waiting.
func TestBrowserInboxCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	signIn(t, e)
	e.start(ctx, "inbox-cancel-wait", fmt.Sprintf("open(%q, 'a').write('cancelled run ran\\n')\n", e.counter), nil)
	e.start(ctx, "inbox-cancel-run", fmt.Sprintf("import time\nopen(%q, 'a').write('ran\\n')\nfor i in range(1, 600):\n"+
		"    print('tick', i, flush=True)\n    time.sleep(0.1)\n", e.counter), nil)

	// Another origin's page, and a client with no page at all, posting with the reviewer's own
	// cookie; a client with no cookie; an anonymous sign-in with its own CSRF token.
	res, err := chromedp.Call(e.Ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{e.origin}})
	if err != nil || len(res.Cookies) == 0 {
		t.Fatalf("cookies: %v", err)
	}
	cookie := &http.Cookie{Name: res.Cookies[0].Name, Value: res.Cookies[0].Value}
	csrf := e.Text(`document.querySelector('meta[name="csrf-token"]').content`)
	post := func(origin string, c *http.Cookie, token string) int {
		form := url.Values{"reason": {"forged"}}
		if token != "" {
			form.Set("csrf", token)
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", e.origin+"/run/inbox-cancel-wait/cancel", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if c != nil {
			req.AddCookie(c)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name         string
		origin       string
		cookie       *http.Cookie
		token        string
		want, wantOr int
	}{
		{"cross-origin with the reviewer's cookie and token", "https://evil.example", cookie, csrf, http.StatusForbidden, 0},
		{"no origin", "", cookie, csrf, http.StatusForbidden, 0},
		{"same origin, no token", e.origin, cookie, "", http.StatusForbidden, 0},
		{"same origin, no session", e.origin, nil, csrf, http.StatusForbidden, 0},
	} {
		if got := post(tc.origin, tc.cookie, tc.token); got != tc.want {
			t.Errorf("%s: %d; want %d", tc.name, got, tc.want)
		}
	}
	anon, anonCSRF := anonymousSession(t, ctx, e.origin)
	if got := post(e.origin, anon, anonCSRF); got != http.StatusUnauthorized {
		t.Errorf("an anonymous sign-in with its own CSRF token: %d; want 401", got)
	}
	if st, err := e.sc.Status(ctx, "inbox-cancel-wait"); err != nil || st.State != contract.StatusAwaitingApproval || st.Cancel != nil {
		t.Fatalf("after the refused POSTs: state %q cancel %+v, %v; want still awaiting approval", st.State, st.Cancel, err)
	}

	// The waiting run, cancelled with the button: nothing runs; the page says by whom.
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-cancel-wait"))
	e.WaitFor("the cancel button", `!!document.getElementById("cancel-run")`, 20*time.Second)
	e.Do(chromedp.SendKeys(chromedp.ID("cancel-reason"), "not needed"), chromedp.Click(chromedp.ID("cancel-run")))
	e.WaitFor("the cancelled state", `document.getElementById("run-state").dataset.state === "cancelled" && !!document.getElementById("cancelled-by")`, 20*time.Second)
	if got := e.Text(`document.getElementById("cancelled-by").innerText`); !strings.Contains(got, "Cancelled by alice") || !strings.Contains(got, "not needed") {
		t.Errorf("cancel record on the page: %q; want by alice, with the reason", got)
	}
	if e.Text(`String(!!document.getElementById("cancel-run") || !!document.getElementById("approve"))`) != "false" {
		t.Error("a cancelled run's page still offers cancel or approve")
	}
	_, err = e.sc.Result(ctx, "inbox-cancel-wait")
	var c *guard.Cancelled
	if !errors.As(err, &c) || c.By != "alice" {
		t.Errorf("result error %v; want Cancelled by alice", err)
	}

	// The running run: approved, then cancelled mid-run.
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-cancel-run"))
	e.WaitFor("the run page", `!!document.getElementById("approve")`, 20*time.Second)
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("the running state", `document.getElementById("run-state").dataset.state === "running" && !!document.getElementById("cancel-run")`, 30*time.Second)
	time.Sleep(time.Second)
	// One script: the page reloads itself every 2 s while the code runs.
	e.Text(`(document.getElementById("cancel-reason").value = "runaway", document.getElementById("cancel-run").click(), "ok")`)
	e.WaitFor("the cancelled result", `!!document.getElementById("result-outcome") && document.getElementById("result-outcome").textContent === "cancelled"`, 30*time.Second)
	if got := e.Text(`document.getElementById("result-stdout").textContent`); !strings.HasPrefix(got, "tick 1\n") || strings.Contains(got, "tick 599") {
		t.Errorf("stdout on the page %q; want the ticks printed before the cancel", got)
	}
	if got := e.Text(`document.getElementById("cancelled-by").innerText`); !strings.Contains(got, "Cancelled by alice") || !strings.Contains(got, "runaway") {
		t.Errorf("cancel record on the page: %q; want by alice, runaway", got)
	}
	r, err := e.sc.Result(ctx, "inbox-cancel-run")
	if err != nil || r.Outcome != guard.OutcomeCancelled || r.Cancelled == nil || r.Cancelled.By != "alice" {
		t.Errorf("result %+v, %v; want cancelled by alice", r.Cancelled, err)
	}
	if n := e.runs(); n != 1 {
		t.Errorf("the code ran %d times; want once (the running run only)", n)
	}
}

// anonymousSession opens the sign-in page without signing in and returns its session cookie and
// CSRF token.
func anonymousSession(t *testing.T, ctx context.Context, origin string) (*http.Cookie, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", origin+"/signin", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := make([]byte, 64<<10)
	n, _ := resp.Body.Read(body)
	page := string(body[:n])
	_, rest, ok := strings.Cut(page, `<meta name="csrf-token" content="`)
	token, _, _ := strings.Cut(rest, `"`)
	if !ok || token == "" || len(resp.Cookies()) == 0 {
		t.Fatalf("the sign-in page gave no session or CSRF token")
	}
	return resp.Cookies()[0], token
}
