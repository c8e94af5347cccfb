package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
)

// notifyRecorder is a notify activity that records its inputs and fails with err (nil: delivers).
type notifyRecorder struct {
	mu   sync.Mutex
	ins  []contract.NotifyInput
	err  error
	wait bool
	// cancelled counts the calls that ended by their context (wait).
	cancelled int
}

func (n *notifyRecorder) notify(ctx context.Context, in contract.NotifyInput) (contract.NotifyResult, error) {
	n.mu.Lock()
	n.ins = append(n.ins, in)
	n.mu.Unlock()
	if n.wait {
		for ctx.Err() == nil {
			activity.RecordHeartbeat(ctx)
			time.Sleep(10 * time.Millisecond)
		}
		n.mu.Lock()
		n.cancelled++
		n.mu.Unlock()
		return contract.NotifyResult{}, ctx.Err()
	}
	if n.err != nil {
		return contract.NotifyResult{}, n.err
	}
	return contract.NotifyResult{Delivered: []string{"webhook"}}, nil
}

func (n *notifyRecorder) calls() []contract.NotifyInput {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]contract.NotifyInput(nil), n.ins...)
}

func notifyHarness(t *testing.T, opts *contract.NotifyOptions, n *notifyRecorder) *harness {
	h := newHarness(t, okBackend(), activities.Config{Notify: opts})
	h.env.RegisterActivityWithOptions(n.notify, activity.RegisterOptions{Name: contract.NotifyActivityName})
	return h
}

// A notification that fails at every attempt neither ends nor decides the run: it waits, its
// status says the notification failed after MaximumAttempts, and an approval runs it once.
func TestNotifyFailureNeverDecides(t *testing.T) {
	n := &notifyRecorder{err: errors.New("receiver down")}
	h := notifyHarness(t, &contract.NotifyOptions{MaximumAttempts: 3}, n)
	req := pyRequest()
	req.Conversation = "task-1"
	dg := h.digest(req)
	h.at(30*time.Minute, func() {
		st := h.status()
		if st.State != contract.StatusAwaitingApproval || st.Decision != nil || st.Notification == nil || st.Notification.State != contract.NotifyFailed {
			t.Errorf("status after the failed notification: %s, decision %+v, notification %+v", st.State, st.Decision, st.Notification)
		}
		h.signal(decision(id1, dg, true))
	})
	h.run(req)
	if res, err := h.result(); err != nil || !res.OK {
		t.Fatalf("result %+v, %v; want the run's output", res, err)
	}
	h.wantRuns(1)
	calls := n.calls()
	if len(calls) != 3 {
		t.Fatalf("notify attempts: %d; want 3", len(calls))
	}
	in := calls[0]
	if in.Event != contract.EventRunAwaiting || in.WorkflowID != testWorkflowID || in.RunID != testRunID || in.Digest != dg ||
		in.Code != req.Code || in.Conversation != "task-1" || in.Deadline.Sub(in.Since) != approvalTimeout {
		t.Errorf("notify input %+v", in)
	}
}

// A notification still in flight when the decision comes is cancelled; one delivered is
// recorded; a worker that records no notify options schedules none.
func TestNotifyDeliveredCancelledOrNone(t *testing.T) {
	t.Run("delivered", func(t *testing.T) {
		n := &notifyRecorder{}
		h := notifyHarness(t, &contract.NotifyOptions{}, n)
		req := pyRequest()
		dg := h.digest(req)
		h.at(time.Minute, func() {
			if st := h.status(); st.Notification == nil || st.Notification.State != contract.NotifyDelivered || st.Notification.Delivered[0] != "webhook" {
				t.Errorf("notification %+v; want delivered by webhook", st.Notification)
			}
			h.signal(decision(id1, dg, true))
		})
		h.run(req)
		if _, err := h.result(); err != nil {
			t.Fatal(err)
		}
		if len(n.calls()) != 1 {
			t.Errorf("notify calls: %d; want 1", len(n.calls()))
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		n := &notifyRecorder{wait: true}
		h := notifyHarness(t, &contract.NotifyOptions{HeartbeatTimeout: time.Hour, StartToCloseTimeout: time.Hour}, n)
		req := pyRequest()
		dg := h.digest(req)
		// The test clock stands still while an activity runs: the decision comes at once.
		h.at(0, func() { h.signal(decision(id1, dg, true)) })
		h.run(req)
		if res, err := h.result(); err != nil || !res.OK {
			t.Fatalf("result %+v, %v", res, err)
		}
		h.wantRuns(1)
		if c := len(n.calls()); c > 1 || c != n.cancelled {
			t.Errorf("notify calls %d, cancelled %d; want none, or one cancelled once the decision came", c, n.cancelled)
		}
		if st := h.status(); st.Notification == nil || st.Notification.State != contract.NotifyPending {
			t.Errorf("notification %+v; want left pending (cancelled), never failed", st.Notification)
		}
	})
	t.Run("none", func(t *testing.T) {
		n := &notifyRecorder{}
		h := notifyHarness(t, nil, n)
		req := pyRequest()
		dg := h.digest(req)
		h.at(time.Minute, func() {
			if st := h.status(); st.Notification != nil {
				t.Errorf("notification %+v without notify options", st.Notification)
			}
			h.signal(decision(id1, dg, true))
		})
		h.run(req)
		if len(n.calls()) != 0 {
			t.Errorf("notify calls without notify options: %d", len(n.calls()))
		}
	})
}

// A run's notification carries its packages, so a notification with the code lists them with
// every hash.
func TestNotifyCarriesPackages(t *testing.T) {
	n := &notifyRecorder{}
	policy := testPolicy
	policy.Packages = true
	h := newHarness(t, okBackend(), activities.Config{Notify: &contract.NotifyOptions{}, Policy: policy})
	h.env.RegisterActivityWithOptions(n.notify, activity.RegisterOptions{Name: contract.NotifyActivityName})
	req := pyRequest()
	req.Packages = "alpha==1.0 --hash=sha256:" + strings.Repeat("a", 64) + "\n"
	c, err := policy.Check(req, "fake")
	if err != nil {
		t.Fatal(err)
	}
	h.at(time.Minute, func() { h.signal(decision(id1, c.Digest, false)) })
	h.run(req)
	calls := n.calls()
	if len(calls) != 1 || len(calls[0].Packages) != 1 || calls[0].Packages[0].Requirement() != "alpha==1.0" {
		t.Fatalf("notify inputs %+v; want one naming alpha==1.0", calls)
	}
}
