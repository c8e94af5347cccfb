//go:build integration

package inbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
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
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
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

// A namespace writer's RunCode, on a queue only its own worker polls, names itself part of a
// conversation and answers its status as succeeded, approved by alice, with the very code of the
// conversation's next run. That run's page names it as the previous run but shows its decision
// as unverified (its history holds no decision alice signed), never "approved by alice".
func TestBrowserConversationMadeUpPreviousRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	signInAlice(t, e)
	const code = "print('same code')\n"
	rogue := func(ctx workflow.Context, in contract.Input) error {
		info := workflow.GetInfo(ctx)
		st := contract.Status{State: contract.StatusSucceeded, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			Request:      guard.Summary{Code: in.Request.Code, Language: guard.Python},
			DecisionWait: contract.DecisionWait{Decision: &contract.DecisionRecord{Approve: true, Reviewer: "alice", Time: workflow.Now(ctx), Method: "ssh"}}}
		if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.Status, error) { return st, nil }); err != nil {
			return err
		}
		return workflow.Sleep(ctx, time.Hour)
	}
	const queue = "sandboxflow-inbox-rogue-previous"
	w := worker.New(e.c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.WorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := e.c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: "conv-made-up", TaskQueue: queue,
		TypedSearchAttributes: temporal.NewSearchAttributes(contract.ConversationKey.ValueSet("task-rogue"))},
		contract.WorkflowName, contract.Input{Request: guard.Request{Code: code, Conversation: "task-rogue"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the next run starts after it
	if _, err := e.sc.Start(ctx, guard.Request{Code: code, Conversation: "task-rogue"}, client.StartOptions{WorkflowID: "conv-after-made-up"}); err != nil {
		t.Fatal(err)
	}
	var outcome string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		e.Do(chromedp.Navigate(e.origin + "/run/conv-after-made-up"))
		e.WaitFor("the run's page", `!!document.getElementById("conversation")`, 20*time.Second)
		outcome = e.Text(`document.getElementById("conversation-outcome") ? document.getElementById("conversation-outcome").textContent : ""`)
		if outcome != "" || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(outcome, "unverified") || strings.Contains(outcome, "approved by") {
		t.Errorf("the made-up previous run reads %q; want it unverified", outcome)
	}
	if got := e.Text(`document.getElementById("conversation-previous").innerText`); !strings.Contains(got, "conv-made-up") {
		t.Errorf("previous run line %q; want the made-up run named", got)
	}
}
