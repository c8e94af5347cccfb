//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
)

// reviewEnv is a server and a worker (local python, no Docker) with the starter built.
func reviewEnv(t *testing.T, queue string) *agenttest.Env {
	t.Helper()
	return agenttest.Setup(t, agenttest.Options{Policy: &guard.Policy{Languages: []string{guard.Python}, ApprovalTimeout: time.Hour}, TaskQueue: queue})
}

// startWaiting starts a run through the starter and returns it once its check let it wait.
func startWaiting(t *testing.T, e *agenttest.Env, id, code string) client.Started {
	t.Helper()
	r := binary(t, e, "", "run", "--code", code, "--workflow-id", id)
	var s client.Started
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
		t.Fatalf("run %s: exit %d, %s %s", id, r.code, r.stdout, r.stderr)
	}
	return s
}

// waitState waits (20 s at most) until the run's state is want.
func waitState(t *testing.T, e *agenttest.Env, id, want string) contract.Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := e.Client.Status(context.Background(), id)
		if err == nil && st.State == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: state %q, %v after 20 s; want %s", id, st.State, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitListed waits (30 s at most: visibility is eventually consistent) until pending lists
// every one of ids.
func waitListed(t *testing.T, e *agenttest.Env, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		listed, _ := e.Client.Pending(context.Background())
		n := 0
		for _, p := range listed {
			for _, id := range ids {
				if p.WorkflowID == id {
					n++
				}
			}
		}
		if n == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending lists %d of %v after 30 s", n, ids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// shell runs script with sh, the starter's environment and $STARTER, and returns its stdout.
func shell(t *testing.T, e *agenttest.Env, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(append(os.Environ(), binaryEnv(e)...), "STARTER="+e.Starter)
	return cmd
}

// run --wait and approve --wait, piped into jq, print exactly one value: each prints one JSON
// document, the result.
func TestIntegrationWaitPrintsOneDocument(t *testing.T) {
	need.Need(t, need.Python3)
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatalf("jq is needed: %v", err)
	}
	e := reviewEnv(t, "one-doc")
	var out, errb bytes.Buffer
	pipe := shell(t, e, `"$STARTER" run --code 'print(1)' --workflow-id one-doc-run --wait | jq .ok`)
	pipe.Stdout, pipe.Stderr = &out, &errb
	if err := pipe.Start(); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, e, "one-doc-run", contract.StatusAwaitingApproval)
	if r := binary(t, e, "", "approve", "one-doc-run", "--digest", st.Request.Digest); r.code != 0 {
		t.Fatalf("approve: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if err := pipe.Wait(); err != nil || out.String() != "true\n" {
		t.Errorf("run --wait | jq .ok: %v, printed %q (stderr %s); want exactly true", err, out.String(), errb.String())
	}

	s := startWaiting(t, e, "one-doc-approve", "print(2)")
	waitState(t, e, s.WorkflowID, contract.StatusAwaitingApproval)
	got, err := shell(t, e, `"$STARTER" approve one-doc-approve --digest `+s.Digest+` --wait | jq -c '[.ok, .digest]'`).Output()
	if want := fmt.Sprintf("[true,%q]\n", s.Digest); err != nil || string(got) != want {
		t.Errorf("approve --wait | jq: %v, printed %q; want %q", err, got, want)
	}
}

// tmuxPane is a command running in a detached tmux pane with a server of its own.
type tmuxPane struct {
	t    *testing.T
	sock string
}

