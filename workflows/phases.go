package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// phaseClock holds the workflow's own times (workflow.Now, the same on every replay) that bound
// a run's or a cell's phases, for the status query's answer (contract.Status.Phases,
// contract.CellStatus.Phases). Noting a time writes no command: histories replay unchanged.
type phaseClock struct {
	// begun is the run's start (or the cell's submit); checked, when the check's record came
	// back; scheduled, when the last sandbox activity was scheduled; claimed, when the workflow
	// first saw a host's claim after that scheduling (zero for cells: sessions read no claims).
	begun, checked, scheduled, claimed time.Time
}

// schedule notes the scheduling of a sandbox activity, which starts a new queue.
func (c *phaseClock) schedule(ctx workflow.Context) {
	c.scheduled, c.claimed = workflow.Now(ctx), time.Time{}
}

// claim notes a host's claim on the run's approval, the first after the last scheduling.
func (c *phaseClock) claim(ctx workflow.Context) {
	if !c.scheduled.IsZero() && c.claimed.IsZero() {
		c.claimed = workflow.Now(ctx)
	}
}

// phases is where the time went, as far as the workflow knows it; ended is the workflow's time
// when the result came back or the wait ended (zero while it goes on) and res the result, if
// any. The phases after the queue come from the receipt's times (the host's clock), as the audit
// record's do. A cell's sandbox is open before it is scheduled, so its queue runs to its
// code's start and it has no sandbox start. Nil before the check's record.
func (c *phaseClock) phases(ended time.Time, res *guard.Result) *contract.AuditPhases {
	if c.checked.IsZero() {
		return nil
	}
	p := &contract.AuditPhases{CheckMS: elapsedMS(c.begun, c.checked)}
	if c.scheduled.IsZero() {
		if !ended.IsZero() {
			p.WaitMS = elapsedMS(c.checked, ended)
		}
		return p
	}
	p.WaitMS = elapsedMS(c.checked, c.scheduled)
	if !c.claimed.IsZero() {
		p.QueueMS = elapsedMS(c.scheduled, c.claimed)
	}
	codeStart, codeEnd, ok := receiptTimes(res)
	if !ok {
		return p
	}
	if c.claimed.IsZero() {
		p.QueueMS = elapsedMS(c.scheduled, codeStart)
	} else {
		p.SandboxStartMS = elapsedMS(c.claimed, codeStart)
	}
	p.RunMS = elapsedMS(codeStart, codeEnd)
	if !ended.IsZero() {
		p.ReceiptMS = elapsedMS(codeEnd, ended)
	}
	return p
}

// receiptTimes are the code's start and end as res's receipt signs them.
func receiptTimes(res *guard.Result) (start, end time.Time, ok bool) {
	if res == nil || res.Receipt == nil {
		return start, end, false
	}
	// encoding/json's reflection decoding one statement is deterministic; workflowcheck cannot
	// tell.
	st, err := receipt.Parse([]byte(res.Receipt.Statement)) //workflowcheck:ignore
	if err != nil {
		return start, end, false
	}
	start, err1 := time.Parse(time.RFC3339Nano, st.Started)
	end, err2 := time.Parse(time.RFC3339Nano, st.Ended)
	return start, end, err1 == nil && err2 == nil
}

// elapsedMS is to-from in milliseconds, 0 rather than negative (two clocks).
func elapsedMS(from, to time.Time) *int64 {
	d := max(to.Sub(from).Milliseconds(), 0)
	return &d
}
