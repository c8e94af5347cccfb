package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// runWaitChange is the change id of decide's wait: an approval sent with Decision.Wait that
// starts the run is answered once the run has ended. A history from before it answered such a
// decision at once (a worker that did not know the field ignored it).
const runWaitChange = "run-decide-wait-v1"

// endWait is what the decisions answered once the run has ended wait for: the run's end, which
// RunCode records (finish) before it returns.
type endWait struct {
	ended     bool
	endResult *guard.Result
}

// answerEnded adds the run's end to the answer of an approval sent with Wait that started it
// (desk.answerWhenEnded): its result, when it fits.
func (r *runCode) answerEnded(res *contract.DecideResult) {
	res.Ended = true
	if er := r.endResult; er != nil && outputBytes(*er) <= contract.MaxAnsweredResultBytes {
		res.Result = er
	}
}

// answerFor is the answer to d: res, without its result when d asked for it from the history
// (Decision.ResultFromHistory), where the workflow's result records it.
func answerFor(d contract.Decision, res contract.DecideResult) contract.DecideResult {
	if d.ResultFromHistory {
		res.Result = nil
	}
	return res
}

// finish records the run's end for the decisions that wait for it and lets them answer before
// the workflow completes: it adds no command, and a run no decision waits on goes on at once.
func (r *runCode) finish(ctx workflow.Context, res guard.Result, err error) {
	r.ended = true
	if err == nil {
		r.endResult = &res
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(dctx, func() bool { return r.desk.waiting == 0 })
}

// outputBytes is how much output res carries: its stdout, stderr and produced files.
func outputBytes(res guard.Result) int {
	n := len(res.Stdout) + len(res.Stderr)
	for _, f := range res.Files {
		n += len(f.Content)
	}
	for _, o := range res.Outputs {
		n += len(o.Data)
	}
	return n
}