func (p tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", p.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// waitFor waits (20 s at most) until the pane's screen holds every one of want, and returns it.
func (p tmuxPane) waitFor(want ...string) string {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		screen := p.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "review")
		missing := ""
		for _, w := range want {
			if !strings.Contains(screen, w) {
				missing = w
			}
		}
		if missing == "" {
			return screen
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the pane never showed %q:\n%s", missing, screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForNth waits (20 s at most) until the pane's screen holds want n times, and returns it.
func (p tmuxPane) waitForNth(want string, n int) string {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		screen := p.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "review")
		if strings.Count(screen, want) >= n {
			return screen
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the pane never showed %q %d times:\n%s", want, n, screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// send types text into the pane, then Enter.
func (p tmuxPane) send(text string) {
	p.t.Helper()
	p.tmux("send-keys", "-t", "review", "-l", text)
	p.tmux("send-keys", "-t", "review", "Enter")
}

// starter review in a real terminal (tmux): three waiting runs, each shown as show shows it;
// the reviewer approves two and denies one with a reason, typed at the prompts; the tally says
// so, and the runs' states agree.
func TestIntegrationReviewInTmux(t *testing.T) {
	need.Need(t, need.Tmux, need.Python3)
	e := reviewEnv(t, "review-tmux")
	ids := []string{"review-1", "review-2", "review-3"}
	for i, id := range ids {
		s := startWaiting(t, e, id, fmt.Sprintf("print('run %d')", i+1))
		waitState(t, e, s.WorkflowID, contract.StatusAwaitingApproval)
	}
	waitListed(t, e, ids...)

	p := tmuxPane{t: t, sock: fmt.Sprintf("sandboxflow-review-%d", os.Getpid())}
	env := ""
	for _, kv := range append(binaryEnv(e), "COLUMNS=") {
		env += " '" + kv + "'"
	}
	p.tmux("new-session", "-d", "-x", "160", "-y", "50", "-s", "review", "env"+env+" '"+e.Starter+"' review; echo REVIEW-EXIT $?; sleep 60")
	t.Cleanup(func() { _, _ = exec.Command("tmux", "-L", p.sock, "kill-server").CombinedOutput() })

	decided := map[string]bool{}
	for n := 1; n <= len(ids); n++ {
		screen := p.waitForNth("[a/d/s/q]", n) // the nth prompt: run n is shown whole above it
		id := ""
		for _, cand := range ids {
			if strings.Contains(screen, fmt.Sprintf("%d of 3: run %s", n, cand)) {
				id = cand
			}
		}
		st, _ := e.Client.Status(context.Background(), id)
		// What show shows: the code with its line numbers and the whole digest.
		if id == "" || decided[id] || !strings.Contains(screen, "1 | print('run "+id[len(id)-1:]+"')") || !strings.Contains(screen, st.Request.Digest) {
			t.Fatalf("decision %d: the screen does not show a new run whole (id %q, digest %s):\n%s", n, id, st.Request.Digest, screen)
		}
		decided[id] = true
		if id == "review-2" {
			p.send("d")
			p.waitFor("why deny it")
			p.send("it prints the wrong number")
			waitState(t, e, id, contract.StatusDenied)
			continue
		}
		p.send("a")
		waitState(t, e, id, contract.StatusSucceeded)
	}
	screen := p.waitFor("REVIEW-EXIT 0")
	if !strings.Contains(screen, "review: 3 waiting: 2 approved, 1 denied, 0 skipped") {
		t.Errorf("no tally of 2 approved, 1 denied:\n%s", screen)
	}
	r := binary(t, e, "", "show", "review-2", "--json")
	if !strings.Contains(r.stdout, "it prints the wrong number") {
		t.Errorf("review-2's status does not hold the reason: %s", r.stdout)
	}
}

// decisionsTimed is how many decisions TestIntegrationReviewTiming times each way.
const decisionsTimed = 5

// The seconds a scripted reviewer's commands take per decision at the terminal, through the
// built binary: before review, three commands (pending, show, approve with the id and digest
// copied from their output); with review, one process that shows and decides on each in turn.
// No human time is in either: this is what the tools add. docs/benchmarks.md has the figures.
func TestIntegrationReviewTiming(t *testing.T) {
	need.Need(t, need.Python3)
	e := reviewEnv(t, "review-timing")
	start := func(prefix string) []string {
		var ids []string
		for i := range decisionsTimed {
			id := fmt.Sprintf("%s-%d", prefix, i)
			startWaiting(t, e, id, fmt.Sprintf("print(%d)", i))
			waitState(t, e, id, contract.StatusAwaitingApproval)
			ids = append(ids, id)
		}
		waitListed(t, e, ids...)
		return ids
	}

	ids := start("three")
	decided := map[string]bool{}
	begin := time.Now()
	for range ids {
		r := binary(t, e, "", "pending")
		id := ""
		for _, cand := range ids {
			// A run approved a moment ago may still be listed: the script skips the ones it did.
			if strings.Contains(r.stdout, cand+" ") && !decided[cand] {
				id = cand
				break
			}
		}
		decided[id] = true
		show := binary(t, e, "", "show", id)
		digest := ""
		for _, line := range strings.Split(show.stdout, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "digest" {
				digest = f[1]
			}
		}
		if a := binary(t, e, "", "approve", id, "--digest", digest); a.code != 0 {
			t.Fatalf("approve %s --digest %q: exit %d, %s %s", id, digest, a.code, a.stdout, a.stderr)
		}
	}
	before := time.Since(begin) / decisionsTimed
	for _, id := range ids {
		waitState(t, e, id, contract.StatusSucceeded)
	}

	ids = start("review")
	begin = time.Now()
	r := binary(t, e, strings.Repeat("a\n", decisionsTimed), "review")
	after := time.Since(begin) / decisionsTimed
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("%d approved", decisionsTimed)) {
		t.Fatalf("review: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	for _, id := range ids {
		waitState(t, e, id, contract.StatusSucceeded)
	}
	t.Logf("per decision, %d decisions each way: pending + show + approve %.2f s; review %.2f s", decisionsTimed, before.Seconds(), after.Seconds())
}

// session cell --wait, piped into jq, prints one value: the cell's result alone (Docker).
func TestIntegrationCellWaitPrintsOneDocument(t *testing.T) {
	e := sessionenv.Setup(t)
	r := binary(t, e, "", "session", "open", "--max-cells", "2")
	var opened client.SessionStarted
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &opened) != nil {
		t.Fatalf("session open: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	id := opened.WorkflowID
	t.Cleanup(func() { binary(t, e, "", "session", "close", id) })
	var out bytes.Buffer
	pipe := shell(t, e, `"$STARTER" session cell `+id+` --code 'print(7)' --wait | jq -c '[.ok, .stdout]'`)
	pipe.Stdout = &out
	if err := pipe.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := e.Client.SessionStatus(context.Background(), id)
		if err == nil && len(st.Cells) == 1 && st.Cells[0].State == contract.StatusAwaitingApproval {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cell 1 never waited: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := binary(t, e, "", "approve", id, "--cell", "1"); r.code != 0 {
		t.Fatalf("approve --cell 1: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if err := pipe.Wait(); err != nil || out.String() != `[true,"7\n"]`+"\n" {
		t.Errorf("session cell --wait | jq: %v, printed %q; want one value", err, out.String())
	}
}

// starter review on a session's waiting cells (Docker): it shows the session with the waiting
// cell, approves cell 1 (which runs), then denies cell 2 with the reason typed; the cells'
// states and the denial's reason agree.
func TestIntegrationReviewSessionCells(t *testing.T) {
	e := sessionenv.Setup(t)
	r := binary(t, e, "", "session", "open", "--max-cells", "2")
	var opened client.SessionStarted
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &opened) != nil {
		t.Fatalf("session open: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	id := opened.WorkflowID
	t.Cleanup(func() { binary(t, e, "", "session", "close", id) })
	cellState := func(n int, want string) contract.CellStatus {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			st, err := e.Client.SessionStatus(context.Background(), id)
			if err == nil && len(st.Cells) >= n && st.Cells[n-1].State == want {
				return st.Cells[n-1]
			}
			if time.Now().After(deadline) {
				t.Fatalf("cell %d never reached %s: %+v, %v", n, want, st.Cells, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for n, step := range []struct{ code, answers, tally, want string }{
		{"print('cell one ran')", "a\n", "1 approved, 0 denied", contract.StatusSucceeded},
		{"print('cell two ran')", "d\nnot this one\n", "0 approved, 1 denied", contract.StatusDenied},
	} {
		if r := binary(t, e, "", "session", "cell", id, "--code", step.code); r.code != 0 {
			t.Fatalf("session cell %d: exit %d, %s %s", n+1, r.code, r.stdout, r.stderr)
		}
		waiting := cellState(n+1, contract.StatusAwaitingApproval)
		waitListed(t, e, id)
		rv := binary(t, e, step.answers, "review")
		if rv.code != 0 || !strings.Contains(rv.stdout, step.tally) || !strings.Contains(rv.stdout, waiting.Digest) || !strings.Contains(rv.stdout, step.code) {
			t.Fatalf("review of cell %d: exit %d; want the cell shown (its code and digest %s) and %q:\n%s\n%s", n+1, rv.code, waiting.Digest, step.tally, rv.stdout, rv.stderr)
		}
		c := cellState(n+1, step.want)
		if step.want == contract.StatusDenied && (c.Decision == nil || c.Decision.Reason != "not this one") {
			t.Errorf("cell 2's decision %+v; want denied with the typed reason", c.Decision)
		}
		if step.want == contract.StatusSucceeded && (c.Result == nil || string(c.Result.Stdout) != "cell one ran\n") {
			t.Errorf("cell 1's result %+v; want it ran", c.Result)
		}
	}
}
