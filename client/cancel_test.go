package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// TestCancelNamesWhoAsks: a client cancels as its canceller, else its reviewer, else
// $USER@hostname, and refuses a malformed request before it sends anything (the client here
// reaches no server).
func TestCancelNamesWhoAsks(t *testing.T) {
	tc, err := tclient.NewLazyClient(tclient.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	t.Setenv("USER", "orchestrator")
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Temporal: tc, Canceller: "agent-7", Reviewer: "alice"}, "agent-7"},
		{Options{Temporal: tc, Reviewer: "alice"}, "alice"},
		{Options{Temporal: tc}, "orchestrator@"},
	} {
		c, err := New(tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(c.canceller, tc.want) {
			t.Errorf("canceller %q; want %q", c.canceller, tc.want)
		}
	}
	c, _ := New(Options{Temporal: tc})
	if got := c.WithReviewer("bob").canceller; got != "bob" {
		t.Errorf("WithReviewer cancels as %q; want bob", got)
	}
	_, err = c.Cancel(context.Background(), Run("sandbox-1"), strings.Repeat("x", 2000))
	var refused *CancelRefusedError
	if !errors.As(err, &refused) || ErrorType(err) != TypeCancelRefused {
		t.Errorf("an oversized reason: %v; want a CancelRefused before anything is sent", err)
	}
	out := NewErrorOutput(&guard.Cancelled{By: "agent-7", Reason: "done"})
	if out.Error.Type != guard.TypeCancelled || out.Error.By != "agent-7" || out.Error.Reason != "done" {
		t.Errorf("error output %+v; want type Cancelled, by agent-7, reason done", out.Error)
	}
}

// A cancel retried after its answer was lost is the same update (the workflow answers it once);
// another update, canceller, reason or cell is another.
func TestCancelUpdateIDIsTheRequests(t *testing.T) {
	req := contract.CancelRequest{By: "agent-7", Reason: "the user changed their mind"}
	id := cancelUpdateID(contract.UpdateCancel, req)
	if again := cancelUpdateID(contract.UpdateCancel, req); again != id {
		t.Errorf("the same cancel got update ids %s and %s", id, again)
	}
	for name, other := range map[string]string{
		"another canceller": cancelUpdateID(contract.UpdateCancel, contract.CancelRequest{By: "agent-8", Reason: req.Reason}),
		"another reason":    cancelUpdateID(contract.UpdateCancel, contract.CancelRequest{By: req.By}),
		"a cell's cancel":   cancelUpdateID(contract.UpdateCancelCell, contract.CancelCell{Cell: 1, CancelRequest: req}),
		"another cell":      cancelUpdateID(contract.UpdateCancelCell, contract.CancelCell{Cell: 2, CancelRequest: req}),
	} {
		if other == id || other == cancelUpdateID(contract.UpdateCancelCell, contract.CancelCell{Cell: 3, CancelRequest: req}) {
			t.Errorf("%s has the update id of another cancel: %s", name, other)
		}
	}
}
