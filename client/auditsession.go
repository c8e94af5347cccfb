package client

import (
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// sessionHistory reads a session's audit record from its history, one event at a time: the
// check, and each cell with the result its activity completed with, or, for a cell whose
// activity the server timed out, the late result (contract.SignalLateResult) its host delivered
// and the workflow took.
type sessionHistory struct {
	dc    converter.DataConverter
	rec   contract.AuditRecord
	hosts *receipt.Hosts
	// scheduled are the SessionCell activities by scheduled event id; lost the cells whose
	// activity timed out, by activity id, until a late result of theirs is read.
	scheduled map[int64]scheduledCell
	lost      map[string]guard.Cell
}

// scheduledCell is a SessionCell activity: its id and its cell.
type scheduledCell struct {
	activityID string
	cell       guard.Cell
}

func (h *sessionHistory) read(e *historypb.HistoryEvent) error {
	at := e.GetEventTime().AsTime()
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		h.rec.Started = at
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		h.marker(e.GetMarkerRecordedEventAttributes())
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		a := e.GetActivityTaskScheduledEventAttributes()
		var in contract.CellRunInput
		if a.GetActivityType().GetName() == contract.SessionCellActivityName && h.dc.FromPayloads(a.GetInput(), &in) == nil {
			h.scheduled[e.GetEventId()] = scheduledCell{activityID: a.GetActivityId(), cell: in.Cell}
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		a := e.GetActivityTaskCompletedEventAttributes()
		sc, ok := h.scheduled[a.GetScheduledEventId()]
		if !ok {
			return nil
		}
		var res guard.Result
		if err := h.dc.FromPayloads(a.GetResult(), &res); err != nil {
			return fmt.Errorf("client: audit: decode cell %d's result of %s: %w", sc.cell.Index, h.rec.WorkflowID, err)
		}
		h.rec.Cells = append(h.rec.Cells, contract.AuditCell{Cell: sc.cell, Result: res})
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		if sc, ok := h.scheduled[e.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()]; ok {
			h.lost[sc.activityID] = sc.cell
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		h.lateResult(e.GetWorkflowExecutionSignaledEventAttributes())
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		h.rec.Closed = at
	}
	return nil
}

// marker reads the session's check from the first local activity that recorded one.
func (h *sessionHistory) marker(a *historypb.MarkerRecordedEventAttributes) {
	if a.GetMarkerName() != localActivityMarker || h.rec.Session != nil {
		return
	}
	var cr contract.SessionCheckResult
	if err := h.dc.FromPayloads(a.GetDetails()["result"], &cr); err != nil || cr.Session.Digest == "" {
		return
	}
	h.rec.Session, h.rec.StatementVersion, h.hosts = &cr.Session, cr.StatementVersion, cr.Hosts
	h.rec.ReviewerKeys, h.rec.HostKeys = cr.Reviewers.Keys(), cr.Hosts.Keys()
}

// lateResult takes a late result signal as the result of the lost cell it is of: the first whose
// receipt verifies against the hosts the check recorded, for this session's run, that cell's
// index and the timed-out activity, and signs the result it comes with, as the workflow takes
// it. Anything else (another signal, a forgery, one for no lost cell) is skipped; what the cell
// chain then requires is checked as for every cell (verifySession).
func (h *sessionHistory) lateResult(a *historypb.WorkflowExecutionSignaledEventAttributes) {
	var lr contract.LateResult
	if a.GetSignalName() != contract.SignalLateResult || h.hosts == nil || h.dc.FromPayloads(a.GetInput(), &lr) != nil {
		return
	}
	st, err := receipt.Verify(h.hosts, lr.Result.Receipt)
	if err != nil || st.Cell == nil || st.WorkflowID != h.rec.WorkflowID || st.RunID != h.rec.RunID {
		return
	}
	cell, ok := h.lost[st.ActivityID]
	if !ok || cell.Index != st.Cell.Index || receipt.CheckResult(st, lr.Result) != nil {
		return
	}
	delete(h.lost, st.ActivityID)
	h.rec.Cells = append(h.rec.Cells, contract.AuditCell{Cell: cell, Result: lr.Result})
}
