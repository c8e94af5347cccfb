package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// Sessions that outlive their worker (issue 44). A host spools each session it keeps beside its
// runs (spool.go): the sandbox, the host's task queue, the session's settings without file
// contents or env values (guard.CheckedSession.Redacted), and the host's record of the sandbox
// (the index and approvals it admitted, the chain, the last receipt), written again before each
// cell is sent (with the cell pending) and after it ended. A worker that starts adopts the
// sessions of the workers that are gone: it takes over each sandbox (guard.SessionAdopter),
// signs and delivers late the result of the cell that was pending, keeps the sandbox for its
// session under the same key as its opener did, and polls the dead worker's host task queue, on
// which the session's next hold and cells come. The session's own record moves to this worker's
// spool, for the worker after it.

// spooledSession is one session's spool entry (a .session file).
type spooledSession struct {
	Namespace  string               `json:"namespace"`
	WorkflowID string               `json:"workflow_id"`
	RunID      string               `json:"run_id"`
	HostQueue  string               `json:"host_queue"`
	Sandbox    string               `json:"sandbox"`
	Session    guard.CheckedSession `json:"session"` // Redacted
	Opened     time.Time            `json:"opened"`
	// The host's record of the sandbox (hostSandbox).
	Last    int      `json:"last"`
	Used    []string `json:"used,omitempty"`
	Chain   string   `json:"chain"`
	Cells   int      `json:"cells"`
	Receipt string   `json:"receipt,omitempty"`
	Unknown bool     `json:"unknown,omitempty"`
	// Pending is the cell admitted and sent (or about to be) whose result the host has not yet
	// taken.
	Pending *spooledCell `json:"pending,omitempty"`
}

// spooledCell is what the receipt and the late result of a pending cell need: never its code.
type spooledCell struct {
	ActivityID  string           `json:"activity_id"`
	Cell        guard.Cell       `json:"cell"` // Code cleared
	Limits      guard.Limits     `json:"limits"`
	ChainBefore string           `json:"chain_before"`
	ApprovalID  string           `json:"approval_id"`
	Reviewer    string           `json:"reviewer"`
	Approvals   []guard.Approval `json:"approvals,omitempty"`
	Started     time.Time        `json:"started"`
}

// sessionEntryName is the file name of the entry of the session run k.
func sessionEntryName(k sessionKey) string {
	h := sha256.Sum256([]byte(k.workflowID + "\x00" + k.runID))
	return hex.EncodeToString(h[:16]) + ".session"
}

// adoptable reports whether a worker started after this one could take over hs: this host
// spools, signs receipts (a pending cell's result is delivered late with one), and its backend
// is a SessionAdopter.
func (a *Activities) adoptable() bool {
	return a.spool != nil && a.hostKey != nil && a.guarded != nil && a.guarded.SessionAdopter() != nil
}

// spoolSession writes hs's entry, with pending the cell about to be sent (nil: none); hs.mu is
// held (or hs is not yet shared). A failure is logged: the session then does not survive this
// worker. It is written before the cell is sent, so that the adopter knows every cell the
// sandbox may have run and every approval the host used.
func (a *Activities) spoolSession(ctx context.Context, hs *hostSandbox, pending *spooledCell) {
	if !a.adoptable() || hs.spool == nil {
		return
	}
	e := spooledSession{Namespace: hs.namespace, WorkflowID: hs.key.workflowID, RunID: hs.key.runID, HostQueue: hs.queue,
		Sandbox: hs.box.ID(), Session: hs.box.Session().Redacted(), Opened: hs.opened,
		Last: hs.last, Chain: hs.chain, Cells: hs.cells, Receipt: hs.receipt, Unknown: hs.unknown, Pending: pending}
	for id := range hs.used {
		e.Used = append(e.Used, id)
	}
	b, err := json.Marshal(e)
	if err == nil {
		err = writeDurably(filepath.Join(hs.spool.root, hs.spool.id, sessionEntryName(hs.key)), b)
	}
	if err != nil {
		a.sink.Emit(ctx, Event{Type: contract.EventSessionEnded, Time: time.Now(), Data: map[string]any{
			"workflow_id": hs.key.workflowID, "run_id": hs.key.runID, "sandbox_id": hs.box.ID(),
			"spool_error": "the session is not spooled (it ends with this worker): " + err.Error()}})
	}
}

// unspoolSession removes hs's entry (its session ended).
func unspoolSession(hs *hostSandbox) {
	if hs.spool != nil {
		os.Remove(filepath.Join(hs.spool.root, hs.spool.id, sessionEntryName(hs.key)))
	}
}

// pendingCell is the spool's record of the cell in about to run in hs, whose approvals verified
// as approvals.
func pendingCell(info activity.Info, hs *hostSandbox, in contract.CellRunInput, approvals []guard.Approval) *spooledCell {
	cell := in.Cell
	cell.Code = ""
	return &spooledCell{ActivityID: info.ActivityID, Cell: cell, Limits: hs.box.Session().Limits, ChainBefore: hs.chain,
		ApprovalID: in.Decision.ApprovalID, Reviewer: in.Decision.Reviewer, Approvals: approvals, Started: time.Now()}
}

