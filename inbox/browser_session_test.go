//go:build integration

package inbox_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/chromedp/chromedp"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// TestBrowserSessionPage is a session (issue 28) reviewed in a real browser with a passkey,
// against the worker's own Session workflow and sandbox: the pending list shows the session's
// waiting cell; the page of cell 2 shows cell 1's code and output and a diff against it; each
// approval runs its cell once, in the one interpreter (cell 2 prints 42 from cell 1's x); a
// decision made on a page read before a newer cell came is refused, and the newer cell still
// waits; a hostile cell (it replaces print and kills the interpreter) is shown to the next
// cell's reviewer, and the next cell runs in a fresh interpreter that says so.
func TestBrowserSessionPage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	// The session's check records the reviewers file as it is then: alice's line comes first.
	signInAlice(t, e)

	const id = "inbox-session"
	if _, err := e.c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: id, TaskQueue: e.queue}, contract.SessionWorkflowName, contract.SessionInput{
		Request: guard.SessionRequest{Settings: guard.Settings{
			Files:    map[string][]byte{"data.csv": []byte("a,b\n1,2\n")},
			Env:      map[string]string{"MODE": "dry run "},
			Metadata: guard.Metadata{Agent: "notebook-agent"},
		}},
	}); err != nil {
		t.Fatal(err)
	}
	requireSessionWorkflow(t, e, ctx, id)

	submit(t, e, ctx, id, fmt.Sprintf("x = 41\nopen(%q, 'a').write('cell 1 ran\\n')\nprint('x is', x)\n", e.counter))
	e.Do(chromedp.Navigate(e.origin + "/"))
	e.WaitFor("the session in the list", `!!document.querySelector('a[href="/session/inbox-session"]') &&
		document.getElementById("pending-rows").innerText.includes("session · cell 1")`, 60*time.Second)
	if e.Text(`String(!!document.querySelector('a[href="/run/inbox-session"]'))`) != "false" {
		t.Error("the pending list links the session as a run too")
	}
	e.Do(chromedp.Navigate(e.origin + "/session/" + id))
	e.WaitFor("cell 1's sign form", `!!document.getElementById("approve") && document.getElementById("decide").dataset.cell === "1"`, 20*time.Second)
	if got := e.Text(`document.body.innerText`); !strings.Contains(got, `MODE = "dry run "`) || !strings.Contains(got, "x is") || strings.Contains(got, "Changes from cell") {
		t.Errorf("cell 1's page: %q; want the env value, the code and no diff", got)
	}
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("cell 1's output", `!!document.querySelector("#result-1 pre.stdout") && document.querySelector("#result-1 pre.stdout").textContent.includes("x is 41")`, 60*time.Second)

	submit(t, e, ctx, id, fmt.Sprintf("open(%q, 'a').write('cell 2 ran\\n')\nprint(x + 1)\n", e.counter))
	e.Do(chromedp.Navigate(e.origin + "/session/" + id))
	e.WaitFor("cell 2's sign form", `!!document.getElementById("approve") && document.getElementById("decide").dataset.cell === "2"`, 20*time.Second)
	// Cell 2 is another program, not a retry of cell 1: it is drawn whole, diffed against nothing.
	if n := e.Text(`String(document.querySelectorAll("#diff tr").length)`); n != "0" {
		t.Errorf("cell 2, which retries no cell, is drawn with a diff of %s rows against another cell", n)
	}
	if got := e.Text(`document.querySelector("#result-1 pre.stdout").textContent`); !strings.Contains(got, "x is 41") {
		t.Errorf("cell 2's page shows cell 1's output as %q", got)
	}
	e.Do(chromedp.Evaluate[chromedp.Void](`document.getElementById("cell-2").scrollIntoView()`))
	e.Screenshot("inbox-session.png")
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("cell 2's output", `!!document.querySelector("#result-2 pre.stdout") && document.querySelector("#result-2 pre.stdout").textContent.includes("42")`, 60*time.Second)

	// Cell 3's page is read, then cell 3 is denied elsewhere and cell 4 comes: the decision
	// made on the page read for cell 3 is refused.
	submit(t, e, ctx, id, "print('cell three')\n")
	e.Do(chromedp.Navigate(e.origin + "/session/" + id))
	e.WaitFor("cell 3's sign form", `!!document.getElementById("deny") && document.getElementById("decide").dataset.cell === "3"`, 20*time.Second)
	// What the page for cell 3 offered, kept across the reloads to come.
	stale := e.Text(`JSON.stringify({statement: document.getElementById("statement-approve").textContent,
		approval_id: document.getElementById("statement-approve").dataset.approvalId, expires: document.getElementById("statement-approve").dataset.expires,
		digest: document.getElementById("decide").dataset.digest})`)
	e.decideAndReturn(chromedp.Focus(chromedp.ID("deny-reason")), chromedp.SendKeys(chromedp.ID("deny-reason"), "not now"), chromedp.Click(chromedp.ID("deny")))
	e.WaitFor("cell 3's denial", `!!document.getElementById("cell-3") && document.getElementById("cell-3").dataset.state === "denied"`, 30*time.Second)
	// Cell 4 is hostile: it replaces print for every later cell and kills the interpreter.
	submit(t, e, ctx, id, fmt.Sprintf("import builtins, os\nopen(%q, 'a').write('cell 4 ran\\n')\nbuiltins.print = lambda *a, **k: None\nos._exit(3)\n", e.counter))
	e.Do(chromedp.Evaluate[chromedp.Void](`window.stale = ` + stale + `; (async function () {
		window.staleAnswer = "";
		try {
			const dec = s => Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/")), c => c.charCodeAt(0));
			const enc = b => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
			const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(window.stale.statement));
			const box = document.getElementById("decide");
			const cred = await navigator.credentials.get({publicKey: {challenge: new Uint8Array(digest), rpId: location.hostname,
				allowCredentials: box && box.dataset.credential ? [{type: "public-key", id: dec(box.dataset.credential)}] : [], userVerification: "required"}});
			const r = cred.response;
			const res = await fetch(location.pathname + "/decide", {method: "POST", credentials: "same-origin",
				headers: {"Content-Type": "application/json", "X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content},
				body: JSON.stringify({approve: true, approval_id: window.stale.approval_id, expires: window.stale.expires, statement: window.stale.statement,
					cell: 3, digest: window.stale.digest, webauthn: {credential_id: enc(cred.rawId), authenticator_data: enc(r.authenticatorData),
					client_data_json: enc(r.clientDataJSON), signature: enc(r.signature), user_handle: r.userHandle ? enc(r.userHandle) : ""}})});
			window.staleAnswer = res.status + " " + await res.text();
		} catch (err) { window.staleAnswer = "error " + err.message; }
	})()`))
	e.WaitFor("the stale decision's answer", `window.staleAnswer !== ""`, 30*time.Second)
	if got := e.Text(`window.staleAnswer`); !strings.HasPrefix(got, "409 ") || !strings.Contains(got, "cell 3 does not wait for a decision; cell 4 does") {
		t.Errorf("the decision made on cell 3's page after cell 4 came: %q; want 409, cell 4 waits", got)
	}
	var st contract.SessionStatus
	v, err := e.c.QueryWorkflow(ctx, id, "", contract.QuerySessionStatus)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil || len(st.Cells) != 4 || st.Cells[3].State != contract.StatusAwaitingApproval {
		t.Errorf("after the stale decision: %d cells, %v; want cell 4 still waiting", len(st.Cells), err)
	}
	b, err := os.ReadFile(e.counter)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "cell 1 ran\ncell 2 ran\n" {
		t.Errorf("the cells that ran wrote %q; want cells 1 and 2 once each", got)
	}
	// Approved, cell 4 ends with its own exit; cell 5's reviewer reads cell 4's code and exit, and
	// cell 5 runs in a fresh interpreter (its print is the real one, cell 1's x is gone) and says so.
	e.Do(chromedp.Navigate(e.origin + "/session/" + id))
	e.WaitFor("cell 4's sign form", `!!document.getElementById("approve") && document.getElementById("decide").dataset.cell === "4"`, 20*time.Second)
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("cell 4's outcome", `!!document.querySelector("#result-4 .outcome")`, 60*time.Second)
	submit(t, e, ctx, id, "print('x' in dir())\n")
	e.Do(chromedp.Navigate(e.origin + "/session/" + id))
	e.WaitFor("cell 5's sign form", `!!document.getElementById("approve") && document.getElementById("decide").dataset.cell === "5"`, 20*time.Second)
	if got := e.Text(`document.getElementById("cell-4").innerText`); !strings.Contains(got, "builtins.print = lambda") || !strings.Contains(got, "exit code 3") {
		t.Errorf("cell 5's page shows cell 4 as %q; want its code and its exit code 3", got)
	}
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("cell 5's output", `!!document.querySelector("#result-5 pre.stdout")`, 60*time.Second)
	if got := e.Text(`document.querySelector("#result-5 pre.stdout").textContent + "|" + (document.querySelector("#result-5 .state-reset") ? "reset" : "")`); got != "False\n|reset" {
		t.Errorf("cell 5 after the hostile cell 4: %q; want False from a fresh interpreter, marked as a state reset", got)
	}
	if b, err = os.ReadFile(e.counter); err != nil || string(b) != "cell 1 ran\ncell 2 ran\ncell 4 ran\n" {
		t.Errorf("the cells that ran wrote %q, %v; want cells 1, 2 and 4 once each", b, err)
	}
	if _, err := e.c.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{WorkflowID: id, UpdateName: contract.UpdateCloseSession,
		Args: []any{contract.CloseSession{Reason: "test over"}}, WaitForStage: tclient.WorkflowUpdateStageAccepted}); err != nil {
		t.Errorf("close the session: %v", err)
	}
}

