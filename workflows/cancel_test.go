package workflows

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// cancelOutcome is what became of a cancel update.
type cancelOutcome struct {
	accepted bool
	rejected error
	result   contract.CancelResult
}

// cancelRun sends req as the update "cancel" and returns a function that reports its outcome.
func (h *harness) cancelRun(req contract.CancelRequest) func() cancelOutcome {
	var (
		mu  sync.Mutex
		out cancelOutcome
	)
	h.mu.Lock()
	h.updates++
	id := fmt.Sprintf("cancel-%d", h.updates)
	h.mu.Unlock()
	h.env.UpdateWorkflow(contract.UpdateCancel, id, &testsuite.TestUpdateCallback{
		OnAccept: func() { mu.Lock(); out.accepted = true; mu.Unlock() },
		OnReject: func(err error) { mu.Lock(); out.rejected = err; mu.Unlock() },
		OnComplete: func(v any, err error) {
			mu.Lock()
			defer mu.Unlock()
			if r, ok := v.(contract.CancelResult); ok {
				out.result = r
			}
		},
	}, req)
	return func() cancelOutcome {
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}

// TestCancelUpdateWhileWaitingRunsNothing: a run cancelled while it waits ends with a Cancelled
// error naming who asked, nothing runs, and an approval sent after it is refused.
func TestCancelUpdateWhileWaitingRunsNothing(t *testing.T) {
	for _, via := range []string{contract.ViaSignal, contract.ViaUpdate} {
		t.Run(via, func(t *testing.T) {
			h := newHarness(t, okBackend(), activities.Config{})
			req := pyRequest()
			dg := h.digest(req)
			var cancel func() cancelOutcome
			var late func() updateOutcome
			h.at(time.Minute, func() { cancel = h.cancelRun(contract.CancelRequest{By: "orchestrator-7", Reason: "wrong data set"}) })
			h.at(time.Minute+time.Second, func() {
				if via == contract.ViaSignal {
					h.signal(decision(id1, dg, true))
				} else {
					late = h.update(decision(id1, dg, true))
				}
			})
			h.run(req)
			_, err := h.result()
			var c *guard.Cancelled
			if !errors.As(contract.FromFailure(err), &c) || c.By != "orchestrator-7" || c.Reason != "wrong data set" {
				t.Fatalf("error = %v; want Cancelled by orchestrator-7 for the reason given", err)
			}
			if o := cancel(); !o.accepted || o.result.State != contract.StatusAwaitingApproval || o.result.By != "orchestrator-7" {
				t.Errorf("cancel update = %+v; want accepted while awaiting approval", o)
			}
			if late != nil {
				if o := late(); o.accepted {
					t.Errorf("an approval after the cancel was accepted")
				}
			}
			if calls, _ := h.backend.counts(); calls != 0 {
				t.Errorf("backend called %d times; want 0", calls)
			}
			h.wantStatuses(contract.StatusAwaitingApproval, contract.StatusCancelled)
			st := h.status()
			if st.Cancel == nil || st.Cancel.By != "orchestrator-7" || st.Decision != nil {
				t.Errorf("status cancel %+v decision %+v; want the cancel recorded and no decision", st.Cancel, st.Decision)
			}
		})
	}
}

// TestCancelRacingAnApprovalRunsNothing: a cancel and an approval that arrive together end the run
// cancelled: with nothing run when the cancel came first.
func TestCancelRacingAnApprovalRunsNothing(t *testing.T) {
	for _, cancelFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("cancel first %t", cancelFirst), func(t *testing.T) {
			h := newHarness(t, okBackend(), activities.Config{})
			req := pyRequest()
			dg := h.digest(req)
			var cancel func() cancelOutcome
			h.at(time.Minute, func() {
				if cancelFirst {
					cancel = h.cancelRun(contract.CancelRequest{By: "alice"})
					h.signal(decision(id1, dg, true))
				} else {
					h.signal(decision(id1, dg, true))
					cancel = h.cancelRun(contract.CancelRequest{By: "alice"})
				}
			})
			h.run(req)
			_, err := h.result()
			if o := cancel(); !o.accepted {
				t.Fatalf("cancel = %+v; want accepted", o)
			}
			if guard.TypeOf(contract.FromFailure(err)) != guard.TypeCancelled {
				t.Fatalf("error = %v; want Cancelled", err)
			}
			// A cancel accepted first runs nothing; one after the approval may find the sandbox
			// activity started, which it stops: never more than the one run.
			if calls, _ := h.backend.counts(); (cancelFirst && calls != 0) || calls > 1 {
				t.Errorf("backend called %d times; want 0 (cancel first) or at most 1", calls)
			}
		})
	}
}

