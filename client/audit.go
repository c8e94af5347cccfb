package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// localActivityMarker is the marker name the Go SDK records a local activity's result under.
const localActivityMarker = "LocalActivity"

// Audit reads a RunCode run's whole record from its history alone (runID empty: the latest run):
// the request, the check's record, every decision judged as the workflow judged it (against the
// reviewer keys the check recorded, at the time of its event), the claims, the receipt and the
// result. It trusts nothing the status query says.
func (c *Client) Audit(ctx context.Context, workflowID, runID string) (contract.AuditRecord, error) {
	return c.audit(ctx, workflowID, runID, false)
}

// audit is Audit; receiptless leaves a run's result and receipt out of the record (they are
// not decoded: a result in hand is checked against the record's check and decisions, and the
// 100 KB chart it may carry is not decoded again from the history).
func (c *Client) audit(ctx context.Context, workflowID, runID string, receiptless bool) (contract.AuditRecord, error) {
	h, session, err := c.readRun(ctx, workflowID, runID, receiptless)
	switch {
	case err != nil:
		return h.rec, err
	case session:
		return c.auditSession(ctx, h.rec, h.rec.RunID)
	}
	return h.record()
}

// readRun reads the history of run runID of workflowID (empty: the latest run) into a
// runHistory. session says the history is a Session's, which readRun leaves unread.
func (c *Client) readRun(ctx context.Context, workflowID, runID string, receiptless bool) (h *runHistory, session bool, err error) {
	h = newRunHistory(c.dc, workflowID)
	h.receiptless = receiptless
	if runID == "" {
		d, err := c.tc.DescribeWorkflowExecution(ctx, workflowID, "")
		if err != nil {
			return h, false, fmt.Errorf("client: audit: describe %s: %w", workflowID, err)
		}
		runID = d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	h.rec.RunID = runID
	iter := c.tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			return h, false, fmt.Errorf("client: audit: history of %s: %w", workflowID, err)
		}
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED &&
			e.GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName() == contract.SessionWorkflowName {
			return h, true, nil
		}
		if err := h.read(e); err != nil {
			return h, false, err
		}
	}
	return h, false, nil
}

// runHistory is what Audit gathers from a RunCode run's history, one event at a time.
type runHistory struct {
	dc          converter.DataConverter
	rec         contract.AuditRecord
	in          contract.Input
	check       *contract.CheckResult
	workflowTQ  string
	activityIDs map[int64]bool // the sandbox activities' scheduled events
	decisions   []contract.AuditDecision
	edits       auditEdits
	times       runTimes
	receiptless bool // the result and receipt are left out (audit)
	// closeResult is the workflow's result, as its completion recorded it (endedResult).
	closeResult *commonpb.Payloads
}

