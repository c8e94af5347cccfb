package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
)

// What both workflows write of their state: the status search attribute, their end, and their
// events.

// upsertStatus sets the SandboxStatus search attribute to state, with any other search
// attributes given.
func upsertStatus(ctx workflow.Context, state string, more ...temporal.SearchAttributeUpdate) error {
	if err := workflow.UpsertTypedSearchAttributes(ctx, append([]temporal.SearchAttributeUpdate{contract.StatusKey.ValueSet(state)}, more...)...); err != nil {
		return fmt.Errorf("workflows: set search attribute %s=%s: %w", contract.AttrStatus, state, err)
	}
	return nil
}

// failed is the answer of a workflow that ends with err once its final state is recorded (serr
// is the recording's error): serr, else err as a Temporal application error.
func failed(serr, err error) error {
	if serr != nil {
		return serr
	}
	return contract.ToFailure(err)
}

// cancelledWith is the answer of a workflow cancelled with err once its final state is recorded
// (serr is the recording's error): serr, else the cancellation of ctx, else err.
func cancelledWith(ctx workflow.Context, serr, err error) error {
	if serr != nil {
		return serr
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// logEvent writes a workflow event with the replay-safe logger: its type, the digest it is of
// (under digestKey), then kv.
func logEvent(ctx workflow.Context, typ contract.EventType, digestKey, digest string, kv ...any) {
	args := append([]any{"event", string(typ), digestKey, digest}, kv...)
	workflow.GetLogger(ctx).Info(string(typ), args...)
}
