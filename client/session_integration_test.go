//go:build integration

package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
)

// TestIntegrationSessionClient drives two sessions through the Go client against a real server,
// worker and Docker sandbox: state kept across python cells, an sh cell reading what python
// wrote, a denied cell that leaves the session open and the chain as it was, the reviewer's door
// recomputing every digest the workflow shows from real results, the waiting session in the
// pending list, a decision for one session's cell refused by the other's, and the close listing
// every cell.
func TestIntegrationSessionClient(t *testing.T) {
	e := sessionenv.Setup(t)
	c := e.Client
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	a, err := c.OpenSession(ctx, guard.SessionRequest{Languages: []string{guard.Python, guard.Shell}, MaxCells: 10}, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.WorkflowID, client.SessionIDPrefix) || a.RunID == "" || !strings.HasPrefix(a.Digest, guard.DigestPrefix) {
		t.Fatalf("OpenSession = %+v; want a session id, a run id and the settings digest", a)
	}
	run := func(id, lang, code string, approve bool) contract.CellStatus {
		t.Helper()
		sub, err := c.SubmitCell(ctx, id, contract.CellRequest{Code: code, Language: lang})
		if err != nil {
			t.Fatalf("SubmitCell(%q): %v", code, err)
		}
		if got := sessionenv.Decide(t, e, id, approve); got != sub.Cell {
			t.Fatalf("decided on cell %d; submitted %d", got, sub.Cell)
		}
		cell, err := c.AwaitCell(ctx, id, sub.Cell)
		if err != nil {
			t.Fatalf("AwaitCell(%d): %v", sub.Cell, err)
		}
		return cell
	}
	stdout := func(cell contract.CellStatus) string {
		t.Helper()
		res, err := client.CellOutcome(a.WorkflowID, cell)
		if err != nil {
			t.Fatalf("cell %d: %v", cell.Cell, err)
		}
		return string(res.Stdout)
	}
	if got := stdout(run(a.WorkflowID, guard.Python, "import json\nx = 41\nf = open('note.txt', 'w')\nf.write('kept\\n')\nf.flush()\n", true)); got != "" {
		t.Errorf("cell 1 printed %q", got)
	}
	denied := run(a.WorkflowID, guard.Python, "print('never')\n", false)
	var ad *guard.ApprovalDenied
	if _, err := client.CellOutcome(a.WorkflowID, denied); denied.State != contract.StatusDenied || !errors.As(err, &ad) {
		t.Errorf("denied cell: %s, %v; want denied and an ApprovalDenied", denied.State, err)
	}
	if got := stdout(run(a.WorkflowID, guard.Python, "print(x + 1, json.dumps([1]))\n", true)); got != "42 [1]\n" {
		t.Errorf("cell 3 printed %q; want the variable and the import of cell 1", got)
	}
	if got := stdout(run(a.WorkflowID, guard.Shell, "cat note.txt\n", true)); got != "kept\n" {
		t.Errorf("the sh cell read %q; want what the python cell wrote", got)
	}

	// The reviewer's door recomputes the chain over the real results the workflow shows.
	reviewed, err := c.Review(ctx, client.Session(a.WorkflowID), client.ReviewOptions{EnvValues: true})
	if err != nil {
		t.Fatalf("Review of the session: %v", err)
	}
	review := reviewed.Session
	if chain, err := client.VerifyCells(review.SessionStatus, len(review.Cells)); err != nil || chain != review.Chain || len(review.Cells) != 4 {
		t.Errorf("VerifyCells over %d cells = %s, %v; want the status's chain %s", len(review.Cells), chain, err, review.Chain)
	}

	// A second session waits with a cell of the same code as a's next one.
	b, err := c.OpenSession(ctx, guard.SessionRequest{Languages: []string{guard.Python, guard.Shell}, MaxCells: 10}, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	subB, err := c.SubmitCell(ctx, b.WorkflowID, contract.CellRequest{Code: "print('b')\n"})
	if err != nil {
		t.Fatal(err)
	}
	subA, err := c.SubmitCell(ctx, a.WorkflowID, contract.CellRequest{Code: "print('b')\n"})
	if err != nil {
		t.Fatal(err)
	}
	// Both wait: the pending list shows them as sessions.
	deadline := time.Now().Add(30 * time.Second)
	for {
		pending, err := c.Pending(ctx)
		kinds := map[string]string{}
		for _, p := range pending {
			kinds[p.WorkflowID] = p.Kind
		}
		if err == nil && kinds[a.WorkflowID] == client.PendingSession && kinds[b.WorkflowID] == client.PendingSession {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending %+v, %v; want both sessions listed as sessions", pending, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A decision signed for b's cell, sent to a's waiting cell, is refused by a.
	f, err := c.Statement(ctx, client.Cell(b.WorkflowID, subB.Cell), client.StatementOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := client.SignDecision(e.Reviewer.Signer, f, "")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.DecideCell(ctx, a.WorkflowID, a.RunID, contract.CellDecision{Cell: subA.Cell, Decision: d}); err == nil {
		t.Errorf("session b's decision accepted by session a: %+v", res)
	}
	// A digest the reviewer did not read is refused before anything is sent.
	if _, err := c.Approve(ctx, client.Cell(a.WorkflowID, subA.Cell), subB.Digest, e.Reviewer.Signer, ""); err == nil {
		t.Error("ApproveCell with another cell's digest was sent")
	}

	st, err := c.CloseSession(ctx, a.WorkflowID, "done")
	if err != nil {
		t.Fatal(err)
	}
	if st.End != contract.EndClosed || len(st.Cells) != 5 || st.Cells[4].State != contract.CellDropped {
		t.Errorf("closed: end %q, %d cells, last %+v; want closed with the waiting cell dropped", st.End, len(st.Cells), st.Cells[len(st.Cells)-1])
	}
	// After the end, AwaitCell still answers for every cell, from the status: cell 1 with its
	// result, the dropped one as dropped (a session that has ended takes no update).
	if cs, err := c.AwaitCell(ctx, a.WorkflowID, 1); err != nil || cs.Result == nil || !cs.Result.OK {
		t.Errorf("AwaitCell(1) after the end = %+v, %v; want cell 1 with its result", cs, err)
	}
	if cs, err := c.AwaitCell(ctx, a.WorkflowID, 5); err != nil || cs.State != contract.CellDropped {
		t.Errorf("AwaitCell(5) after the end = %+v, %v; want the dropped cell", cs, err)
	}
	if _, err := c.AwaitCell(ctx, a.WorkflowID, 9); err == nil {
		t.Error("AwaitCell of a cell that never was succeeded after the end")
	}
	res, err := c.SessionResult(ctx, a.WorkflowID, "")
	if err != nil || res.End != contract.EndClosed || len(res.Cells) != 5 || res.SettingsDigest != a.Digest {
		t.Errorf("SessionResult = %+v, %v; want every cell and the settings digest", res, err)
	}
	if _, err := c.CloseSession(ctx, b.WorkflowID, ""); err != nil {
		t.Fatal(err)
	}
	// A RunCode id is not a session, and a session id is not a run.
	var ns *client.NotSessionError
	if _, err := c.ReadSession(ctx, "no-such-session"); err == nil {
		t.Error("ReadSession of a missing workflow succeeded")
	}
	var nr *client.NotRunCodeError
	if _, err := c.Review(ctx, client.Run(a.WorkflowID), client.ReviewOptions{}); !errors.As(err, &nr) {
		t.Errorf("Review of a session = %v; want a *NotRunCodeError", err)
	}
	started, err := c.Start(ctx, guard.Request{Code: "print(1)"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Review(ctx, client.Session(started.WorkflowID), client.ReviewOptions{}); !errors.As(err, &ns) {
		t.Errorf("Review of a run as a session = %v; want a *NotSessionError", err)
	}
}