// read takes what the record needs from one event of the history.
func (h *runHistory) read(e *historypb.HistoryEvent) error {
	at := e.GetEventTime().AsTime()
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		return h.started(e.GetWorkflowExecutionStartedEventAttributes(), at)
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		checked := h.check != nil
		h.marker(e.GetMarkerRecordedEventAttributes())
		if !checked && h.check != nil {
			h.times.checked = at
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
		a := e.GetWorkflowExecutionUpdateCompletedEventAttributes()
		if a.GetOutcome().GetSuccess() != nil {
			h.edits.completed(a.GetMeta().GetUpdateId())
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		h.signaled(e.GetWorkflowExecutionSignaledEventAttributes(), at)
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		h.updateAccepted(e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest(), at)
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		a := e.GetActivityTaskScheduledEventAttributes()
		if a.GetActivityType().GetName() == contract.RunActivityName {
			h.activityIDs[e.GetEventId()] = true
			h.times.scheduled[e.GetEventId()] = at
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		if id := e.GetActivityTaskStartedEventAttributes().GetScheduledEventId(); h.activityIDs[id] {
			h.times.taken[id] = at
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		h.times.ended(h.activityIDs, e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), at)
		return h.activityCompleted(e.GetActivityTaskCompletedEventAttributes())
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		h.times.ended(h.activityIDs, e.GetActivityTaskFailedEventAttributes().GetScheduledEventId(), at)
		h.activityFailed(e.GetActivityTaskFailedEventAttributes())
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		h.rec.Closed = at
		return h.completed(e.GetWorkflowExecutionCompletedEventAttributes())
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		h.rec.Closed = at
		f := e.GetWorkflowExecutionFailedEventAttributes().GetFailure()
		h.rec.Error = &contract.AuditError{Type: f.GetApplicationFailureInfo().GetType(), Message: f.GetMessage()}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		h.rec.Closed = at
		h.rec.Error = &contract.AuditError{Type: e.GetEventType().String(), Message: "the run ended without a result"}
	}
	return nil
}

// started reads the run's request from its first event, and refuses a workflow that is not RunCode.
func (h *runHistory) started(a *historypb.WorkflowExecutionStartedEventAttributes, at time.Time) error {
	if typ := a.GetWorkflowType().GetName(); typ != contract.WorkflowName {
		return &contract.WorkflowTypeError{WorkflowID: h.rec.WorkflowID, Type: typ, Want: contract.WorkflowName}
	}
	h.rec.Started, h.workflowTQ = at, a.GetTaskQueue().GetName()
	if err := h.dc.FromPayloads(a.GetInput(), &h.in); err != nil {
		return fmt.Errorf("client: audit: decode the input of %s: %w", h.rec.WorkflowID, err)
	}
	h.rec.Request = h.in.Request
	return nil
}

// marker reads the check's result from the first local activity that recorded one; later local
// activities are the checks of edits.
func (h *runHistory) marker(a *historypb.MarkerRecordedEventAttributes) {
	if a.GetMarkerName() != localActivityMarker {
		return
	}
	if h.check != nil {
		h.edits.check(h.dc, a.GetDetails()["result"])
		return
	}
	var cr contract.CheckResult
	if err := h.dc.FromPayloads(a.GetDetails()["result"], &cr); err != nil || cr.Checked.Digest == "" {
		return
	}
	h.check = &cr
}

// signaled reads a decision or a sandbox claim sent as a signal.
func (h *runHistory) signaled(a *historypb.WorkflowExecutionSignaledEventAttributes, at time.Time) {
	switch a.GetSignalName() {
	case contract.SignalApproval:
		var d contract.Decision
		if err := h.dc.FromPayloads(a.GetInput(), &d); err != nil {
			h.decisions = append(h.decisions, contract.AuditDecision{Via: contract.ViaSignal, Time: at, Refused: "unreadable: " + err.Error()})
			return
		}
		h.decisions = append(h.decisions, contract.AuditDecision{Via: contract.ViaSignal, Time: at, Decision: d})
	case contract.SignalSandboxClaim:
		var cl contract.SandboxClaim
		if err := h.dc.FromPayloads(a.GetInput(), &cl); err == nil {
			h.rec.Claims = append(h.rec.Claims, cl)
		}
	}
}

// updateAccepted reads a decision sent as the decide update.
func (h *runHistory) updateAccepted(req *updatepb.Request, at time.Time) {
	if req.GetInput().GetName() != contract.UpdateDecide {
		return
	}
	var d contract.Decision
	if err := h.dc.FromPayloads(req.GetInput().GetArgs(), &d); err != nil {
		return
	}
	h.decisions = append(h.decisions, contract.AuditDecision{Via: contract.ViaUpdate, Time: at, Decision: d})
	h.edits.accepted(req.GetMeta().GetUpdateId(), d)
}

// activityCompleted reads the result (and its receipt) of a sandbox activity.
func (h *runHistory) activityCompleted(a *historypb.ActivityTaskCompletedEventAttributes) error {
	if !h.activityIDs[a.GetScheduledEventId()] || h.receiptless {
		return nil
	}
	var res guard.Result
	if err := h.dc.FromPayloads(a.GetResult(), &res); err != nil {
		return fmt.Errorf("client: audit: decode the sandbox result of %s: %w", h.rec.WorkflowID, err)
	}
	h.rec.Result, h.rec.Receipt = &res, res.Receipt
	return nil
}

// completed reads the result of a run that took a late result (guard.Result.Recovered): no
// sandbox activity completed with it, the workflow's own result carries it. Its receipt is
// verified as any result's.
func (h *runHistory) completed(a *historypb.WorkflowExecutionCompletedEventAttributes) error {
	h.closeResult = a.GetResult()
	if h.rec.Result != nil || a.GetResult() == nil || h.receiptless {
		return nil
	}
	var res guard.Result
	if err := h.dc.FromPayloads(a.GetResult(), &res); err != nil {
		return fmt.Errorf("client: audit: decode the result of %s: %w", h.rec.WorkflowID, err)
	}
	if res.Recovered != nil {
		h.rec.Result, h.rec.Receipt = &res, res.Receipt
	}
	return nil
}

// activityFailed reads the receipt a sandbox activity that failed after its code may have
// started carries in the failure's details.
func (h *runHistory) activityFailed(a *historypb.ActivityTaskFailedEventAttributes) {
	var d contract.ErrorDetails
	if h.activityIDs[a.GetScheduledEventId()] && a.GetFailure().GetApplicationFailureInfo().GetDetails() != nil &&
		h.dc.FromPayloads(a.GetFailure().GetApplicationFailureInfo().GetDetails(), &d) == nil && d.Receipt != nil {
		h.rec.Receipt = d.Receipt
	}
}

// record completes the record once the whole history is read: what was checked and run, the
// sandbox task queue, the keys the check recorded, and each decision judged.
func (h *runHistory) record() (contract.AuditRecord, error) {
	rec, check := h.rec, h.check
	if check == nil {
		return rec, fmt.Errorf("client: audit: the history of %s %w", rec.WorkflowID, errNoCheck)
	}
	rec.Checked, rec.StatementVersion = h.edits.ran(check.Checked), max(check.StatementVersion, approval.StatementVersion1)
	rec.Rules = check.Rules
	rec.SandboxTaskQueue = h.in.SandboxTaskQueue
	if rec.SandboxTaskQueue == "" {
		rec.SandboxTaskQueue = check.Run.TaskQueue
	}
	if rec.SandboxTaskQueue == "" {
		rec.SandboxTaskQueue = h.workflowTQ
	}
	rec.ReviewerKeys, rec.HostKeys = check.Reviewers.Keys(), check.Hosts.Keys()
	if rec.ReviewerKeys == nil {
		rec.ReviewerKeys = []approval.Key{}
	}
	if rec.HostKeys == nil {
		rec.HostKeys = []approval.Key{}
	}
	rec.Decisions = judge(rec, check.Reviewers, h.decisions)
	rec.Phases = h.times.phases(rec.Started, rec.Closed, &rec)
	return rec, nil
}

// judge says of each decision what statement it had to sign and whether it was the one accepted:
// the first that verifies against reviewers at its event's time.
func judge(rec contract.AuditRecord, reviewers *approval.Reviewers, ds []contract.AuditDecision) []contract.AuditDecision {
	out := []contract.AuditDecision{}
	accepted := false
	for _, d := range ds {
		if d.Refused != "" {
			out = append(out, d)
			continue
		}
		want := statementFields(rec, d.Decision)
		if stmt, err := want.Statement(); err == nil {
			d.Statement = string(stmt)
		}
		v, err := approval.Verify(reviewers, want, d.Decision.Proof(), d.Time)
		switch {
		case err == nil && accepted:
			d.Refused = ignoredDecision
		case err != nil:
			d.Refused = err.Error()
		default:
			d.Accepted, d.Fingerprint, accepted = true, v.Fingerprint, true
		}
		out = append(out, d)
	}
	return out
}

// ignoredDecision is the refusal of a valid decision that came after the accepted one.
const ignoredDecision = "ignored: a decision was accepted before it"

// statementFields is the statement d had to sign for the run rec records.
func statementFields(rec contract.AuditRecord, d contract.Decision) approval.Fields {
	f := d.Fields(rec.WorkflowID, rec.RunID, rec.Checked.Digest, rec.SandboxTaskQueue)
	f.Version = rec.StatementVersion
	if f.Expires.IsZero() && d.Statement != "" {
		if got, err := approval.ParseStatement([]byte(d.Statement)); err == nil {
			f.Expires = got.Expires
			if f.Reviewer == "" {
				f.Reviewer = got.Reviewer
			}
		}
	}
	return f
}

// AuditCheck is one check of VerifyAudit.
type AuditCheck struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// AuditVerdict is what VerifyAudit found.
type AuditVerdict struct {
	OK     bool         `json:"ok"`
	Checks []AuditCheck `json:"checks"`
}

// add records a check named name, failed with err's message when err is not nil.
func (v *AuditVerdict) add(name string, err error) {
	c := AuditCheck{Name: name, OK: err == nil}
	if err != nil {
		c.Error = err.Error()
	}
	v.Checks = append(v.Checks, c)
}

// VerifyAudit checks an audit record offline, against the given reviewers and hosts (the
// verifier's own files, never the keys the record names): the digest recomputed from the checked
// request, which must be the request that was started; the accepted approval's signature; the
// receipt's signature and that it is this run's; and the result against the receipt's hashes.
// Every check is reported, and a failure says what failed.
func VerifyAudit(rec contract.AuditRecord, reviewers *approval.Reviewers, hosts *receipt.Hosts) AuditVerdict {
	var v AuditVerdict
	add := v.add
	if rec.Audit != contract.AuditVersion {
		add("version", fmt.Errorf("audit %q; want %q", rec.Audit, contract.AuditVersion))
	}
	if rec.Session != nil {
		verifySession(rec, hosts, add)
		v.OK = !slices.ContainsFunc(v.Checks, func(c AuditCheck) bool { return !c.OK })
		return v
	}
	accepted := acceptedDecision(rec)
	verifyRequest(rec, accepted, add)
	verified, approvalErr := verifyApproval(rec, reviewers, accepted)
	add("approval", approvalErr)
	if rec.Result == nil {
		verifyNoResult(rec, hosts, add)
	} else {
		verifyResultReceipt(rec, reviewers, hosts, accepted, verified, add)
	}
	v.OK = !slices.ContainsFunc(v.Checks, func(c AuditCheck) bool { return !c.OK })
	return v
}

// verifyRequest checks that the record's checked request is the request started (or its
// accepted edit) and that its digest is the one recomputed from it.
func verifyRequest(rec contract.AuditRecord, accepted *contract.AuditDecision, add func(string, error)) {
	if accepted != nil && accepted.Decision.Edit != nil {
		add("request", editedRequest(rec, *accepted.Decision.Edit))
	} else {
		add("request", sameRequest(rec.Request, rec.Checked))
	}
	var digestErr error
	if got := guard.Digest(&rec.Checked); got != rec.Checked.Digest {
		digestErr = fmt.Errorf("the checked request's digest is %s; the record says %s", got, rec.Checked.Digest)
	}
	add("digest", digestErr)
}

// acceptedDecision is the record's accepted decision, or nil.
func acceptedDecision(rec contract.AuditRecord) *contract.AuditDecision {
	for i := range rec.Decisions {
		if rec.Decisions[i].Accepted {
			return &rec.Decisions[i]
		}
	}
	return nil
}

// verifyApproval checks that the accepted decision approves the run, that its recorded statement
// is the one its fields make for this run, and that its signature verifies against reviewers.
func verifyApproval(rec contract.AuditRecord, reviewers *approval.Reviewers, accepted *contract.AuditDecision) (approval.Verified, error) {
	switch {
	case accepted == nil:
		return approval.Verified{}, errors.New("no decision was accepted")
	case !accepted.Decision.Approve:
		return approval.Verified{}, errors.New("the accepted decision denies the run")
	}
	want := statementFields(rec, accepted.Decision)
	if stmt, err := want.Statement(); err != nil || string(stmt) != accepted.Statement {
		return approval.Verified{}, fmt.Errorf("the statement recorded for approval %s is not the one its fields make for this run", accepted.Decision.ApprovalID)
	}
	verified, err := approval.Verify(reviewers, want, accepted.Decision.Proof(), accepted.Time)
	if err != nil {
		return verified, fmt.Errorf("approval %s: %w", accepted.Decision.ApprovalID, err)
	}
	return verified, nil
}

// verifyNoResult checks a run that failed after its code may have started: its receipt says
// so, and nothing the record holds is a result.
func verifyNoResult(rec contract.AuditRecord, hosts *receipt.Hosts, add func(string, error)) {
	if rec.Receipt == nil {
		add("receipt", errors.New("the record holds no result and no receipt"))
		return
	}
	st, err := receipt.Verify(hosts, rec.Receipt)
	if err != nil {
		add("receipt", err)
		return
	}
	add("receipt run", receipt.CheckRun(st, receipt.Expect{WorkflowID: rec.WorkflowID, RunID: rec.RunID, Digest: rec.Checked.Digest}))
	if st.Outcome != receipt.OutcomeError {
		add("result", fmt.Errorf("the receipt signs outcome %s but the record holds no result", st.Outcome))
	}
}

// verifyResultReceipt checks the result's receipt: its signature, that it is this run's with
// the accepted approval, the approvals it signs, and the result against its hashes.
func verifyResultReceipt(rec contract.AuditRecord, reviewers *approval.Reviewers, hosts *receipt.Hosts,
	accepted *contract.AuditDecision, verified approval.Verified, add func(string, error)) {
	if !sameReceipt(rec.Receipt, rec.Result.Receipt) {
		add("receipt", errors.New("the record's receipt is not the result's"))
	}
	st, err := receipt.Verify(hosts, rec.Result.Receipt)
	add("receipt", err)
	if err != nil {
		return
	}
	want := receipt.Expect{WorkflowID: rec.WorkflowID, RunID: rec.RunID, Digest: rec.Checked.Digest}
	if accepted != nil {
		want.Approvals = []receipt.Approval{{ID: accepted.Decision.ApprovalID, Fingerprint: verified.Fingerprint}}
	}
	add("receipt run", receipt.CheckRun(st, want))
	add("approvals", receiptApprovalsSigned(rec, reviewers, st))
	add("result", receipt.CheckResult(st, *rec.Result))
}

func sameReceipt(a, b *guard.Receipt) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// sameRequest checks that checked is what req asks to run: language, code, input files and env.
func sameRequest(req guard.Request, c guard.Checked) error {
	lang := req.Language
	if lang == "" {
		lang = guard.Python
	}
	switch {
	case lang != c.Language:
		return fmt.Errorf("the request's language %q is not the checked %q", lang, c.Language)
	case req.Code != c.Code:
		return errors.New("the request's code is not the checked code")
	case len(req.Files) != len(c.Files):
		return fmt.Errorf("the request has %d input files; the checked request %d", len(req.Files), len(c.Files))
	case len(req.Env) != len(c.Env):
		return fmt.Errorf("the request has %d env vars; the checked request %d", len(req.Env), len(c.Env))
	}
	for _, f := range c.Files {
		if b, ok := req.Files[f.Name]; !ok || string(b) != string(f.Content) {
			return fmt.Errorf("input file %q differs between the request and the checked request", f.Name)
		}
	}
	for _, e := range c.Env {
		if v, ok := req.Env[e.Name]; !ok || v != e.Value {
			return fmt.Errorf("env var %q differs between the request and the checked request", e.Name)
		}
	}
	if contract.ShownPackages(c.Packages, req.Packages) != nil {
		return errors.New("the request's packages are not the checked request's")
	}
	return nil
}

// AuditSince calls f with the record of every RunCode run and every Session that closed after
// since (a session's record holds its cells, as Audit's), in the order visibility lists them,
// and returns the number it gave.
func (c *Client) AuditSince(ctx context.Context, since time.Time, f func(contract.AuditRecord) error) (int, error) {
	query := fmt.Sprintf("WorkflowType IN ('%s', '%s') AND ExecutionStatus != 'Running' AND CloseTime > '%s'",
		contract.WorkflowName, contract.SessionWorkflowName, since.UTC().Format(time.RFC3339Nano))
	var token []byte
	n := 0
	for {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return n, fmt.Errorf("client: audit since %s: list runs: %w", since.Format(time.RFC3339), err)
		}
		for _, ex := range resp.GetExecutions() {
			rec, err := c.Audit(ctx, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId())
			if err != nil {
				return n, err
			}
			if err := f(rec); err != nil {
				return n, err
			}
			n++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return n, nil
		}
	}
}

// VerifyResult checks res, the result of the run workflowID, against its receipt as the workflow
// does, from the run's history: the receipt must verify against hosts (nil: the hosts the run's
// check recorded; a run whose check recorded none and no hosts given is not checked) and be this
// run's (its digest, its accepted approval and the reviewer's key), and res must be what it
// signs. A refusal is a *guard.ReceiptRefused.
func (c *Client) VerifyResult(ctx context.Context, workflowID string, res guard.Result, hosts *receipt.Hosts) error {
	return c.verifyResultOf(ctx, workflowID, "", res, hosts)
}

// errNoCheck says a workflow's history records no check by sandboxflow's workflow: whatever its
// type name, no sandboxflow worker ran it, and nothing it answers is a result.
var errNoCheck = errors.New("records no check")

// refusedUnchecked is the refusal of a result from a workflow whose history records no check.
func refusedUnchecked(workflowID string, err error) error {
	return &guard.ReceiptRefused{Field: "receipt", Msg: fmt.Sprintf("%s's history records no check: no sandboxflow worker checked it, so no result of it counts", workflowID), Err: err}
}

// verifyResultOf is VerifyResult for run runID of workflowID (empty: its current run).
func (c *Client) verifyResultOf(ctx context.Context, workflowID, runID string, res guard.Result, hosts *receipt.Hosts) error {
	rec, err := c.audit(ctx, workflowID, runID, true)
	return verifyAgainst(rec, err, workflowID, res, hosts)
}

// verifyAgainst is verifyResultOf once the run's record is read (rec, err: a receiptless
// audit's).
func verifyAgainst(rec contract.AuditRecord, err error, workflowID string, res guard.Result, hosts *receipt.Hosts) error {
	rec, hosts, err = hostsFor(rec, err, workflowID, hosts)
	if err != nil || hosts == nil {
		return err
	}
	st, err := receipt.Verify(hosts, res.Receipt)
	if err != nil {
		return err
	}
	if err := receipt.CheckRun(st, receipt.Expect{WorkflowID: rec.WorkflowID, RunID: rec.RunID, Digest: rec.Checked.Digest}); err != nil {
		return err
	}
	if err := approvalsSent(st, rec.Decisions); err != nil {
		return err
	}
	return receipt.CheckResult(st, res)
}

// approvalsSent refuses a receipt that names no approval, or one that no decision in the run's
// history carries: the host ran the code on approvals sent to this run. Which of them counted
// (a quorum, an edit that voids the approvals before it) the workflow decided and the host
// checked again; the host's signature vouches for the keys.
func approvalsSent(st receipt.Statement, decisions []contract.AuditDecision) error {
	if len(st.Approvals) == 0 {
		return &guard.ReceiptRefused{Field: "approvals", Msg: "the receipt names no approval"}
	}
	for _, a := range st.Approvals {
		if !slices.ContainsFunc(decisions, func(d contract.AuditDecision) bool { return d.Decision.ApprovalID == a.ID }) {
			return &guard.ReceiptRefused{Field: "approvals", Msg: fmt.Sprintf("the receipt names approval %s, which no decision in the run's history carries", a.ID)}
		}
	}
	return nil
}

// auditForHosts reads the record of run runID of workflowID (empty: its current run), a run or a
// session, and the hosts its receipts verify against: hosts, or when nil the hosts its check
// recorded. The hosts are nil, and nothing is to be checked, when neither names any. A run's
// record has no result or receipt (the caller checks one in hand); a session's has its cells'.
func (c *Client) auditForHosts(ctx context.Context, workflowID, runID string, hosts *receipt.Hosts) (contract.AuditRecord, *receipt.Hosts, error) {
	rec, err := c.audit(ctx, workflowID, runID, true)
	return hostsFor(rec, err, workflowID, hosts)
}

// hostsFor is auditForHosts once the record is read (rec, err).
func hostsFor(rec contract.AuditRecord, err error, workflowID string, hosts *receipt.Hosts) (contract.AuditRecord, *receipt.Hosts, error) {
	if errors.Is(err, errNoCheck) {
		return rec, nil, refusedUnchecked(workflowID, err)
	}
	if err != nil || hosts != nil {
		return rec, hosts, err
	}
	if len(rec.HostKeys) == 0 {
		return rec, nil, nil
	}
	return rec, receipt.HostsOf(rec.HostKeys), nil
}

// auditSession reads a Session's record: its checked settings and every cell its host ran, with
// the cell's result and receipt, in order.
func (c *Client) auditSession(ctx context.Context, rec contract.AuditRecord, runID string) (contract.AuditRecord, error) {
	rec.Cells = []contract.AuditCell{}
	h := &sessionHistory{dc: c.dc, rec: rec, scheduled: map[int64]scheduledCell{}, lost: map[string]guard.Cell{}}
	iter := c.tc.GetWorkflowHistory(ctx, rec.WorkflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			return h.rec, fmt.Errorf("client: audit: history of %s: %w", rec.WorkflowID, err)
		}
		if err := h.read(e); err != nil {
			return h.rec, err
		}
	}
	rec = h.rec
	if rec.Session == nil {
		return rec, fmt.Errorf("client: audit: the history of session %s %w", rec.WorkflowID, errNoCheck)
	}
	if rec.ReviewerKeys == nil {
		rec.ReviewerKeys = []approval.Key{}
	}
	if rec.HostKeys == nil {
		rec.HostKeys = []approval.Key{}
	}
	return rec, nil
}

