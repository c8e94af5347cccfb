//go:build integration

package docker

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/contract"
)

// cellSample is one cell's approve→result through the Go client, with the client-side clock
// times that cellPhases lines up with its session's history.
type cellSample struct {
	session      string
	cell         int
	approve, end time.Time
}

// cellPhaseNames are the steps of a cell's approve→result, in order.
var cellPhaseNames = []string{
	"approve call → cell activity scheduled (the statement's reads, the decision's workflow task)",
	"cell activity scheduled → started (task queue dispatch)",
	"cell activity started → its claim in the history",
	"claim → cell activity completed (the cell in the sandbox, the receipt)",
	"cell activity completed → decide-cell answered (workflow task)",
	"decide-cell answered → the client has the result",
}

// cellPhases splits each cell sample at the events of its session's history (server timestamps;
// client and server share this host's clock) and returns the median of each step.
func cellPhases(ctx context.Context, b *testing.B, tc tclient.Client, samples []cellSample) []phase {
	type cellEvents struct{ scheduled, started, completed, claimed, answered time.Time }
	bySession := map[string]map[int]*cellEvents{}
	dc := converter.GetDefaultDataConverter()
	read := func(session string) map[int]*cellEvents {
		cells := map[int]*cellEvents{}
		at := func(i int) *cellEvents {
			if cells[i] == nil {
				cells[i] = &cellEvents{}
			}
			return cells[i]
		}
		bySchedule := map[int64]int{}
		byUpdate := map[string]int{}
		it := tc.GetWorkflowHistory(ctx, session, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				b.Fatalf("history of %s: %v", session, err)
			}
			t := e.GetEventTime().AsTime()
			switch {
			case e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.SessionCellActivityName:
				var in contract.CellRunInput
				if err := dc.FromPayloads(e.GetActivityTaskScheduledEventAttributes().GetInput(), &in); err != nil {
					b.Fatalf("cell activity input in %s: %v", session, err)
				}
				bySchedule[e.GetEventId()] = in.Cell.Index
				at(in.Cell.Index).scheduled = t
			case e.GetActivityTaskStartedEventAttributes() != nil:
				if i, ok := bySchedule[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; ok {
					at(i).started = t
				}
			case e.GetActivityTaskCompletedEventAttributes() != nil:
				if i, ok := bySchedule[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; ok {
					at(i).completed = t
				}
			case e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == contract.SignalSandboxClaim:
				var c contract.SandboxClaim
				if err := dc.FromPayloads(e.GetWorkflowExecutionSignaledEventAttributes().GetInput(), &c); err == nil && c.Secret == "" && at(c.Cell).claimed.IsZero() {
					at(c.Cell).claimed = t
				}
			case e.GetWorkflowExecutionUpdateAcceptedEventAttributes() != nil:
				a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes()
				if a.GetAcceptedRequest().GetInput().GetName() != contract.UpdateDecideCell {
					continue
				}
				var cd contract.CellDecision
				if err := dc.FromPayloads(a.GetAcceptedRequest().GetInput().GetArgs(), &cd); err == nil {
					byUpdate[a.GetAcceptedRequest().GetMeta().GetUpdateId()] = cd.Cell
				}
			case e.GetWorkflowExecutionUpdateCompletedEventAttributes() != nil:
				if i, ok := byUpdate[e.GetWorkflowExecutionUpdateCompletedEventAttributes().GetMeta().GetUpdateId()]; ok {
					at(i).answered = t
				}
			}
		}
		return cells
	}
	steps := make([][]time.Duration, len(cellPhaseNames))
	for _, s := range samples {
		if bySession[s.session] == nil {
			bySession[s.session] = read(s.session)
		}
		ev := bySession[s.session][s.cell]
		if ev == nil || ev.scheduled.IsZero() || ev.completed.IsZero() || ev.claimed.IsZero() || ev.answered.IsZero() {
			b.Fatalf("cell %d of %s: its history lacks an event (%+v)", s.cell, s.session, ev)
		}
		for i, d := range []time.Duration{
			ev.scheduled.Sub(s.approve), ev.started.Sub(ev.scheduled), ev.claimed.Sub(ev.started),
			ev.completed.Sub(ev.claimed), ev.answered.Sub(ev.completed), s.end.Sub(ev.answered),
		} {
			steps[i] = append(steps[i], d)
		}
	}
	out := make([]phase, len(cellPhaseNames))
	for i, n := range cellPhaseNames {
		out[i] = phase{name: n, median: median(steps[i])}
	}
	return out
}
