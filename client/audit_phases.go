package client

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard/human"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// runTimes are the history's times that bound a run's phases (contract.AuditPhases).
type runTimes struct {
	checked time.Time
	// scheduled and taken are the sandbox activities' scheduled and started event times, by
	// scheduled event id; done is the id of the one that completed or failed last, and doneAt
	// its time.
	scheduled, taken map[int64]time.Time
	done             int64
	doneAt           time.Time
}

// phases returns where the run's time went, from its history's times, the receipt's and its
// end (closed is zero while it runs).
func (t *runTimes) phases(started, closed time.Time, rec *contract.AuditRecord) *contract.AuditPhases {
	p := &contract.AuditPhases{}
	if t.checked.IsZero() {
		return p
	}
	p.CheckMS = ms(started, t.checked)
	last := t.done
	sched, ok := t.scheduled[last]
	if !ok {
		// The last one scheduled: a run waiting for its host, or one that never ran.
		for id, at := range t.scheduled {
			if id > last {
				last, sched, ok = id, at, true
			}
		}
	}
	switch {
	case ok:
		p.WaitMS = ms(t.checked, sched)
	case !closed.IsZero():
		p.WaitMS = ms(t.checked, closed)
		return p
	default:
		return p
	}
	taken, ok := t.taken[last]
	if !ok {
		return p
	}
	p.QueueMS = ms(sched, taken)
	if rec.Receipt == nil {
		return p
	}
	st, err := receipt.Parse([]byte(rec.Receipt.Statement))
	if err != nil {
		return p
	}
	codeStart, err1 := time.Parse(time.RFC3339Nano, st.Started)
	codeEnd, err2 := time.Parse(time.RFC3339Nano, st.Ended)
	if err1 != nil || err2 != nil {
		return p
	}
	p.SandboxStartMS, p.RunMS = ms(taken, codeStart), ms(codeStart, codeEnd)
	if last == t.done && !t.doneAt.IsZero() {
		p.ReceiptMS = ms(codeEnd, t.doneAt)
	}
	return p
}

// ms is to-from in milliseconds, 0 rather than negative (two clocks).
func ms(from, to time.Time) *int64 {
	d := max(to.Sub(from).Milliseconds(), 0)
	return &d
}

// ended notes that the sandbox activity scheduled as event id (if it is one) completed or failed
// at at.
func (t *runTimes) ended(sandbox map[int64]bool, id int64, at time.Time) {
	if sandbox[id] {
		t.done, t.doneAt = id, at
	}
}

// PhasesText is where a run's time went, as every door writes it: "check 12 ms, wait for a
// person 5m3s, ..." in the order of the run, each phase the record has; "" when it has none.
func PhasesText(p *contract.AuditPhases) string {
	if p == nil {
		return ""
	}
	var parts []string
	for _, ph := range []struct {
		name string
		ms   *int64
	}{{"check", p.CheckMS}, {"wait for a person", p.WaitMS}, {"queue", p.QueueMS}, {"sandbox start", p.SandboxStartMS}, {"run", p.RunMS}, {"receipt", p.ReceiptMS}} {
		if ph.ms != nil {
			parts = append(parts, ph.name+" "+phaseDuration(*ph.ms))
		}
	}
	return strings.Join(parts, ", ")
}

// phaseDuration writes ms as milliseconds under a second, seconds with a tenth under a minute,
// else as human.Duration does.
func phaseDuration(ms int64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%d ms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1f s", float64(ms)/1000)
	}
	return human.Duration(time.Duration(ms) * time.Millisecond)
}
