//go:build integration

package promela

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// checkTimeout bounds the whole of one test: every spin, cc and pan it runs.
const checkTimeout = 25 * time.Minute

// maxDepth is pan's search depth bound; the model's executions are under 600 steps deep.
const maxDepth = 20000

// budgets are the configurations the model is checked in, each exhaustively, with a quorum of two
// reviewers and an edit among the reviewers' decisions unless it says otherwise: faults and
// writer actions are spent from one budget per execution, so each configuration bounds the state
// space. The largest (two writer actions with a reset, 9.2 million states) has no edit: with one
// it would be twice as large. The last reaches a late result replayed into another run: two faults
// (a partition in each run) and a writer that only resets a run that ended and sends late results
// (1.3 million states; with every writer action, and the reset at any time, it is over 30 million).
var budgets = []budget{
	{"two faults, no writer", "-DFAULTS=2 -DWACTS=0"},
	{"one fault, one writer action (a reset among them)", "-DFAULTS=1 -DWACTS=1"},
	{"two writer actions, no reset", "-DFAULTS=0 -DWACTS=2 -DRESETS=0"},
	{"two writer actions (a reset among them), no edit", "-DFAULTS=0 -DWACTS=2 -DEDITS=0"},
	{"one fault, one writer action, a quorum of 1, no edit", "-DQUORUM=1 -DFAULTS=1 -DWACTS=1 -DEDITS=0"},
	{"two faults, one late-result writer action (a reset of a run that ended among them)", "-DFAULTS=2 -DWACTS=1 -DLATE_WRITER"},
}

// tools returns spin's and cc's paths; without them the test fails under make test and skips
// otherwise (internal/testkit/need).
func tools(t *testing.T) (spin, cc string) {
	t.Helper()
	need.Need(t, need.Spin, need.CC)
	spin, err := exec.LookPath("spin")
	if err != nil {
		t.Fatal(err)
	}
	if cc, err = exec.LookPath("cc"); err != nil {
		t.Fatal(err)
	}
	return spin, cc
}

// verdict is what one pan run found.
type verdict struct {
	output string // pan's report
	errors int
	trail  string // spin's replay of the counterexample, when there is one
}

var errorsLine = regexp.MustCompile(`errors: (\d+)`)

// checkModel builds the model in file with defs (spin -a, cc) in a fresh folder and runs pan on
// it, stopping at the first counterexample, whose trail it replays.
func checkModel(ctx context.Context, t *testing.T, file, defs string) (verdict, error) {
	spin, cc := tools(t)
	src, err := os.ReadFile(file)
	if err != nil {
		return verdict{}, fmt.Errorf("model: read %s: %w", file, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, file), src, 0o644); err != nil {
		return verdict{}, fmt.Errorf("model: copy %s: %w", file, err)
	}
	flags := strings.Fields(defs)
	run := func(name string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("model: %s %s: %w\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if _, err := run(spin, append(append([]string{"-a"}, flags...), file)...); err != nil {
		return verdict{}, err
	}
	// MEMLIM keeps pan from taking the shared machine's memory: past it, it stops and says so.
	if _, err := run(cc, "-O1", "-DSAFETY", "-DCOLLAPSE", "-DMEMLIM=2048", "-o", "pan", "pan.c"); err != nil {
		return verdict{}, err
	}
	out, err := run(filepath.Join(dir, "pan"), "-m"+strconv.Itoa(maxDepth))
	if err != nil {
		return verdict{output: out}, err
	}
	v := verdict{output: out}
	for _, bad := range []string{"max search depth too small", "out of memory", "aborted"} {
		if strings.Contains(out, bad) {
			return v, fmt.Errorf("model: pan with %s did not finish its search (%s):\n%s", defs, bad, out)
		}
	}
	m := errorsLine.FindStringSubmatch(out)
	if m == nil {
		return v, fmt.Errorf("model: pan with %s printed no error count:\n%s", defs, out)
	}
	v.errors, _ = strconv.Atoi(m[1])
	if _, err := os.Stat(filepath.Join(dir, file+".trail")); err == nil {
		trail, err := run(spin, append(append([]string{"-t", "-p"}, flags...), file)...)
		if err != nil {
			return v, err
		}
		v.trail = trail
	} else if !errors.Is(err, os.ErrNotExist) {
		return v, fmt.Errorf("model: look for the trail: %w", err)
	}
	return v, nil
}

// summary is pan's lines that say what it searched.
func summary(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "states, stored") || strings.Contains(line, "errors:") ||
			strings.Contains(line, "elapsed time") || strings.Contains(line, "violated") {
			keep = append(keep, strings.TrimSpace(line))
		}
	}
	return strings.Join(keep, "; ")
}

// TestModelHolds checks every property of approval.pml in every budget, exhaustively, and fails
// on any counterexample, printing its trail.
func TestModelHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	holds(ctx, t, "approval.pml", budgets)
}

