package workflows

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// holdsThatTimeOut makes the first n SessionHolds end after d with a heartbeat timeout (the
// server did not get their heartbeats) and every later one last; it counts them.
func (h *sessionHarness) holdsThatTimeOut(n int, d time.Duration) *atomic.Int32 {
	h.holdSet = true
	var holds atomic.Int32
	count := func(mock.Arguments) { holds.Add(1) }
	h.env.OnActivity(contract.SessionHoldActivityName, mock.Anything, mock.Anything).
		After(d).Return(temporal.NewHeartbeatTimeoutError()).Run(count).Times(n)
	h.env.OnActivity(contract.SessionHoldActivityName, mock.Anything, mock.Anything).
		After(1000 * time.Hour).Return(nil).Run(count)
	return &holds
}

// TestSessionHoldTimeoutHoldsAgain: a hold the server timed out for missing heartbeats (a cut
// connection, a loaded server: the host and its sandbox may be alive) is followed by another on
// the same host; the session goes on and its cell runs. Before, the session ended SandboxLost.
func TestSessionHoldTimeoutHoldsAgain(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	holds := h.holdsThatTimeOut(1, 30*time.Second)
	h.at(time.Minute, func() { h.submit("x = 1") })
	h.at(90*time.Second, func() { h.expectAccepted("approve 1", h.decide(1, approve(h.status().Cells[0].Digest))) })
	h.at(3*time.Minute, func() {
		if st := h.status(); st.State != contract.SessionOpen || len(st.Cells) != 1 || st.Cells[0].State != contract.StatusSucceeded {
			t.Errorf("status after a lost hold: %s, cells %+v; want open, cell 1 succeeded", st.State, st.Cells)
		}
		h.closeSession()
	})
	h.run(sessionRequest())
	res, err := h.result()
	if err != nil || res.End != contract.EndClosed {
		t.Fatalf("session ended %q, %v; want closed", res.End, err)
	}
	if n := h.startedCount(contract.SessionHoldActivityName); n != 2 || holds.Load() < 1 {
		t.Errorf("%d holds; want the timed-out one and the next", n)
	}
}

// TestSessionHoldTimeoutsAreBounded: a host whose holds keep timing out ends the session
// SandboxLost after maxReholds holds again, never holding forever.
func TestSessionHoldTimeoutsAreBounded(t *testing.T) {
	h := newSessionHarness(t, sessionPolicy)
	holds := h.holdsThatTimeOut(1000, time.Second)
	h.run(sessionRequest())
	var lost *guard.SandboxLost
	if err := h.env.GetWorkflowError(); !errors.As(contract.FromFailure(err), &lost) {
		t.Fatalf("workflow error %v; want a SandboxLost", err)
	}
	if n := h.startedCount(contract.SessionHoldActivityName); n != maxReholds+1 || holds.Load() != int32(n) {
		t.Errorf("%d holds; want %d (the first and %d again)", n, maxReholds+1, maxReholds)
	}
}