// VerifyCell checks res, the result of cell of session sessionID, as the session's workflow
// does, from the session's history: every cell up to it verifies (verifySession: its receipt
// against hosts, nil meaning the hosts the session's check recorded; its digest over the
// chain of the results before it; the chain of receipts), and res is the result the cell's
// receipt signs. A session whose check recorded no hosts, with none given, is not checked. A
// refusal is a *guard.ReceiptRefused.
func (c *Client) VerifyCell(ctx context.Context, sessionID string, cell int, res guard.Result, hosts *receipt.Hosts) error {
	return c.CheckCellResults(ctx, sessionID, map[int]guard.Result{cell: res}, hosts)[cell]
}

// CheckCellResults checks the results a view shows for the cells of session sessionID, as
// VerifyCell checks one, from one read of the session's history: for each cell of results (by
// index) it returns nil when its result is the one the history records, with a receipt that
// verifies against hosts (nil: the hosts the session's check recorded) in an unbroken chain, or
// the refusal. A session whose check recorded no hosts, with none given, is not checked: every
// cell is nil. An error reading the history is returned for every cell.
func (c *Client) CheckCellResults(ctx context.Context, sessionID string, results map[int]guard.Result, hosts *receipt.Hosts) map[int]error {
	out := make(map[int]error, len(results))
	rec, hosts, err := c.auditForHosts(ctx, sessionID, "", hosts)
	if err != nil || hosts == nil {
		for i := range results {
			out[i] = err
		}
		return out
	}
	chainErr := map[int]error{}
	var broken error
	verifySession(rec, hosts, func(name string, err error) {
		if err != nil && broken == nil {
			broken = &guard.ReceiptRefused{Field: "receipt", Msg: name + ": " + err.Error(), Err: err}
		}
		var n int
		if _, scanErr := fmt.Sscanf(name, "cell %d", &n); scanErr == nil {
			chainErr[n] = broken
		}
	})
	recorded := map[int]*guard.Receipt{}
	for _, ac := range rec.Cells {
		recorded[ac.Cell.Index] = ac.Result.Receipt
	}
	for i, res := range results {
		out[i] = checkShownCell(i, res, recorded[i], hosts, chainErr[i])
	}
	return out
}