// signInAlice registers a passkey for alice on the sign-in page, lists its line in the reviewers
// file, and signs in with it.
func signInAlice(t *testing.T, e *env) {
	t.Helper()
	e.Do(chromedp.Navigate(e.origin + "/"))
	e.WaitFor("the sign-in page", `location.pathname === "/signin" && !!document.getElementById("register-name")`, 20*time.Second)
	e.Do(chromedp.SendKeys(chromedp.ID("register-name"), "alice"), chromedp.Click(chromedp.ID("register")))
	e.WaitFor("the reviewers-file line", `document.getElementById("register-line").textContent.length > 0`, 20*time.Second)
	line := e.Text(`document.getElementById("register-line").textContent`)
	if err := os.WriteFile(e.reviewers, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Do(chromedp.Click(chromedp.ID("signin")))
	e.WaitFor("the pending list", `location.pathname === "/"`, 30*time.Second)
}

// submit submits a cell as the orchestrator does (update "submit-cell") and waits for it to be
// accepted.
func submit(t *testing.T, e *env, ctx context.Context, id, code string) contract.CellSubmitted {
	t.Helper()
	h, err := e.c.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{WorkflowID: id, UpdateName: contract.UpdateSubmitCell,
		Args: []any{contract.CellRequest{Code: code}}, WaitForStage: tclient.WorkflowUpdateStageCompleted})
	if err != nil {
		t.Fatalf("submit-cell: %v", err)
	}
	var out contract.CellSubmitted
	if err := h.Get(ctx, &out); err != nil {
		t.Fatalf("submit-cell: %v", err)
	}
	return out
}