// TestModelFindsRemovedChecks builds the model without one of the code's checks at a time, and
// requires spin to find the counterexample: the properties are not true of any protocol, and the
// budgets reach the attacks. SHOW_RAN and SHOW_UNUSED show that runs do end with a result and
// with the approval unused, and SHOW_RECOVERED with a late result (the properties do not hold only
// because nothing happens).
func TestModelFindsRemovedChecks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	findsRemoved(ctx, t, "approval.pml", []removed{
		// A writer schedules a second SandboxRun with the genuine input: both run.
		{"NO_HISTORY_READ", "-DFAULTS=0 -DWACTS=1", "starts[r]<=1"},
		// A writer fails the running activity by id as "before the start" and releases its
		// claim: the workflow's fresh activity runs the code again.
		{"NO_SECRET", "-DFAULTS=0 -DWACTS=2 -DRESETS=0", "starts[r]<=1"},
		// The code starts, a writer fails the activity by id as "before the start", the backend
		// fails after the start and the host releases: the fresh activity runs it again.
		{"NO_STARTED_RULE", "-DFAULTS=0 -DWACTS=1", "starts[r]<=1"},
		// The server holds the first host's claim; it runs without seeing it, a writer fails it
		// by id as "before the start", and the fresh activity's host finds no claim before its
		// own.
		{"NO_CLAIM_WAIT", "-DFAULTS=1 -DWACTS=1", "starts[r]<=1"},
		// A writer schedules SandboxRun with a forged input.
		{"NO_VERIFY", "-DFAULTS=0 -DWACTS=1", "act_valid"},
		// A writer's decision names a wrong digest, and the workflow takes it.
		{"NO_DIGEST_CHECK", "-DFAULTS=0 -DWACTS=1", "violated ((v!=0)"},
		// A writer's workflow worker, whose quorum is 1, schedules SandboxRun with one genuine
		// approval; a host that does not count approvals against its own quorum runs it.
		{"NO_HOST_QUORUM", "-DFAULTS=0 -DWACTS=1", "act_valid[a]==((1<<2)-1)"},
		// A writer schedules SandboxRun with edited code (a reviewer's edit, or its own) and the
		// approvals of the code before it; a host that verifies each approval over the digest it
		// names, not over the request it received, runs code fewer than two reviewers approved
		// as edited.
		{"NO_CODE_DIGEST", "-DFAULTS=0 -DWACTS=1", "act_valid1[a]==((1<<2)-1)"},
		// The host that took the activity crashes and nothing times it out: the run never ends.
		{"NO_HEARTBEAT_TIMEOUT", "-DFAULTS=1 -DWACTS=0", "wf_end[r]!=0"},
		// The partition times out the running activity and the workflow, waiting for its late
		// result, takes a writer's made-up one (or another run's): no host signed it for this run.
		{"NO_LATE_RECEIPT_CHECK", "-DFAULTS=1 -DWACTS=1", "(lsig&&(lrun==r))"},
		// Run 0 takes its host's late result after a partition; a writer resets the run, run 1
		// gets that signal, its own activity times out, and a workflow that checks only the
		// host's signature, not the run, activity and claim it is signed for, takes run 0's result.
		{"NO_LATE_BINDING", "-DFAULTS=2 -DWACTS=1 -DLATE_WRITER", "(lsig&&(lrun==r))"},
		// The partition times out the running activity, its host runs the code and sends the
		// result, and the workflow, not waiting for it, ends the run "outcome unknown".
		{"NO_LATE_WAIT", "-DFAULTS=1 -DWACTS=0", "( !(lok[r])||forged)"},
		// The host dies while the code runs; its container lives on, but it spooled nothing, so
		// the worker started again on the host cannot deliver the result: "outcome unknown".
		{"NO_ADOPTION", "-DFAULTS=1 -DWACTS=0", "( !(hdied[r])||llost[r])"},
		// The host dies after its claim, before the code started; it spooled nothing, so no
		// worker releases the claim, and the workflow, waiting on it, ends "outcome unknown".
		{"NO_RELEASE", "-DFAULTS=1 -DWACTS=0", "( !(hunst[r])||(faults>1))"},
		// The partition times out an activity whose host claimed and runs the code; a writer
		// schedules another SandboxRun, and a host that takes every timed-out activity for one
		// that never started, and its claims for stale, runs the code again.
		{"NO_CLAIM_ORDER", "-DFAULTS=1 -DWACTS=1", "starts[r]<=1"},
		{"SHOW_RAN", "-DFAULTS=0 -DWACTS=0", "wf_end[r]!=1"},
		{"SHOW_UNUSED", "-DFAULTS=1 -DWACTS=0", "wf_end[r]!=2"},
		{"SHOW_RECOVERED", "-DFAULTS=1 -DWACTS=0", "wf_end[r]!=5"},
	})
}

// sessionBudgets are the configurations session.pml is checked in, each exhaustively, with a
// quorum of two reviewers a cell (the largest, two writer actions, is about 3.5 million states;
// with the writer's lowered quorum among them it would be 6.4 million, so that action is in the
// one-action budget, where the removed host count shows it matters).
var sessionBudgets = []budget{
	{"two faults, no writer", "-DFAULTS=2 -DWACTS=0"},
	{"one fault, one writer action (a lowered quorum among them)", "-DFAULTS=1 -DWACTS=1"},
	{"two writer actions (a reset among them, no lowered quorum)", "-DFAULTS=0 -DWACTS=2 -DLOWER=0"},
}

