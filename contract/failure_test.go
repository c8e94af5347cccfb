package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/sandboxflow/sandboxflow/guard"
)

func TestErrorsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name         string
		err          error
		nonRetryable bool
	}{
		{"tool usage", &guard.ToolUsageError{Msg: "code is empty"}, true},
		{"config", &guard.ConfigError{Msg: "timeout 1h is over the policy's maximum"}, true},
		{"denied", &guard.ApprovalDenied{Reason: guard.DeniedByReviewer, Reviewer: "bob", Message: "no"}, true},
		{"expired", &guard.ApprovalDenied{Reason: guard.DeniedExpired, Message: "no decision within 1h"}, true},
		{"before start", &guard.IntegrationError{Op: "docker: ping", Err: errors.New("refused")}, false},
		{"after start", &guard.IntegrationError{Op: "docker: read result", Err: errors.New("garbled"), CodeMayHaveStarted: true}, true},
		{"wrapped", fmt.Errorf("outer: %w", &guard.ConfigError{Msg: "missing image"}), true},
		{"sandbox lost", &guard.SandboxLost{Msg: "host sandbox-host-1 stopped heartbeating"}, true},
		{"cancelled", &guard.Cancelled{By: "alice", Reason: "wrong data set"}, true},
		{"refused", &guard.ApprovalRefused{Reason: guard.RefusedAlreadyUsed, Msg: "used by sandbox activity \"5\""}, true},
		{"package hash mismatch", &guard.PackageError{Reason: guard.PackageHashMismatch, Package: "six", Msg: "six-1.0-py3-none-any.whl has sha256:00"}, true},
		{"package index unreachable", &guard.PackageError{Reason: guard.PackageIndexUnreachable, Msg: "connection refused"}, false},
		{"refused with a cause", fmt.Errorf("outer: %w", &guard.ApprovalRefused{Reason: guard.RefusedNotVerified, Msg: "does not verify", Err: errors.New("approval: refused (expired): past")}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := ToFailure(tc.err)
			var appErr *temporal.ApplicationError
			if !errors.As(app, &appErr) {
				t.Fatalf("ToFailure(%v) = %T; want *temporal.ApplicationError", tc.err, app)
			}
			if appErr.Type() != guard.TypeOf(tc.err) || appErr.NonRetryable() != tc.nonRetryable {
				t.Errorf("type %s, non-retryable %t; want %s, %t", appErr.Type(), appErr.NonRetryable(), guard.TypeOf(tc.err), tc.nonRetryable)
			}
			back := FromFailure(fmt.Errorf("activity error: %w", app))
			if guard.TypeOf(back) != guard.TypeOf(tc.err) || guard.Retryable(back) != guard.Retryable(tc.err) {
				t.Errorf("round trip type %s retryable %t; want %s, %t", guard.TypeOf(back), guard.Retryable(back), guard.TypeOf(tc.err), guard.Retryable(tc.err))
			}
		})
	}
	t.Run("messages survive", func(t *testing.T) {
		for _, err := range []error{
			&guard.ToolUsageError{Msg: "code is empty"},
			&guard.ApprovalDenied{Reason: guard.DeniedByReviewer, Reviewer: "bob", Message: "no"},
			&guard.IntegrationError{Op: "docker: ping", Err: errors.New("refused")},
			&guard.Cancelled{By: "alice", Reason: "wrong data set"},
			&guard.PackageError{Reason: guard.PackageSdistOnly, Package: "six", Msg: "only six-1.0.tar.gz"},
			&guard.ApprovalRefused{Reason: guard.RefusedNotVerified, Msg: "does not verify", Err: errors.New("approval: refused (expired): past")},
		} {
			if got := FromFailure(ToFailure(err)).Error(); got != err.Error() {
				t.Errorf("round trip of %q gave %q", err, got)
			}
		}
	})
	t.Run("a refusal keeps its reason", func(t *testing.T) {
		var ar *guard.ApprovalRefused
		err := FromFailure(fmt.Errorf("activity error: %w", ToFailure(&guard.ApprovalRefused{Reason: guard.RefusedMismatch, Msg: "m", Err: errors.New("c")})))
		if !errors.As(err, &ar) || ar.Reason != guard.RefusedMismatch || ar.Msg != "m" || ar.Err == nil || ar.Err.Error() != "c" {
			t.Errorf("FromFailure = %#v; want reason mismatch, message m, cause c", err)
		}
	})
	t.Run("untyped errors pass through", func(t *testing.T) {
		plain := errors.New("plain")
		if ToFailure(plain) != plain || FromFailure(plain) != plain {
			t.Error("an untyped error was changed")
		}
		if ToFailure(nil) != nil || FromFailure(nil) != nil {
			t.Error("nil was changed")
		}
	})
	t.Run("foreign integration error without details", func(t *testing.T) {
		foreign := temporal.NewApplicationError("daemon down", guard.TypeIntegrationError)
		var ie *guard.IntegrationError
		if !errors.As(FromFailure(foreign), &ie) || !ie.CodeMayHaveStarted || guard.Retryable(ie) {
			t.Errorf("FromFailure(foreign) = %#v; want an IntegrationError that may have started", ie)
		}
	})
	t.Run("details are plain JSON on the wire", func(t *testing.T) {
		fc := temporal.GetDefaultFailureConverter()
		failure := fc.ErrorToFailure(ToFailure(&guard.IntegrationError{Op: "x", Err: errors.New("y")}))
		payloads := failure.GetApplicationFailureInfo().GetDetails().GetPayloads()
		if len(payloads) != 1 {
			t.Fatalf("%d detail payloads; want 1", len(payloads))
		}
		var raw map[string]any
		if err := json.Unmarshal(payloads[0].GetData(), &raw); err != nil {
			t.Fatalf("details %q are not JSON: %v", payloads[0].GetData(), err)
		}
		if raw["code_may_have_started"] != false || raw["op"] != "x" || raw["error"] != "y" {
			t.Errorf("details = %v; want op, error and code_may_have_started=false", raw)
		}
		// And back, as a client receives it.
		var ie *guard.IntegrationError
		if !errors.As(FromFailure(fc.FailureToError(failure)), &ie) || ie.CodeMayHaveStarted || ie.Op != "x" {
			t.Errorf("decoded %#v; want IntegrationError x, not started", ie)
		}
	})
}
