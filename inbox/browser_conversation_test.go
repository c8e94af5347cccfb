//go:build integration

package inbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A conversation's second run in chromium: its page names the first run and alice's approval of
// it, and draws the diff as text (markup and direction controls the code holds are escaped,
// never parsed), under the notice that the diff changes nothing signed.
func TestBrowserConversationDiff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	signInAlice(t, e)

	start := func(id, code string) {
		t.Helper()
		if _, err := e.sc.Start(ctx, guard.Request{Code: code, Conversation: "task-9", Settings: guard.Settings{Metadata: guard.Metadata{Agent: "fixer"}}},
			client.StartOptions{WorkflowID: id}); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
	}
	start("conv-first", "x = 1\nprint(x)\n")
	e.Do(chromedp.Navigate(e.origin + "/run/conv-first"))
	e.WaitFor("the first run's page", `!!document.getElementById("approve") && !!document.getElementById("conversation-first")`, 20*time.Second)
	e.Do(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("the first run's result", `!!document.getElementById("result-stdout") && document.getElementById("result-stdout").textContent === "1\n"`, 60*time.Second)

	start("conv-second", "x = 2\nprint('<script>document.title=\"owned\"</script>', x) # \u202e\n")
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.Do(chromedp.Navigate(e.origin + "/run/conv-second"))
		e.WaitFor("the second run's page", `!!document.getElementById("conversation")`, 20*time.Second)
		if e.Text(`String(!!document.getElementById("conversation-diff"))`) == "true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no diff on the second run's page: %s", e.Text(`document.getElementById("conversation").innerText`))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if got := e.Text(`document.getElementById("conversation-outcome").textContent`); got != "approved by alice" {
		t.Errorf("the previous run's outcome reads %q; want approved by alice", got)
	}
	if got := e.Text(`document.getElementById("conversation-previous").innerText`); !strings.Contains(got, "conv-first") || !strings.Contains(got, "2 line(s) added, 2 removed") {
		t.Errorf("previous run line %q", got)
	}
	diff := e.Text(`document.getElementById("conversation-diff").innerText`)
	for _, want := range []string{"--- previous/code", "+++ this/code", "-x = 1", "-print(x)", "+x = 2", `+print('<script>document.title="owned"</script>', x) # \u202e`} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff lacks %q:\n%s", want, diff)
		}
	}
	if got := e.Text(`String(document.querySelectorAll("#conversation script").length) + " " + document.title`); strings.HasPrefix(got, "1") || strings.Contains(got, "owned") {
		t.Errorf("the code's markup was parsed: %s", got)
	}
	if strings.Contains(diff, "\u202e") {
		t.Error("the diff draws a raw direction control")
	}
	if got := e.Text(`document.getElementById("conversation-notice").textContent`); got != client.ConversationNotice {
		t.Errorf("notice %q", got)
	}
	if got := e.Text(`document.getElementById("conversation-id").textContent`); got != "task-9" {
		t.Errorf("the request's conversation reads %q", got)
	}
	e.Screenshot("inbox-conversation.png")
}