// TestCancelValidatorRefuses: a request naming no one, a second request, and a request to an ended
// run are refused, and refusing changes nothing.
func TestCancelValidatorRefuses(t *testing.T) {
	b := okBackend()
	h := newHarness(t, b, activities.Config{})
	req := pyRequest()
	dg := h.digest(req)
	// Every update is sent from the test environment's own callbacks: the environment is not
	// safe to call from the activity's goroutine (the race detector says so).
	var anonymous, first func() cancelOutcome
	h.at(time.Minute, func() {
		anonymous = h.cancelRun(contract.CancelRequest{Reason: "who am I"})
		first = h.cancelRun(contract.CancelRequest{By: "bob"})
		h.signal(decision(id1, dg, true))
	})
	h.run(req)
	if o := anonymous(); o.accepted || o.rejected == nil || !strings.Contains(o.rejected.Error(), "name who asks") {
		t.Errorf("anonymous cancel = %+v; want refused", o)
	}
	if o := first(); !o.accepted || o.result.State != contract.StatusAwaitingApproval {
		t.Errorf("first cancel = %+v; want accepted while the run waits", o)
	}
	// A second request, to a run already cancelled (in the environment the first ends the run
	// before a second is handled, so the validator's refusal is checked on its own).
	if rej := (&runCode{status: contract.Status{State: contract.StatusRunning}, cancel: &guard.Cancellation{By: "bob"}}).cancelRefusal(contract.CancelRequest{By: "carol"}); rej != "already cancelled by bob" {
		t.Errorf("second cancel: refusal %q; want already cancelled by bob", rej)
	}
	if st := h.status(); st.Cancel == nil || st.Cancel.By != "bob" {
		t.Errorf("status cancel = %+v; want bob's", st.Cancel)
	}
	// Cancelled while it waited: the run ends with nothing run, the later approval unused.
	if _, err := h.result(); guard.TypeOf(contract.FromFailure(err)) != guard.TypeCancelled {
		t.Errorf("error = %v; want Cancelled", err)
	}
	if calls, _ := b.counts(); calls != 0 {
		t.Errorf("backend called %d times; want 0", calls)
	}

	for _, state := range []string{contract.StatusSucceeded, contract.StatusFailed, contract.StatusDenied, contract.StatusExpired,
		contract.StatusCancelled, contract.StatusError, contract.StatusTimedOut} {
		r := &runCode{status: contract.Status{State: state}}
		if rej := r.cancelRefusal(contract.CancelRequest{By: "bob"}); !strings.Contains(rej, "has ended") {
			t.Errorf("cancel in state %s: refusal %q; want the run has ended", state, rej)
		}
	}
	long := strings.Repeat("x", contract.MaxCancelReasonBytes+1)
	for _, bad := range []contract.CancelRequest{{By: "bob", Reason: long}, {By: long}, {By: "bob", Reason: "\xff"}} {
		r := &runCode{status: contract.Status{State: contract.StatusRunning}}
		if rej := r.cancelRefusal(bad); rej == "" {
			t.Errorf("cancel %.40q accepted; want refused", bad.Reason+bad.By)
		}
	}
}