// TestSessionModelHolds checks every property of session.pml in every budget, exhaustively.
func TestSessionModelHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	holds(ctx, t, "session.pml", sessionBudgets)
}

// TestSessionModelFindsRemovedChecks builds session.pml without some of the host's checks and
// requires spin to find the counterexample each allows; and shows, by one variant that holds,
// that the host's chain alone stops a duplicated cell activity.
func TestSessionModelFindsRemovedChecks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	findsRemoved(ctx, t, "session.pml", []removed{
		// A writer schedules a cell activity with a forged decision.
		{"NO_VERIFY", "-DFAULTS=0 -DWACTS=1", "sig_chain[s]==sb_chain[r]"},
		// A writer duplicates cell 1's activity; the host runs the copy and refuses the
		// workflow's own as used, so the workflow shows cell 1 as not run; its reviewer signs
		// cell 2 over a chain without cell 1's result, and a host that takes the input's chain
		// runs it.
		{"NO_HOST_CHAIN", "-DFAULTS=0 -DWACTS=1", "sig_chain[s]==sb_chain[r]"},
		// Without the host's own chain, its index and its used approvals, the copy runs the
		// cell a second time.
		{"NO_HOST_CHAIN -DNO_INDEX -DNO_USED", "-DFAULTS=0 -DWACTS=1", "starts["},
		// A writer's workflow worker, whose quorum is 1, schedules a cell with one reviewer's
		// genuine approval; a host that does not count approvals against its own quorum runs it.
		{"NO_HOST_QUORUM", "-DFAULTS=0 -DWACTS=1", "sig_rev["},
		// A cell whose host crashed is never timed out: the session never ends.
		{"NO_HEARTBEAT_TIMEOUT", "-DFAULTS=1 -DWACTS=0", "wf_end[0]!=0"},
		// A host that starts a cell without its claim leaves no record of the start in the
		// history.
		{"NO_CLAIM", "-DFAULTS=0 -DWACTS=0", "claimed[a]"},
		{"SHOW_RAN", "-DFAULTS=0 -DWACTS=0", "ran[0]!=2"},
	})
	// The index and used-approval checks are a second line: with them removed, the host's own
	// chain still refuses every copy (the copy's decision binds the chain before the cell ran).
	v, err := checkModel(ctx, t, "session.pml", "-DNO_INDEX -DNO_USED -DFAULTS=0 -DWACTS=2 -DLOWER=0")
	if err != nil {
		t.Fatal(err)
	}
	if v.errors != 0 {
		t.Fatalf("NO_INDEX NO_USED: spin found a counterexample:\n%s\ntrail:\n%s", v.output, v.trail)
	}
}

// budget is one configuration a model is checked in.
type budget struct{ name, defs string }

// holds checks every property of the model in file in every budget, exhaustively, and fails on
// any counterexample, printing its trail.
func holds(ctx context.Context, t *testing.T, file string, budgets []budget) {
	t.Helper()
	for _, b := range budgets {
		start := time.Now()
		v, err := checkModel(ctx, t, file, b.defs)
		if err != nil {
			t.Fatalf("%s: %s: %v", file, b.name, err)
		}
		if v.errors != 0 {
			t.Fatalf("%s: %s (%s): spin found a counterexample:\n%s\ntrail:\n%s", file, b.name, b.defs, v.output, v.trail)
		}
		if !strings.Contains(v.output, "Full statespace search") {
			t.Fatalf("%s: %s: not a full search:\n%s", file, b.name, v.output)
		}
		t.Logf("%s: %s (%s): %s [%s with spin and cc]", file, b.name, b.defs, summary(v.output), time.Since(start).Round(100*time.Millisecond))
	}
}

// removed is a variant of a model without some of the code's checks (macros, "-D"-joined after
// the first) and the assertion spin must find violated within defs.
type removed struct{ macros, defs, violated string }

// findsRemoved builds the model in file as each variant and requires spin to find its
// counterexample.
func findsRemoved(ctx context.Context, t *testing.T, file string, variants []removed) {
	t.Helper()
	for _, c := range variants {
		v, err := checkModel(ctx, t, file, "-D"+c.macros+" "+c.defs)
		if err != nil {
			t.Fatalf("%s: %s: %v", file, c.macros, err)
		}
		if v.errors == 0 || v.trail == "" {
			t.Fatalf("%s: %s (%s): spin found no counterexample:\n%s", file, c.macros, c.defs, v.output)
		}
		if !strings.Contains(v.output, c.violated) {
			t.Fatalf("%s: %s: spin found another counterexample than %q:\n%s\ntrail:\n%s", file, c.macros, c.violated, v.output, v.trail)
		}
		t.Logf("%s: %s (%s): %s; trail of %d lines", file, c.macros, c.defs, summary(v.output), strings.Count(v.trail, "\n"))
		if testing.Verbose() {
			t.Logf("%s trail:\n%s", c.macros, v.trail)
		}
	}
}