// checkShownCell checks res, shown as cell i's result, against the receipt the history records
// for it (recorded) and the chain's verdict up to it (chainErr).
func checkShownCell(i int, res guard.Result, recorded *guard.Receipt, hosts *receipt.Hosts, chainErr error) error {
	switch {
	case recorded == nil:
		return &guard.ReceiptRefused{Field: "receipt", Msg: fmt.Sprintf("the history of the session records no result of cell %d", i)}
	case chainErr != nil:
		return chainErr
	case res.Receipt == nil || receipt.Hash(*res.Receipt) != receipt.Hash(*recorded):
		return &guard.ReceiptRefused{Field: "receipt", Msg: fmt.Sprintf("cell %d's result does not carry the receipt its host signed", i)}
	}
	st, err := receipt.Verify(hosts, res.Receipt)
	if err != nil {
		return err
	}
	return receipt.CheckResult(st, res)
}

// verifySession checks a session's cells offline: each receipt verifies against hosts, is the
// cell's (its digest recomputed from the settings digest, the index, the code and the chain over
// the results of the cells before it), chains to the receipt of the cell before it, and signs
// the cell's result. A removed, added or reordered cell breaks the chain at the next one.
func verifySession(rec contract.AuditRecord, hosts *receipt.Hosts, add func(string, error)) {
	s := rec.Session
	add("digest", nil)
	chain, previous := guard.ChainStart(s.Digest), ""
	for i, cell := range rec.Cells {
		name := fmt.Sprintf("cell %d", cell.Cell.Index)
		digest := guard.CellDigest(s.Digest, cell.Cell.Index, guard.CellCodeDigest(cell.Cell.Language, cell.Cell.Code, cell.Cell.Packages...), chain)
		st, err := receipt.Verify(hosts, cell.Result.Receipt)
		if err == nil {
			err = receipt.CheckRun(st, receipt.Expect{WorkflowID: rec.WorkflowID, RunID: rec.RunID, Digest: digest,
				Cell: &receipt.Cell{Index: cell.Cell.Index, Previous: previous}})
		}
		if err == nil {
			err = receipt.CheckResult(st, cell.Result)
		}
		if err != nil && i > 0 {
			err = fmt.Errorf("after cell %d: %w", rec.Cells[i-1].Cell.Index, err)
		}
		add(name, err)
		chain = guard.ChainNext(chain, digest, guard.ResultDigest(cell.Result))
		if cell.Result.Receipt != nil {
			previous = receipt.Hash(*cell.Result.Receipt)
		}
	}
}
