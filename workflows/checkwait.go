package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// checkWait answers the update contract.UpdateAwaitCheck: a client that started the run with it
// (update-with-start) learns the check's outcome in the start's own call, with no status query.
type checkWait struct {
	done    bool
	summary guard.Summary
	err     error
	// waiting counts the updates not yet answered.
	waiting int
}

// checkAnswering registers the update contract.UpdateAwaitCheck, runs the check (r.check) and
// answers every update that waits for it before the run goes on, so that none is left waiting
// when the run ends with the check's error. It adds no command: a history without the update
// replays as before.
func (r *runCode) checkAnswering(ctx workflow.Context, in contract.Input) (contract.CheckResult, error) {
	w := &checkWait{}
	if err := workflow.SetUpdateHandler(ctx, contract.UpdateAwaitCheck, w.answer); err != nil {
		return contract.CheckResult{}, fmt.Errorf("workflows: set update handler %s: %w", contract.UpdateAwaitCheck, err)
	}
	check, err := r.check(ctx, in)
	w.done, w.err = true, err
	if err == nil {
		w.summary = check.Checked.Summary()
	}
	if w.waiting > 0 {
		// The handlers run at this yield, in this workflow task; no command is added.
		_ = workflow.Await(ctx, func() bool { return w.waiting == 0 })
	}
	return check, err
}

// answer is the update's handler: it waits until the check finished and answers with the
// request as the check recorded it, or with the check's typed error.
func (w *checkWait) answer(ctx workflow.Context) (guard.Summary, error) {
	w.waiting++
	defer func() { w.waiting-- }()
	if err := workflow.Await(ctx, func() bool { return w.done }); err != nil {
		return guard.Summary{}, err
	}
	if w.err != nil {
		return guard.Summary{}, contract.ToFailure(w.err)
	}
	return w.summary, nil
}
