package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxflow/sandboxflow/contract"
)

// TestSessionHoldLostAttemptKeepsTheSandbox: a hold whose attempt the server lost (its heartbeat
// answered "not found", as after a heartbeat timeout the host did not see) lets the sandbox go
// without removing it; the session's next hold takes it, even while the lost hold has not yet
// noticed; a genuine cancel then removes it. Without a next hold the sandbox is removed after
// the re-hold window.
func TestSessionHoldLostAttemptKeepsTheSandbox(t *testing.T) {
	h := newSessionHost(t)
	hs := h.a.sessions.get(sessionKey{testWorkflowID, testRunID})
	if !h.a.take(context.Background(), hs, time.Second, time.Second, func() {}) {
		t.Fatal("the first hold could not take the sandbox")
	}
	ctx1, lose := context.WithCancelCause(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- h.a.hold(ctx1, hs, 10*time.Millisecond, func() {}) }()

	// The next hold arrives before the lost one noticed: it waits for it.
	took := make(chan bool, 1)
	go func() { took <- h.a.take(context.Background(), hs, 5*time.Second, time.Second, func() {}) }()
	time.Sleep(50 * time.Millisecond)
	lose(serviceerror.NewNotFound("invalid activityID or activity already timed out or invoking workflow is completed"))
	if err := <-done1; err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("the lost hold ended with %v; want an error naming the lost attempt", err)
	}
	if !<-took {
		t.Fatal("the next hold did not take the sandbox the lost hold let go")
	}
	if h.backend.Sandboxes()[0].Closed() || h.a.OpenSessions() != 1 {
		t.Fatalf("after a lost hold: closed %v, %d open; want the sandbox kept", h.backend.Sandboxes()[0].Closed(), h.a.OpenSessions())
	}
	if _, err := h.run(h.cell(1, "x = 1", h.chain, nil)); err != nil {
		t.Fatalf("a cell after the re-hold: %v", err)
	}

	// The session closes: the workflow cancels its hold, and the sandbox goes.
	ctx2, cancel := context.WithCancelCause(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- h.a.hold(ctx2, hs, 10*time.Millisecond, func() {}) }()
	cancel(&temporal.CanceledError{})
	if err := <-done2; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled hold ended with %v; want the cancellation", err)
	}
	if !h.backend.Sandboxes()[0].Closed() || h.a.OpenSessions() != 0 {
		t.Errorf("after the session's cancel: closed %v, %d open; want removed", h.backend.Sandboxes()[0].Closed(), h.a.OpenSessions())
	}

	// No next hold: the sandbox is removed after the window.
	h2 := newSessionHost(t)
	h2.a.holdStart = 50 * time.Millisecond
	hs2 := h2.a.sessions.get(sessionKey{testWorkflowID, testRunID})
	h2.a.take(context.Background(), hs2, time.Second, time.Second, func() {})
	ctx3, lose3 := context.WithCancelCause(context.Background())
	done3 := make(chan error, 1)
	go func() { done3 <- h2.a.hold(ctx3, hs2, 10*time.Millisecond, func() {}) }()
	lose3(errors.New("heartbeat: context deadline exceeded"))
	<-done3
	deadline := time.Now().Add(5 * time.Second)
	for h2.a.OpenSessions() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h2.a.OpenSessions() != 0 || !h2.backend.Sandboxes()[0].Closed() {
		t.Fatalf("a sandbox no hold took again is still kept (%d open)", h2.a.OpenSessions())
	}
	var why any
	for _, e := range h2.sink.Events() {
		if e.Type == contract.EventSessionEnded {
			why = e.Data["reason"]
		}
	}
	if why != "hold lost" {
		t.Errorf("session.ended reason %v; want \"hold lost\"", why)
	}
}

// TestSessionHoldRefusesASecondLiveHold: a hold beside a live one is refused once its wait ends.
func TestSessionHoldRefusesASecondLiveHold(t *testing.T) {
	h := newSessionHost(t)
	hs := h.a.sessions.get(sessionKey{testWorkflowID, testRunID})
	if !h.a.take(context.Background(), hs, time.Second, time.Second, func() {}) {
		t.Fatal("the first hold could not take the sandbox")
	}
	if h.a.take(context.Background(), hs, 50*time.Millisecond, 10*time.Millisecond, func() {}) {
		t.Error("a second hold took a sandbox a live hold holds")
	}
}
