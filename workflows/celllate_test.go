package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// cellLateResult is the late result signer signs for cell 1 of the harness's session, run by
// activity activityID, that printed stdout; change, if set, alters the statement before it is signed.
func cellLateResult(t *testing.T, h *sessionHarness, signer *hosttest.Host, activityID, stdout string, change func(*receipt.Run)) contract.LateResult {
	t.Helper()
	st := h.status().Cells[0]
	res := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte(stdout), Duration: time.Second,
		Digest: st.Digest, Backend: "fake", ApprovalID: st.Decision.ApprovalID, Reviewer: st.Decision.Reviewer}
	started := time.Now()
	run := receipt.Run{WorkflowID: testWorkflowID, RunID: testRunID, ActivityID: activityID, Digest: st.Digest,
		Approvals: []receipt.Approval{{ID: st.Decision.ApprovalID, Reviewer: st.Decision.Reviewer, Fingerprint: st.Decision.Fingerprint}},
		Host:      signer.Receipt(), Backend: "fake", Started: started, Ended: started.Add(2 * time.Second),
		Cell: &receipt.Cell{Index: 1, SettingsDigest: h.status().Settings.Digest, Chain: st.Chain}}
	if change != nil {
		change(&run)
	}
	rec, err := receipt.Sign(signer.Signer, receipt.New(run, res))
	if err != nil {
		t.Fatal(err)
	}
	res.Receipt = &rec
	return contract.LateResult{RunID: testRunID, ActivityID: activityID, Result: res}
}

// TestSessionCellLateResult: the server times a cell's activity out while its host runs the cell
// on (a cut connection): the session waits, refuses late results that are not the cell's (an
// unlisted key, another activity, another cell's index, a changed output byte) and takes its
// host's, which ends the cell with its true output, marked recovered; the session goes on to the
// next cell. Without a late result in time the session ends SandboxLost, as before.
func TestSessionCellLateResult(t *testing.T) {
	host, other := hosttest.New(t, "host-a"), hosttest.New(t, "host-a")
	for _, deliver := range []bool{true, false} {
		h := newSessionHarnessWith(t, sessionPolicy, withHost(host))
		var activityID string
		cells := 0
		h.env.OnActivity(contract.SessionCellActivityName, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in contract.CellRunInput) (guard.Result, error) {
				cells++
				if in.Cell.Index == 1 {
					activityID = activity.GetInfo(ctx).ActivityID
					return guard.Result{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
				}
				return guard.Result{}, errors.New("cell 2 is not run by this test")
			})
		h.at(time.Minute, func() { h.submit("print(1)") })
		h.at(2*time.Minute, func() { h.decide(1, approve(h.status().Cells[0].Digest)) })
		if deliver {
			forged := []func(*receipt.Run){
				func(r *receipt.Run) { r.ActivityID += "0" },
				func(r *receipt.Run) { r.Cell.Index = 2 },
			}
			for i, f := range forged {
				h.at(3*time.Minute+time.Duration(i)*time.Second, func() {
					h.env.SignalWorkflow(contract.SignalLateResult, cellLateResult(t, h, host, activityID, "forged\n", f))
				})
			}
			h.at(3*time.Minute+5*time.Second, func() {
				h.env.SignalWorkflow(contract.SignalLateResult, cellLateResult(t, h, other, activityID, "forged\n", nil))
				changed := cellLateResult(t, h, host, activityID, "printed after the cut\n", nil)
				changed.Result.Stdout = []byte("printed after the cuT\n")
				h.env.SignalWorkflow(contract.SignalLateResult, changed)
			})
			h.at(4*time.Minute, func() {
				h.env.SignalWorkflow(contract.SignalLateResult, cellLateResult(t, h, host, activityID, "printed after the cut\n", nil))
			})
			h.at(5*time.Minute, func() { h.closeSession() })
		}
		h.run(sessionRequest())
		res, err := h.result()
		st := h.status().Cells[0]
		if !deliver {
			var lost *guard.SandboxLost
			if !errors.As(contract.FromFailure(err), &lost) || !strings.Contains(err.Error(), "no late result within") {
				t.Errorf("without a late result: %+v, %v; want SandboxLost after the wait", res, err)
			}
			continue
		}
		if err != nil || res.End != contract.EndClosed {
			t.Fatalf("session ended %+v, %v; want closed", res, err)
		}
		if st.Result == nil || string(st.Result.Stdout) != "printed after the cut\n" || st.Result.Recovered == nil || st.Result.Recovered.ActivityID != activityID {
			t.Fatalf("cell 1: %s, result %+v; want the host's late result, recovered", st.State, st.Result)
		}
		if cells != 1 {
			t.Errorf("%d cell activities; want 1 (the late result runs nothing again)", cells)
		}
	}
}
