//go:build integration

package inbox_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
)

// Approve with edits in chromium: alice, signed in with her passkey, opens the inbox editor on a
// run, and an edit the policy refuses (a NUL byte) is refused with the policy's reason while the
// run still waits on the code it was started with; her edit of the code is signed (the statement
// shows the edited digest) and runs, once: the edited code, not the started one, and the page's
// result names her as the editor with both digests.
func TestBrowserInboxApproveWithEdit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)

	e.Do(chromedp.Navigate(e.origin + "/"))
	e.WaitFor("the sign-in page", `location.pathname === "/signin" && !!document.getElementById("register-name")`, 20*time.Second)
	e.Do(chromedp.SendKeys(chromedp.ID("register-name"), "alice"), chromedp.Click(chromedp.ID("register")))
	e.WaitFor("the reviewers-file line", `document.getElementById("register-line").textContent.length > 0`, 20*time.Second)
	line := e.Text(`document.getElementById("register-line").textContent`)
	if err := os.WriteFile(e.reviewers, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start(ctx, "inbox-edit", fmt.Sprintf("open(%q, 'a').write('original ran\\n')\n", e.counter), nil)
	e.Do(chromedp.Click(chromedp.ID("signin")))
	e.WaitFor("the pending list", `location.pathname === "/" && !!document.querySelector('a[href="/run/inbox-edit"]')`, 60*time.Second)
	if rows := e.Text(`document.getElementById("pending-rows").innerText`); !strings.Contains(rows, "0 of 1") {
		t.Errorf("the pending list %q; want the run's approvals, 0 of 1", rows)
	}

	e.Do(chromedp.Navigate(e.origin + "/run/inbox-edit"))
	e.WaitFor("the editor", `!!document.getElementById("edit-code")`, 20*time.Second)
	original := e.Text(`document.getElementById("digest").textContent`)
	if got := e.Text(`document.getElementById("edit-code").value`); !strings.HasPrefix(got, "open(") {
		t.Fatalf("the editor starts with %q; want the run's code", got)
	}
	if q := e.Text(`document.getElementById("quorum").innerText`); !strings.Contains(q, "0 of 1") {
		t.Errorf("approvals shown %q; want 0 of 1", q)
	}

	// An edit the policy refuses.
	e.Do(chromedp.Evaluate[chromedp.Void](`document.getElementById("edit").open = true; document.getElementById("edit-code").value = "print('a')\u0000"`),
		chromedp.Click(chromedp.ID("edit-prepare")))
	e.WaitFor("the refused edit's statement", `!document.getElementById("statement-edit").hidden`, 20*time.Second)
	e.Do(chromedp.Click(chromedp.ID("edit-approve")))
	e.WaitFor("the refusal", `document.getElementById("decide-msg").textContent.includes("the policy refuses the edited request")`, 30*time.Second)
	if msg := e.Text(`document.getElementById("decide-msg").textContent`); !strings.Contains(msg, "NUL") {
		t.Errorf("refusal %q; want the policy's reason (a NUL byte)", msg)
	}
	st, err := e.sc.Status(ctx, "inbox-edit")
	if err != nil || st.State != contract.StatusAwaitingApproval || st.Request.Digest != original || st.Edit != nil {
		t.Fatalf("after the refused edit: %+v, %v; want still waiting on the original", st, err)
	}

	// Her edit, approved.
	editedCode := fmt.Sprintf("open(%q, 'a').write('edited ran\\n')\nprint('edited by alice')\n", e.counter)
	e.Do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById("edit-code").value = %q`, editedCode)),
		chromedp.Click(chromedp.ID("edit-prepare")))
	e.WaitFor("the edited statement", `!document.getElementById("statement-edit").hidden && document.getElementById("decide-msg").textContent.includes("Read the statement")`, 20*time.Second)
	if stmt := e.Text(`document.getElementById("statement-edit").textContent`); strings.Contains(stmt, original) || !strings.Contains(stmt, "digest: sha256:") {
		t.Errorf("the edited statement %q; want a digest other than the original's", stmt)
	}
	e.Screenshot("inbox-edit.png")
	e.decideAndReturn(chromedp.Click(chromedp.ID("edit-approve")))
	e.WaitFor("the result", `!!document.getElementById("result-stdout") && document.getElementById("result-stdout").textContent.includes("edited by alice")`, 60*time.Second)
	got := e.Text(`document.getElementById("result-edit").innerText`)
	res, err := e.sc.WaitResult(ctx, client.Run("inbox-edit"), 0)
	if err != nil || res.Edit == nil || res.Edit.Editor != "alice" || res.Edit.OriginalDigest != original || res.Edit.Digest == original {
		t.Fatalf("result %+v, %v; want the edit by alice with both digests", res.Edit, err)
	}
	for _, want := range []string{"alice", original, res.Edit.Digest} {
		if !strings.Contains(got, want) {
			t.Errorf("the page's result says %q; want %q", got, want)
		}
	}
	time.Sleep(time.Second)
	if b, _ := os.ReadFile(e.counter); string(b) != "edited ran\n" {
		t.Errorf("what ran: %q; want the edited code, once", b)
	}
}
