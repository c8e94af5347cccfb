//go:build integration

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// binary runs the built starter with the env's connection and returns its result.
func binary(t *testing.T, e *agenttest.Env, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(e.Starter, args...)
	cmd.Env = append(os.Environ(), binaryEnv(e)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	begin := time.Now()
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("starter %v: %v", args, err)
	}
	return cliResult{code: code, stdout: out.String(), stderr: errb.String(), took: time.Since(begin)}
}

// binaryEnv is the environment binary gives the starter: e's server, task queue and reviewer.
func binaryEnv(e *agenttest.Env) []string {
	return []string{"TEMPORAL_ADDRESS=" + e.Address, "TEMPORAL_NAMESPACE=" + e.Namespace,
		"SANDBOXFLOW_TASK_QUEUE=" + e.TaskQueue, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_REVIEWER=" + e.Reviewer.Principal,
		"SANDBOXFLOW_REVIEWER_KEY=" + e.Reviewer.KeyFile, "SANDBOXFLOW_REVIEWERS=" + e.ReviewersFile}
}

// TestIntegrationSessionThroughStarter drives a session through the starter binary against a
// real server, worker and Docker sandbox: open; three python cells that keep a variable, an
// import and an open file; an sh cell reading the file; a hostile cell (a tab in its
// indentation, a direction override, a carriage return) that session show marks as show marks a
// run's code; approve and deny with --cell, and approve without it (the waiting cell printed
// first); pending listing the session; close listing every cell.
func TestIntegrationSessionThroughStarter(t *testing.T) {
	e := sessionenv.Setup(t)
	data := filepath.Join(t.TempDir(), "data.csv")
	if err := os.WriteFile(data, []byte("a,b\n1,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := binary(t, e, "", "session", "open", "--language", "python,sh", "--input", "data.csv="+data, "--env", "MODE=fast",
		"--max-cells", "10", "--idle-timeout", "5m", "--lifetime", "20m")
	var opened client.SessionStarted
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &opened) != nil || opened.WorkflowID == "" || !strings.HasPrefix(opened.Digest, guard.DigestPrefix) {
		t.Fatalf("session open: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	id := opened.WorkflowID

	// cell submits a cell and returns what it printed.
	cell := func(stdin string, args ...string) contract.CellSubmitted {
		t.Helper()
		r := binary(t, e, stdin, append([]string{"session", "cell", id}, args...)...)
		var sub contract.CellSubmitted
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &sub) != nil || sub.Cell == 0 || sub.Digest == "" {
			t.Fatalf("session cell %v: exit %d, %s %s", args, r.code, r.stdout, r.stderr)
		}
		return sub
	}
	// approve approves a cell with --cell and --wait and returns its result.
	approve := func(n int) guard.Result {
		t.Helper()
		r := binary(t, e, "", "approve", id, "--cell", strconv.Itoa(n), "--wait")
		var res guard.Result
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || len(res.Approvals) == 0 {
			t.Fatalf("approve --cell %d --wait: exit %d, %s %s", n, r.code, r.stdout, r.stderr)
		}
		return res
	}
	c1 := cell("", "--code", "import csv\nrows = list(csv.reader(open('data.csv')))\nlog = open('log.txt', 'w')\nlog.write('one\\n')\nlog.flush()\n")
	if res := approve(c1.Cell); !res.OK {
		t.Fatalf("cell 1: %+v", res)
	}
	file := filepath.Join(t.TempDir(), "cell2.py")
	if err := os.WriteFile(file, []byte("log.write('two\\n')\nlog.flush()\nprint(len(rows), csv.__name__)\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c2 := cell("", file, "--request-id", "call-2")
	// A retried submit with the same --request-id (its answer lost) gets the same cell.
	if again := cell("", file, "--request-id", "call-2"); again != c2 {
		t.Fatalf("session cell retried with its --request-id = %+v; want cell %+v", again, c2)
	}
	if res := approve(c2.Cell); string(res.Stdout) != "2 csv\n" {
		t.Errorf("cell 2 printed %q; want the rows and the import of cell 1", res.Stdout)
	}
	c3 := cell("cat log.txt; echo $MODE\n", "--language", "sh", "-")
	if res := approve(c3.Cell); string(res.Stdout) != "one\ntwo\nfast\n" {
		t.Errorf("the sh cell printed %q; want what the python cells wrote, and the env", res.Stdout)
	}

	// A hostile cell waits: session show marks it as show marks a run's code. (A carriage return
	// without a line feed is refused by the policy before any view; starter's unit test draws one.)
	hostile := "if True:\n\tx = 1\n\tprint('ok') # \u202e }\nimport os\n"
	c4 := cell("", "--code", hostile)
	r = binary(t, e, "", "session", "show", id)
	if r.code != 0 {
		t.Fatalf("session show: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"=== cell 4 (python, awaiting_approval)  <<< WAITS FOR YOUR DECISION ===",
		"2 | " + pysource.ShowTabs("\tx = 1"), "3 | " + pysource.ShowTabs("\tprint('ok') # ") + `\u202e }`, "4 | import os\n",
		"cell 2 stdout:\n1 | 2 csv\n", "cell 3 stdout:\n1 | one\n2 | two\n3 | fast\n", "env              MODE = \"fast\"",
		"input file       data.csv, 8 B", opened.Digest, c4.Digest, "approved by " + e.Reviewer.Principal,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session show lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.ContainsAny(r.stdout, "\u202e\t") || !strings.Contains(r.stderr, "RIGHT-TO-LEFT OVERRIDE") {
		t.Errorf("session show lets the override or the tab through, or warns of nothing:\n%s\nstderr %s", r.stdout, r.stderr)
	}
	// A carriage return is refused before it reaches a reviewer, as a ToolUsageError.
	if r := binary(t, e, "", "session", "cell", id, "--code", "print(1)\rprint(2)\n"); r.code != 1 || r.errorType(t) != guard.TypeToolUsageError {
		t.Errorf("a cell with a carriage return: exit %d, %s; want 1 and a ToolUsageError", r.code, r.stdout)
	}
	r = binary(t, e, "", "session", "show", id, "--json")
	var review client.SessionReview
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &review) != nil || review.Waiting != 4 || len(review.Views) != 4 || len(review.Views[3].SuspiciousCharacters) != 1 {
		t.Errorf("session show --json: exit %d, %s", r.code, r.stdout)
	}
	// The pending list shows the session as one.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r = binary(t, e, "", "pending")
		if r.code == 0 && strings.Contains(r.stdout, id) && strings.Contains(r.stdout, "session") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending never listed %s as a session: %s %s", id, r.stdout, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r = binary(t, e, "", "deny", id, "--cell", "4", "--reason", "hidden characters")
	if r.code != 0 || !strings.Contains(r.stdout, `"cell":4`) {
		t.Fatalf("deny --cell 4: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}

	// Without --cell: the waiting cell is printed before it is signed; the digest read must be its.
	c5 := cell("", "--code", "print(x)\n")
	r = binary(t, e, "", "approve", id, "--digest", c4.Digest)
	if r.code != 1 || !strings.Contains(r.stdout, "you read digest") {
		t.Errorf("approve with the denied cell's digest: exit %d, %s; want a refusal", r.code, r.stdout)
	}
	r = binary(t, e, "", "approve", id, "--digest", c5.Digest, "--wait")
	// x was set only by the denied cell 4, which did not run.
	if r.code != 0 || !strings.Contains(r.stderr, "<<< WAITS FOR YOUR DECISION") || !strings.Contains(r.stderr, "1 | print(x)") ||
		!strings.Contains(r.stdout, `"exit_code":1`) || !strings.Contains(r.stdout, "NameError") {
		t.Errorf("approve without --cell: exit %d, stdout %s, stderr %s; want the cell printed first, then its result: x is not defined", r.code, r.stdout, r.stderr)
	}

	r = binary(t, e, "", "session", "close", id)
	var st contract.SessionStatus
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st.End != contract.EndClosed || len(st.Cells) != 5 {
		t.Errorf("session close: exit %d, %s", r.code, r.stdout)
	}
	r = binary(t, e, "", "session", "cell", id, "--code", "print(1)")
	if r.code != 1 {
		t.Errorf("a cell for a closed session: exit %d, %s; want a refusal", r.code, r.stdout)
	}
	// --cell on a run, and session show of a run, name the mistake.
	r = binary(t, e, "", "run", "--code", "print(1)")
	var started client.Started
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &started) != nil {
		t.Fatalf("run: exit %d, %s", r.code, r.stdout)
	}
	for _, args := range [][]string{{"approve", started.WorkflowID, "--cell", "1"}, {"session", "show", started.WorkflowID}} {
		if r := binary(t, e, "", args...); r.code != 1 || r.errorType(t) != client.TypeNotSession {
			t.Errorf("%v: exit %d, %s; want 1 and NotSession", args, r.code, r.stdout)
		}
	}
}
