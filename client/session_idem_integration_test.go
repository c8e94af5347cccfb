//go:build integration

package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
)

// TestIntegrationSessionSubmitRetryAndApproveWait drives one session through the Go client
// against a real server, worker and Docker sandbox: a submit retried with its request id (as
// the client sends it, and under another update id) gets the cell the first made, before and
// after it ran; the same id with other code is refused; another id makes a new cell; and an
// approval sent with ApproveAndWait answers with the cell's result in the one decide-cell
// update (no await-cell in the history).
func TestIntegrationSessionSubmitRetryAndApproveWait(t *testing.T) {
	e := sessionenv.Setup(t)
	c := e.Client
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	settings := guard.SessionRequest{Languages: []string{guard.Python}, MaxCells: 10}
	id := "idem-session-" + uuid.NewString()
	s, err := c.OpenSession(ctx, settings, client.SessionOptions{WorkflowID: id})
	if err != nil {
		t.Fatal(err)
	}
	// An open retried with the same id and settings (its answer lost) gets the same session;
	// other settings under that id are refused.
	if again, err := c.OpenSession(ctx, settings, client.SessionOptions{WorkflowID: id}); err != nil || again != s {
		t.Fatalf("the retried OpenSession = %+v, %v; want the first's %+v", again, err, s)
	}
	other := settings
	other.MaxCells = 9
	if _, err := c.OpenSession(ctx, other, client.SessionOptions{WorkflowID: id}); guard.TypeOf(err) != guard.TypeConfigError {
		t.Fatalf("OpenSession with other settings under the same id = %v; want a ConfigError", err)
	}
	req := contract.CellRequest{Code: "x = 41\n", RequestID: "tool-call-1"}
	first, err := c.SubmitCell(ctx, s.WorkflowID, req)
	if err != nil {
		t.Fatalf("SubmitCell: %v", err)
	}
	again, err := c.SubmitCell(ctx, s.WorkflowID, req)
	if err != nil || again != first {
		t.Fatalf("the retried SubmitCell = %+v, %v; want the first's %+v", again, err, first)
	}
	// The same request under another update id (a caller whose first update id was lost): the
	// workflow finds the cell by its request id.
	h, err := e.Temporal.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{WorkflowID: s.WorkflowID, UpdateName: contract.UpdateSubmitCell,
		UpdateID: "another-update-id", Args: []any{req}, WaitForStage: tclient.WorkflowUpdateStageCompleted})
	var byID contract.CellSubmitted
	if err == nil {
		err = h.Get(ctx, &byID)
	}
	if err != nil || byID.Cell != first.Cell || byID.Digest != first.Digest {
		t.Fatalf("submit-cell with the request id under another update id = %+v, %v; want cell %d", byID, err, first.Cell)
	}
	var tu *guard.ToolUsageError
	if _, err := c.SubmitCell(ctx, s.WorkflowID, contract.CellRequest{Code: "print('other')\n", RequestID: "tool-call-1"}); !errors.As(err, &tu) {
		t.Fatalf("the request id with other code: %v; want a ToolUsageError", err)
	}
	if _, err := c.SubmitCell(ctx, s.WorkflowID, contract.CellRequest{Code: "print(x)\n", RequestID: "tool-call-2"}); !errors.As(err, &tu) {
		t.Fatalf("another request id while cell %d waits: %v; want a ToolUsageError", first.Cell, err)
	}

	decided, wait, err := c.ApproveAndWait(ctx, client.Cell(s.WorkflowID, first.Cell), first.Digest, e.Reviewer.Signer, "")
	if err != nil || decided.CellStatus == nil || decided.CellStatus.State != contract.StatusSucceeded {
		t.Fatalf("ApproveAndWait(cell 1) = %+v, %v; want the cell's ended status", decided, err)
	}
	wait.Stop()
	// After it ran, a retry still gets cell 1, not a new cell.
	if again, err := c.SubmitCell(ctx, s.WorkflowID, req); err != nil || again.Cell != first.Cell {
		t.Fatalf("SubmitCell retried after the cell ran = %+v, %v; want cell %d", again, err, first.Cell)
	}
	second, err := c.SubmitCell(ctx, s.WorkflowID, contract.CellRequest{Code: "print(x + 1)\n", RequestID: "tool-call-2"})
	if err != nil || second.Cell != first.Cell+1 {
		t.Fatalf("SubmitCell with another request id = %+v, %v; want cell %d", second, err, first.Cell+1)
	}
	decided, wait, err = c.ApproveAndWait(ctx, client.Cell(s.WorkflowID, second.Cell), second.Digest, e.Reviewer.Signer, "")
	if err != nil || decided.CellStatus == nil {
		t.Fatalf("ApproveAndWait(cell 2) = %+v, %v", decided, err)
	}
	if res, err := client.CellOutcome(s.WorkflowID, *decided.CellStatus); err != nil || string(res.Stdout) != "42\n" {
		t.Fatalf("cell 2's outcome from the approval = %+v, %v; want 42", res, err)
	}
	if res, err := wait.Get(ctx); err != nil || string(res.Stdout) != "42\n" {
		t.Fatalf("cell 2's verified result from the wait = %+v, %v; want 42", res, err)
	}
	st, err := c.SessionStatus(ctx, s.WorkflowID)
	if err != nil || len(st.Cells) != 2 || st.Cells[0].RequestID != "tool-call-1" || st.Cells[1].RequestID != "tool-call-2" {
		t.Fatalf("status = %+v, %v; want two cells with their request ids", st.Cells, err)
	}
	if _, err := c.CloseSession(ctx, s.WorkflowID, "done"); err != nil {
		t.Fatal(err)
	}
	// Each approval was one update: none waited with await-cell.
	it := e.Temporal.GetWorkflowHistory(ctx, s.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	decides := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
			switch a.GetAcceptedRequest().GetInput().GetName() {
			case contract.UpdateAwaitCell:
				t.Errorf("the history has an await-cell update (event %d); ApproveAndWait should need none", ev.GetEventId())
			case contract.UpdateDecideCell:
				decides++
			}
		}
	}
	if decides != 2 {
		t.Errorf("%d decide-cell updates in the history; want 2", decides)
	}
}
