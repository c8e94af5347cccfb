package client

import (
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// streamRecords turns the history of run runID of workflowID (all its events so far, in order)
// into its audit stream records, each with its key (streamKey) but no cursor yet. A record's time
// is its event's, never earlier than an event before it (a signal that arrived during a workflow
// task is written after that task's events, with the earlier time of its arrival).
func streamRecords(dc converter.DataConverter, workflowID, runID string, events []*historypb.HistoryEvent) ([]keyedRecord, error) {
	if len(events) == 0 {
		return nil, nil
	}
	if events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName() == contract.SessionWorkflowName {
		return sessionStreamRecords(dc, workflowID, runID, events)
	}
	h := newRunHistory(dc, workflowID)
	h.rec.RunID = runID
	s := &streamer{workflowID: workflowID, runID: runID, subject: contract.SubjectRun}
	for _, e := range events {
		checked, decisions, claims := h.check != nil, len(h.decisions), len(h.rec.Claims)
		if err := h.read(e); err != nil {
			return nil, err
		}
		s.at(e)
		if a := e.GetActivityTaskFailedEventAttributes(); a != nil && h.activityIDs[a.GetScheduledEventId()] {
			s.hostFailed = failureType(a.GetFailure())
		}
		if h.rec.Request.Metadata.Agent != "" {
			s.agent = h.rec.Request.Metadata.Agent
		}
		if !checked && h.check != nil {
			b := runCheckBody(h)
			b.PolicyHash = policyHash(dc, e)
			s.add(contract.StreamCheck, nil, func(r *contract.AuditStreamRecord) { r.Check = b })
		}
		if len(h.decisions) > decisions {
			s.runDecisions(h, decisions)
		}
		for _, cl := range h.rec.Claims[claims:] {
			s.add(contract.StreamClaim, nil, func(r *contract.AuditStreamRecord) { r.Claim = &cl })
		}
		if !h.rec.Closed.IsZero() {
			s.runEnd(h, e)
		}
	}
	return s.out, nil
}

// newRunHistory is the reader of a RunCode run's history that Audit and the stream share.
func newRunHistory(dc converter.DataConverter, workflowID string) *runHistory {
	return &runHistory{dc: dc, activityIDs: map[int64]bool{}, times: runTimes{scheduled: map[int64]time.Time{}, taken: map[int64]time.Time{}},
		rec: contract.AuditRecord{Audit: contract.AuditVersion, WorkflowID: workflowID, Decisions: []contract.AuditDecision{}, Claims: []contract.SandboxClaim{}}}
}

// streamer gathers one run's records.
type streamer struct {
	workflowID, runID, subject, agent string
	// t is the current event's record time (never earlier than an event before it); id its id;
	// seq counts the records of this event.
	t   time.Time
	id  int64
	seq int
	out []keyedRecord
	// hostFailed is the type of the last failure of a run's sandbox activity.
	hostFailed string
}

// at moves to event e.
func (s *streamer) at(e *historypb.HistoryEvent) {
	if t := e.GetEventTime().AsTime(); t.After(s.t) {
		s.t = t
	}
	s.id, s.seq = e.GetEventId(), 0
}

// add appends a record of kind for the current event (cell: a session's cell index, or nil).
func (s *streamer) add(kind string, cell *int, fill func(*contract.AuditStreamRecord)) {
	r := contract.AuditStreamRecord{SchemaVersion: contract.AuditStreamVersion, Kind: kind, Time: s.t, Subject: s.subject,
		WorkflowID: s.workflowID, RunID: s.runID, EventID: s.id, Agent: s.agent, Cell: cell}
	if cell != nil {
		r.Subject = contract.SubjectCell
	}
	fill(&r)
	s.out = append(s.out, keyedRecord{key: streamKey{Time: s.t, WorkflowID: s.workflowID, RunID: s.runID, EventID: s.id, Seq: s.seq}, rec: r})
	s.seq++
}

// runCheckBody is what a run's check recorded.
func runCheckBody(h *runHistory) *contract.StreamCheckBody {
	cr := h.check
	b := &contract.StreamCheckBody{Digest: cr.Checked.Digest, Language: cr.Checked.Language, Quorum: max(cr.Quorum, 1),
		SandboxTaskQueue: h.in.SandboxTaskQueue, ReviewerKeys: cr.Reviewers.Len(), HostKeys: len(cr.Hosts.Keys())}
	if b.SandboxTaskQueue == "" {
		b.SandboxTaskQueue = cr.Run.TaskQueue
	}
	if b.SandboxTaskQueue == "" {
		b.SandboxTaskQueue = h.workflowTQ
	}
	for _, w := range cr.Warnings {
		b.Warnings = append(b.Warnings, w.File+": "+w.Reason)
	}
	return b
}

// runDecisions adds a record for each decision from index from on, judged as the workflow judges
// it (against the reviewers the check recorded); a decision before any check is not judged.
func (s *streamer) runDecisions(h *runHistory, from int) {
	judged := h.decisions
	if h.check != nil {
		if rec, err := h.record(); err == nil {
			judged = rec.Decisions
		}
	}
	for _, d := range judged[from:] {
		b := &contract.StreamDecisionBody{Via: d.Via, ApprovalID: d.Decision.ApprovalID, Approve: d.Decision.Approve, Reviewer: d.Decision.Reviewer,
			Reason: d.Decision.Reason, Digest: d.Decision.Digest, Judged: h.check != nil, Accepted: d.Accepted, Refused: d.Refused, Fingerprint: d.Fingerprint}
		if b.Reviewer == "" && d.Statement != "" {
			if st, err := approval.ParseStatement([]byte(d.Statement)); err == nil {
				b.Reviewer = st.Reviewer
			}
		}
		s.add(contract.StreamDecision, nil, func(r *contract.AuditStreamRecord) { r.Decision = b })
		if b.Judged && b.Refused != "" && b.Refused != ignoredDecision {
			s.add(contract.StreamRefusal, nil, func(r *contract.AuditStreamRecord) {
				r.Refusal = &contract.StreamRefusalBody{Stage: "decision", Type: guard.TypeApprovalRefused, Message: "decision " + b.ApprovalID + ": " + b.Refused}
			})
		}
	}
}

// runEnd adds the records of a run's close event e: its refusal, if a refusal ended it, and its
// end, with the whole audit record.
func (s *streamer) runEnd(h *runHistory, e *historypb.HistoryEvent) {
	rec, err := h.record()
	end := &contract.StreamEndBody{Result: h.rec.Result, Error: h.rec.Error}
	if err == nil {
		end.Record = &rec
	}
	switch {
	case h.rec.Result != nil:
		end.Outcome = h.rec.Result.Outcome.String()
	default:
		end.Outcome = "error"
	}
	if end.Error == nil && h.rec.Result == nil {
		end.Error = &contract.AuditError{Type: e.GetEventType().String(), Message: "the run ended without a result"}
	}
	if ref := refusalOf(e, h.check != nil, s.hostFailed); ref != nil {
		s.add(contract.StreamRefusal, nil, func(r *contract.AuditStreamRecord) { r.Refusal = ref })
	}
	s.add(contract.StreamEnd, nil, func(r *contract.AuditStreamRecord) { r.End = end })
}

// sessionQuorum is the quorum a session's check (the marker event e) recorded for each cell: one
// when it recorded none.
func sessionQuorum(dc converter.DataConverter, e *historypb.HistoryEvent) int {
	var cr contract.SessionCheckResult
	_ = dc.FromPayloads(e.GetMarkerRecordedEventAttributes().GetDetails()["result"], &cr)
	return max(cr.Quorum, 1)
}

// policyHash is the policy hash the check's record (the marker event e) holds under
// rules.policy_hash, or "" (a worker without a policy file, a history from before policies).
func policyHash(dc converter.DataConverter, e *historypb.HistoryEvent) string {
	var probe struct {
		Rules *struct {
			PolicyHash string `json:"policy_hash"`
		} `json:"rules"`
	}
	if dc.FromPayloads(e.GetMarkerRecordedEventAttributes().GetDetails()["result"], &probe) != nil || probe.Rules == nil {
		return ""
	}
	return probe.Rules.PolicyHash
}

// refusalOf is the refusal that the close event e records, or nil: a failure before any check was
// recorded is the check's (or the policy's) refusal; after it, a failure of the type the sandbox
// activity last failed with (hostFailed) is the sandbox host's (its verification of the approval,
// its own rules), and otherwise a refused receipt or approval, or any other typed failure but an
// infrastructure failure, a denial and a cancel.
func refusalOf(e *historypb.HistoryEvent, checked bool, hostFailed string) *contract.StreamRefusalBody {
	f := e.GetWorkflowExecutionFailedEventAttributes().GetFailure()
	if f == nil {
		return nil
	}
	typ := failureType(f)
	stage := ""
	switch {
	case !checked:
		stage = "check"
	case typ == guard.TypeIntegrationError || typ == guard.TypeApprovalDenied || typ == guard.TypeCancelled || typ == "":
		return nil // an infrastructure failure, a reviewer's denial, a cancel: the end says so
	case typ == hostFailed:
		stage = "sandbox"
	case typ == guard.TypeReceiptRefused:
		stage = "receipt"
	case typ == guard.TypeApprovalRefused || typ == contract.DecisionRejectedType:
		stage = "approval"
	default:
		stage = "sandbox"
	}
	return &contract.StreamRefusalBody{Stage: stage, Type: typ, Message: f.GetMessage()}
}

// failureType is the application failure type of f or of the first cause that has one.
func failureType(f *failurepb.Failure) string {
	for c := f; c != nil; c = c.GetCause() {
		if typ := c.GetApplicationFailureInfo().GetType(); typ != "" {
			return typ
		}
	}
	return ""
}

// sessionStreamRecords is streamRecords for a Session: its check, each cell's decisions, claims
// and end, its refusal and its end with its whole record.
func sessionStreamRecords(dc converter.DataConverter, workflowID, runID string, events []*historypb.HistoryEvent) ([]keyedRecord, error) {
	h := &sessionHistory{dc: dc, scheduled: map[int64]scheduledCell{}, lost: map[string]guard.Cell{},
		rec: contract.AuditRecord{Audit: contract.AuditVersion, WorkflowID: workflowID, RunID: runID, Decisions: []contract.AuditDecision{}, Claims: []contract.SandboxClaim{}, Cells: []contract.AuditCell{}}}
	s := &streamer{workflowID: workflowID, runID: runID, subject: contract.SubjectSession}
	for _, e := range events {
		checked, cells := h.rec.Session != nil, len(h.rec.Cells)
		if err := h.read(e); err != nil {
			return nil, err
		}
		s.at(e)
		if !checked && h.rec.Session != nil {
			s.agent = h.rec.Session.Metadata.Agent
			cs := h.rec.Session
			s.add(contract.StreamCheck, nil, func(r *contract.AuditStreamRecord) {
				r.Check = &contract.StreamCheckBody{Digest: cs.Digest, Quorum: sessionQuorum(dc, e), ReviewerKeys: len(h.rec.ReviewerKeys), HostKeys: len(h.rec.HostKeys),
					PolicyHash: policyHash(dc, e)}
			})
		}
		s.sessionEvent(dc, e)
		for _, c := range h.rec.Cells[cells:] {
			s.add(contract.StreamEnd, &c.Cell.Index, func(r *contract.AuditStreamRecord) {
				r.End = &contract.StreamEndBody{Outcome: c.Result.Outcome.String(), Result: &c.Result}
			})
		}
		if !h.rec.Closed.IsZero() {
			if ref := refusalOf(e, checked, ""); ref != nil {
				s.add(contract.StreamRefusal, nil, func(r *contract.AuditStreamRecord) { r.Refusal = ref })
			}
			rec := h.rec
			s.add(contract.StreamEnd, nil, func(r *contract.AuditStreamRecord) {
				r.End = &contract.StreamEndBody{Outcome: "closed", Record: &rec}
			})
		}
	}
	return s.out, nil
}

// sessionEvent adds the record of a cell's decision or claim that e carries.
func (s *streamer) sessionEvent(dc converter.DataConverter, e *historypb.HistoryEvent) {
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		req := e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest()
		var cd contract.CellDecision
		if req.GetInput().GetName() != contract.UpdateDecideCell || dc.FromPayloads(req.GetInput().GetArgs(), &cd) != nil {
			return
		}
		d := cd.Decision
		s.add(contract.StreamDecision, &cd.Cell, func(r *contract.AuditStreamRecord) {
			r.Decision = &contract.StreamDecisionBody{Via: contract.ViaUpdate, ApprovalID: d.ApprovalID, Approve: d.Approve, Reviewer: d.Reviewer, Reason: d.Reason, Digest: d.Digest}
		})
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		a := e.GetWorkflowExecutionSignaledEventAttributes()
		var cl contract.SandboxClaim
		if a.GetSignalName() != contract.SignalSandboxClaim || dc.FromPayloads(a.GetInput(), &cl) != nil {
			return
		}
		s.add(contract.StreamClaim, &cl.Cell, func(r *contract.AuditStreamRecord) { r.Claim = &cl })
	}
}

// streamKey orders audit stream records: by time, then run, then event and place in the event.
// A cursor is the key of the last record a follower emitted.
type streamKey struct {
	Time              time.Time
	WorkflowID, RunID string
	EventID           int64
	Seq               int
}

// keyedRecord is a record with its key.
type keyedRecord struct {
	key streamKey
	rec contract.AuditStreamRecord
}

// compare is -1, 0 or 1 as k is before, the same as or after o.
func (k streamKey) compare(o streamKey) int {
	switch {
	case !k.Time.Equal(o.Time):
		return k.Time.Compare(o.Time)
	case k.WorkflowID != o.WorkflowID:
		return cmpString(k.WorkflowID, o.WorkflowID)
	case k.RunID != o.RunID:
		return cmpString(k.RunID, o.RunID)
	case k.EventID != o.EventID:
		return cmpInt(k.EventID, o.EventID)
	}
	return cmpInt(k.Seq, o.Seq)
}

func cmpString(a, b string) int {
	if a < b {
		return -1
	}
	return 1
}

func cmpInt[T int | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// errBadCursor says a cursor is not one a follower wrote.
var errBadCursor = fmt.Errorf("not a cursor of %s", contract.AuditStreamVersion)