// adoptSession takes over the session of the spool entry at path, whose worker is gone: see the
// comment at the top of this file. poll is called with the session's host task queue whether or
// not the sandbox could be taken over (the session's next hold then learns it is lost).
func (a *Activities) adoptSession(ctx context.Context, log RunLog, path string, poll func(queue string)) {
	var e spooledSession
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &e)
	}
	if err != nil {
		a.adoptedSessionEvent(ctx, e, "", fmt.Errorf("read the spool entry %s: %w", path, err))
		return
	}
	if ended, err := runEnded(ctx, log, e.Namespace, e.WorkflowID, e.RunID); ended || err != nil {
		// An ended session's sandbox is the reaper's; one the server cannot tell of is left to
		// it too (nothing is taken over blind).
		a.adoptedSessionEvent(ctx, e, "", errors.Join(errors.New("its session has ended, or its state cannot be read"), err))
		return
	}
	// The session's next hold may come on its queue while the sandbox is taken over (a pending
	// cell's end may be minutes away): it waits for it (lookup).
	done := a.sessions.adopt(sessionKey{e.WorkflowID, e.RunID})
	defer done()
	if poll != nil && e.HostQueue != "" {
		poll(e.HostQueue)
	}
	var pending *guard.PendingCell
	if p := e.Pending; p != nil && !e.Unknown {
		pending = &guard.PendingCell{Cell: p.Cell, Limits: p.Limits, Deadline: p.Started.Add(p.Limits.Timeout + a.policy.Grace + adoptSlack)}
	}
	box, res, err := a.guarded.AdoptSession(ctx, e.Sandbox, e.Session, pending, e.Chain)
	if err != nil {
		a.adoptedSessionEvent(ctx, e, "", errors.Join(errors.New("the session's sandbox could not be taken over"), err))
		return
	}
	hs := &hostSandbox{key: sessionKey{e.WorkflowID, e.RunID}, box: box, opened: e.Opened, used: map[string]bool{},
		last: e.Last, chain: e.Chain, cells: e.Cells, receipt: e.Receipt, unknown: e.Unknown,
		namespace: e.Namespace, queue: e.HostQueue, spool: a.spool}
	for _, id := range e.Used {
		hs.used[id] = true
	}
	if e.Pending != nil && res == nil {
		hs.unknown = true // the pending cell's end never came: the sandbox's state is unknown
	}
	if !a.sessions.add(hs) {
		_ = box.Close(context.WithoutCancel(ctx))
		a.adoptedSessionEvent(ctx, e, box.ID(), errors.New("this host keeps another sandbox for the session"))
		return
	}
	done()
	a.armSession(hs, time.Until(e.Opened.Add(e.Session.Lifetime+a.lifetimeExtra)))
	var late *guard.Result
	if res != nil {
		late, err = a.pendingResult(hs, e, *res)
	}
	hs.mu.Lock()
	a.spoolSession(ctx, hs, nil)
	hs.mu.Unlock()
	a.adoptedSessionEvent(ctx, e, box.ID(), err)
	if late != nil {
		to := lateRoute{log: log, stop: ctx.Done(), adopted: true, info: activity.Info{
			Namespace: e.Namespace, ActivityID: e.Pending.ActivityID,
			WorkflowExecution: workflow.Execution{ID: e.WorkflowID, RunID: e.RunID}}}
		a.deliverLate(ctx, to, pendingChecked(e), *late)
	}
}

// pendingResult records res, the result of e's pending cell, in hs as SessionCell would have
// (the chain, the cells, the receipt it signs) and returns it signed.
func (a *Activities) pendingResult(hs *hostSandbox, e spooledSession, res guard.Result) (*guard.Result, error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	p := e.Pending
	hs.chain = guard.ChainNext(hs.chain, res.Digest, guard.ResultDigest(res))
	hs.cells++
	res.ApprovalID, res.Reviewer, res.Approvals = p.ApprovalID, p.Reviewer, p.Approvals
	info := activity.Info{ActivityID: p.ActivityID, WorkflowExecution: workflow.Execution{ID: e.WorkflowID, RunID: e.RunID}}
	ended := p.Started.Add(res.Duration)
	if err := a.signCell(hs, runReceipt{info: info, digest: res.Digest, backend: e.Session.Backend, secrets: e.Session.Secrets,
		approvals: receiptApprovals(p.Approvals), started: p.Started, ended: ended,
		cell: &receipt.Cell{Index: p.Cell.Index, SettingsDigest: e.Session.Digest, Chain: p.ChainBefore}}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// pendingChecked is the run-shaped settings of e's pending cell, for the late result's events.
func pendingChecked(e spooledSession) guard.Checked {
	c := e.Session.CellChecked(e.Pending.Cell)
	c.Owner = guard.Owner{WorkflowID: e.WorkflowID, RunID: e.RunID, ActivityID: e.Pending.ActivityID}
	c.Digest = guard.CellDigest(e.Session.Digest, e.Pending.Cell.Index, e.Pending.Cell.CodeDigest, e.Pending.ChainBefore)
	return c
}

// adoptedSessionEvent emits session.adopted: the session e taken over in sandbox (err nil), or
// why not.
func (a *Activities) adoptedSessionEvent(ctx context.Context, e spooledSession, sandbox string, err error) {
	d := map[string]any{"workflow_id": e.WorkflowID, "run_id": e.RunID, "sandbox_id": e.Sandbox,
		"host_task_queue": e.HostQueue, "adopted": err == nil}
	if e.Pending != nil {
		d["pending_cell"] = e.Pending.Cell.Index
	}
	if err != nil {
		d["error"] = err.Error()
	}
	a.sink.Emit(ctx, Event{Type: contract.EventSessionAdopted, Time: time.Now(), Data: d})
}

// runEnded reports whether the workflow run has ended (or is gone).
func runEnded(ctx context.Context, log RunLog, namespace, workflowID, runID string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, historyReadTimeout)
	defer cancel()
	resp, err := log.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID}})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return true, nil
	case err != nil:
		return false, err
	}
	return resp.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}
