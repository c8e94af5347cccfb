package inbox

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// TestPageSaysLiveOutputWasNotTheResult: a namespace writer records heartbeat details for a
// running activity (they are not signed), so the live output a page showed may not be what ran.
// The inbox keeps what its live reads handed each sign-in's page, and the page drawn with the
// result says when those bytes are not the result's; output that was the result's says nothing.
func TestPageSaysLiveOutputWasNotTheResult(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	real := []byte("real line\n")
	forged := []byte("forged: all tests passed\n")
	res := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("real line\nreal end\n")}
	var shown liveShown
	take := func(k liveKey, lo contract.LiveOutput) {
		c := shown.cursor(k)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.cur.Take("act-1", lo)
	}
	honest := liveKey{signIn: "s1", id: "run-1"}
	take(honest, contract.LiveOutput{Seq: 1, Stdout: contract.LiveChunk{Offset: 0, Total: int64(len(real)), Bytes: real}})
	if got := shown.check(honest, res); got != "" {
		t.Errorf("the real output was flagged: %s", got)
	}
	lied := liveKey{signIn: "s1", id: "run-2"}
	take(lied, contract.LiveOutput{Seq: 1, Stdout: contract.LiveChunk{Offset: 0, Total: int64(len(real)), Bytes: real}})
	take(lied, contract.LiveOutput{Seq: 2, Stdout: contract.LiveChunk{Offset: int64(len(real)), Total: int64(len(real) + len(forged)), Bytes: forged}})
	mismatch := shown.check(lied, res)
	if !strings.Contains(mismatch, "not the result's") {
		t.Fatalf("forged live output not flagged: %q", mismatch)
	}
	if again := shown.check(lied, res); again != "" {
		t.Errorf("a second check still flags: %q (each check forgets what it checked)", again)
	}
	v := newResultView(res)
	v.LiveMismatch = mismatch
	var b bytes.Buffer
	if err := pages["run"].ExecuteTemplate(&b, "layout", pageData{Title: "run", Run: &runView{ID: "run-2", State: "succeeded", Result: v}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `id="result-live-mismatch"`) {
		t.Errorf("the run page does not flag the live output:\n%s", b.String())
	}
}
