package workflows

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// withHost makes the harness's host sign receipts with host's key and its check record host's
// hosts file.
func withHost(host *hosttest.Host) func(*activities.Config) {
	return func(c *activities.Config) {
		c.HostKeyFile, c.HostName, c.HostsFile = host.KeyFile, host.Name, host.File
	}
}

// TestSessionCellReceiptsChain: with a hosts file recorded, every cell's result carries its
// host's receipt, each chaining to the one before it, and the workflow accepts them.
func TestSessionCellReceiptsChain(t *testing.T) {
	host := hosttest.New(t, "host-a")
	h := newSessionHarnessWith(t, sessionPolicy, withHost(host))
	req := sessionRequest()
	for i, code := range []string{"x = 41", "print(x + 1)"} {
		base := time.Duration(3*i+1) * time.Minute
		h.at(base, func() { h.submit(code) })
		h.at(base+time.Minute, func() {
			h.expectAccepted(fmt.Sprintf("approve cell %d", i+1), h.decide(i+1, approve(h.status().Cells[i].Digest)))
		})
	}
	h.at(8*time.Minute, func() { h.closeSession() })
	h.run(req)
	res, err := h.result()
	if err != nil || res.End != contract.EndClosed || len(res.Cells) != 2 {
		t.Fatalf("result %+v, %v; want closed after 2 cells", res, err)
	}
	hosts, err := receipt.LoadHosts(host.File)
	if err != nil {
		t.Fatal(err)
	}
	previous := ""
	for i, c := range res.Cells {
		st, err := receipt.Verify(hosts, c.Result.Receipt)
		if err != nil || st.Cell == nil || st.Cell.Index != i+1 || st.Cell.Previous != previous || st.Digest != c.Digest {
			t.Fatalf("cell %d receipt %+v, %v; want cell %d chained to %q", i+1, st.Cell, err, i+1, previous)
		}
		previous = receipt.Hash(*c.Result.Receipt)
	}
}

// TestSessionRefusesForgedCellResults: a cell result that is not its host's (no receipt, a
// receipt by a key the hosts file lacks) ends the session with a ReceiptRefused; the forged
// output is never the cell's result.
func TestSessionRefusesForgedCellResults(t *testing.T) {
	host, other := hosttest.New(t, "host-a"), hosttest.New(t, "host-a")
	for _, tc := range []struct {
		name, field string
		forge       func(in contract.CellRunInput) guard.Result
	}{
		{"no receipt", receipt.FieldReceipt, func(in contract.CellRunInput) guard.Result {
			return guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("forged\n")}
		}},
		{"unlisted key", receipt.FieldHostKey, func(in contract.CellRunInput) guard.Result {
			r := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("forged\n"), Digest: in.Decision.Digest}
			rec, err := receipt.Sign(other.Signer, receipt.New(receipt.Run{WorkflowID: testWorkflowID, RunID: testRunID, Digest: in.Decision.Digest,
				Host: other.Receipt(), Started: time.Now(), Ended: time.Now(), Cell: &receipt.Cell{Index: in.Cell.Index}}, r))
			if err != nil {
				panic(err)
			}
			r.Receipt = &rec
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSessionHarnessWith(t, sessionPolicy, withHost(host))
			h.env.OnActivity(contract.SessionCellActivityName, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in contract.CellRunInput) (guard.Result, error) { return tc.forge(in), nil })
			h.at(time.Minute, func() { h.submit("print(1)") })
			h.at(2*time.Minute, func() { h.decide(1, approve(h.status().Cells[0].Digest)) })
			h.run(sessionRequest())
			res, err := h.result()
			var rr *guard.ReceiptRefused
			if !errors.As(contract.FromFailure(err), &rr) || rr.Field != tc.field {
				t.Fatalf("session ended with %+v, %v; want a ReceiptRefused for %s", res, err, tc.field)
			}
			if st := h.status(); st.Cells[0].State != contract.StatusError || st.Cells[0].Result != nil {
				t.Errorf("cell 1: %s with result %v; want error and no result", st.Cells[0].State, st.Cells[0].Result)
			}
		})
	}
}