// requireSessionWorkflow waits until the session is open. A worker that does not run the
// Session workflow (its first workflow task fails: the workflow is issue 28's other part, which
// the lead merges) skips the test, saying so, except under make test (need.RequireAll), where it
// fails.
func requireSessionWorkflow(t *testing.T, e *env, ctx context.Context, id string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		v, err := e.c.QueryWorkflow(ctx, id, "", contract.QuerySessionStatus)
		var st contract.SessionStatus
		if err == nil && v.Get(&st) == nil {
			switch st.State {
			case contract.SessionOpen:
				return
			case contract.SessionClosed, contract.SessionError:
				t.Fatalf("the session ended before any cell: %s %s", st.End, st.Error)
			}
		}
		iter := e.c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				break
			}
			if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
				msg := fmt.Sprintf("the worker does not run the Session workflow (its workflow task failed: %s); this test needs it (issue 28)", f.GetFailure().GetMessage())
				if os.Getenv(need.RequireAll) != "" {
					t.Fatal(msg)
				}
				t.Skip(msg)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the session %s did not open within a minute", id)
}

// TestBrowserSessionSignForm is the session page in a real browser against a Session workflow
// written here from the contract (a status built by guard's digests, an update handler that
// records what it gets), so the page's own part runs before the product's workflow is merged:
// chromium draws cell 1's result as unverified (no cell ran: only the status claims it) and the
// diff of cell 2 against it (which it says it retries),
// and the passkey's approval
// reaches decide-cell for cell 2 with the cell's digest, signed for that session and host.
func TestBrowserSessionSignForm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := startEnv(t, ctx)

	policy := guard.Policy{Languages: []string{guard.Python}}
	req := guard.SessionRequest{Settings: guard.Settings{Env: map[string]string{"MODE": "dry run "}, Files: map[string][]byte{"data.csv": []byte("a,b\n")}}}
	cs, err := policy.CheckSession(req, "docker")
	if err != nil {
		t.Fatal(err)
	}
	chain := guard.ChainStart(cs.Digest)
	cell := func(n int, code, state string, res *guard.Result) contract.CellStatus {
		cd := guard.CellCodeDigest(guard.Python, code)
		c := contract.CellStatus{Cell: n, Language: guard.Python, Code: code, CodeBytes: len(code), CodeDigest: cd, Chain: chain,
			Digest: guard.CellDigest(cs.Digest, n, cd, chain), State: state}
		if res != nil {
			c.Result, c.ResultDigest = res, guard.ResultDigest(*res)
			chain = guard.ChainNext(chain, c.Digest, c.ResultDigest)
		}
		return c
	}
	c1 := cell(1, "x = 41\nprint('x is', x)\n", contract.StatusSucceeded, &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("x is 41\n")})
	c2 := cell(2, "x = 41\nprint(x + 1)\n", contract.StatusAwaitingApproval, nil)
	c2.ApprovalDeadline = time.Now().Add(time.Hour)
	c2.Retries = 1
	received := make(chan contract.CellDecision, 4)
	session := func(ctx workflow.Context, _ contract.SessionInput) error {
		info := workflow.GetInfo(ctx)
		st := contract.SessionStatus{State: contract.SessionOpen, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			SandboxTaskQueue: "sandboxflow-host-b", StatementVersion: 2, Settings: cs.Summary(), Chain: chain, Cells: []contract.CellStatus{c1, c2}}
		if err := workflow.SetQueryHandler(ctx, contract.QuerySessionStatus, func() (contract.SessionStatus, error) { return st, nil }); err != nil {
			return err
		}
		if err := workflow.SetUpdateHandler(ctx, contract.UpdateDecideCell, func(ctx workflow.Context, d contract.CellDecision) (contract.DecideResult, error) {
			received <- d
			return contract.DecideResult{ApprovalID: d.Decision.ApprovalID, Approve: d.Decision.Approve, Reviewer: d.Decision.Reviewer, Digest: d.Decision.Digest, State: contract.StatusRunning}, nil
		}); err != nil {
			return err
		}
		return workflow.Await(ctx, func() bool { return false })
	}
	const queue = "sandboxflow-inbox-session-contract"
	w := worker.New(e.c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(session, workflow.RegisterOptions{Name: contract.SessionWorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run, err := e.c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: "inbox-session-contract", TaskQueue: queue}, contract.SessionWorkflowName, contract.SessionInput{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	signInAlice(t, e)
	e.Do(chromedp.Navigate(e.origin + "/session/inbox-session-contract"))
	e.WaitFor("cell 2's sign form", `!!document.getElementById("approve") && document.getElementById("decide").dataset.cell === "2"`, 30*time.Second)
	// This workflow is no sandboxflow session: its history records no check and no cell ran, so
	// cell 1's result, which only its status query claims, is drawn as unverified, not shown.
	if got := e.Text(`document.getElementById("result-unverified-1").textContent + "|" + (document.querySelector("#result-1 pre.stdout") === null) + "|" + document.getElementById("env").innerText`); !strings.HasPrefix(got, "Unverified result, not shown:") || !strings.HasSuffix(got, "|true|MODE = \"dry run \"") {
		t.Errorf("cell 1's result and the env read %q; want cell 1's invented result unverified and not shown", got)
	}
	// Cell 2 retries cell 1 (in this status; the product's workflow lets a cell retry only one
	// that did not succeed): its diff against cell 1 is drawn beside its whole code.
	diff := e.Text(`Array.from(document.querySelectorAll("#diff tr")).map(r => r.className + " " + r.querySelector("td.src").textContent).join("\n")`)
	if want := "d-same x = 41\nd-del print('x is', x)\nd-add print(x + 1)"; diff != want {
		t.Errorf("diff drawn as\n%s\nwant\n%s", diff, want)
	}
	e.Screenshot("inbox-session-contract.png")
	e.Do(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("the answer", `document.getElementById("decide-msg").textContent.includes("accepted")`, 30*time.Second)
	select {
	case d := <-received:
		if d.Cell != 2 || d.Decision.Digest != c2.Digest || !d.Decision.Approve || d.Decision.WebAuthn == nil ||
			!strings.Contains(d.Decision.Statement, "run_id: "+run.GetRunID()) || !strings.Contains(d.Decision.Statement, "sandbox_task_queue: sandboxflow-host-b") {
			t.Errorf("decide-cell got %+v; want alice's passkey approval of cell 2 (%s) of this run, on host b's queue", d, c2.Digest)
		}
	case <-ctx.Done():
		t.Fatal("no decide-cell reached the session")
	}
}
