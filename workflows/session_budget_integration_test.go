//go:build integration

package workflows_test

import (
	"encoding/json"
	"github.com/sandboxflow/sandboxflow/activities"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
)

// An orchestrator runs up to 100 cells that each print as much as the session's limits let
// through (64,000 bytes of stdout and of stderr). Without a bound the status query, which every
// reviewer door reads, broke after 16 cells (its answer past Temporal's 2 MiB payload limit), and
// the session could neither be reviewed nor end with its result. Now the session refuses the
// cell that could put its status past the budget, with a ToolUsageError; the status still
// answers with every cell, under the limit, and the session closes with every cell in its result.
func TestIntegrationSessionHugeOutputsStatusStillAnswers(t *testing.T) {
	hugeOutputs(t, strings.Repeat("o", 64_000), strings.Repeat("e", 64_000))
}

// The same with output that JSON escapes six bytes a byte ('<' on stdout, \x01 on stderr): three
// cells put the status at 2.3 MB past the budget's reckoning until the guard cut such output to
// the caps' encoded bound (flagged truncated).
func TestIntegrationSessionEscapedOutputsStatusStillAnswers(t *testing.T) {
	hugeOutputs(t, strings.Repeat("<", 64_000), strings.Repeat("\x01", 64_000))
}

func hugeOutputs(t *testing.T, stdout, stderr string) {
	it := newITest(t)
	b := &sessiontest.Backend{Result: func(cell guard.Cell, _ []guard.Cell) guard.Result {
		return guard.Result{Stdout: []byte(stdout), Stderr: []byte(stderr)}
	}}
	// The status grows to 2 MB, which the in-process server and workers encode again and again:
	// under -race beside other packages that starves them for seconds, and a session ended
	// early under it once in CI (session 31; the 2 s hold heartbeat of the other tests is the
	// likely cause). A lost host is not what this test is about.
	it.sessionWorkersWith(b, it.queue+"-host-huge", func(c *activities.Config) { c.HeartbeatTimeout = 20 * time.Second })
	id := "it-session-huge-" + uuid.NewString()[:8]
	run := it.startSession(id, guard.SessionRequest{Settings: guard.Settings{
		Limits: guard.Limits{
			MaxStdoutBytes: 64_000, MaxStderrBytes: 64_000, MaxFiles: 1, MaxFileBytes: 1, MaxTotalFileBytes: 1},
	}})
	it.sessionStatus(id) // open
	ran := 0
	var refusal error
	for i := 1; i <= 100 && refusal == nil; i++ {
		var sub contract.CellSubmitted
		if err := it.sessionUpdate(id, contract.UpdateSubmitCell, contract.CellRequest{Code: "print(1)"}, &sub); err != nil {
			refusal = err
			break
		}
		st := it.sessionStatus(id)
		d := it.alice.Decision(t, reviewertest.Fields(st.WorkflowID, st.RunID, sub.Digest, st.SandboxTaskQueue, true))
		var dec contract.DecideResult
		if err := it.sessionUpdate(id, contract.UpdateDecideCell, contract.CellDecision{Cell: sub.Cell, Decision: d}, &dec); err != nil {
			t.Fatalf("approve cell %d: %v", sub.Cell, err)
		}
		var cs contract.CellStatus
		if err := it.sessionUpdate(id, contract.UpdateAwaitCell, contract.AwaitCell{Cell: sub.Cell}, &cs); err != nil || cs.State != contract.StatusSucceeded {
			t.Fatalf("cell %d: %+v, %v", sub.Cell, cs.State, err)
		}
		ran++
	}
	// Each next cell is reckoned at its worst: 64,000 bytes of each stream and the policy's
	// outputs (512 KiB): the status holds about six such cells before that reckoning refuses one.
	if guard.TypeOf(contract.FromFailure(refusal)) != guard.TypeToolUsageError || ran < 6 {
		var res contract.SessionResult
		rerr := run.Get(it.ctx(5*time.Second), &res)
		t.Fatalf("%d cells ran, then %v; want at least 6, then a ToolUsageError for the status budget (the session ended %q: %v)",
			ran, refusal, res.End, rerr)
	}
	v, err := it.c.QueryWorkflow(it.ctx(10*time.Second), id, "", contract.QuerySessionStatus)
	if err != nil {
		t.Fatalf("after %d cells the status query fails: %v", ran, err)
	}
	var st contract.SessionStatus
	if err := v.Get(&st); err != nil || len(st.Cells) != ran {
		t.Fatalf("the status shows %d cells, %v; want %d", len(st.Cells), err, ran)
	}
	if enc, _ := json.Marshal(st); len(enc) > 2<<20 {
		t.Fatalf("the status is %d bytes; want at most 2 MiB", len(enc))
	}
	var closed contract.SessionStatus
	if err := it.sessionUpdate(id, contract.UpdateCloseSession, contract.CloseSession{Reason: "done"}, &closed); err != nil {
		t.Fatal(err)
	}
	var res contract.SessionResult
	if err := run.Get(it.ctx(time.Minute), &res); err != nil || res.End != contract.EndClosed || len(res.Cells) != ran {
		t.Fatalf("result %s with %d cells, %v; want closed with %d", res.End, len(res.Cells), err, ran)
	}
	t.Logf("%d cells ran; the status is %d bytes; the next submit: %v", ran, len(mustJSON(t, st)), refusal)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
