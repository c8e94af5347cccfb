package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// SessionIDPrefix starts the id of every session this package opens.
const SessionIDPrefix = "session-"

// SessionOptions adjust one session.
type SessionOptions struct {
	// WorkflowID names the session. Optional: defaults to "session-" and a random UUID. An id
	// that names an existing workflow, open or closed, is refused with a ConfigError.
	WorkflowID string
	// SandboxTaskQueue is where the session's sandbox is created. Optional: the workers'
	// setting.
	SandboxTaskQueue string
	// OnStarted is called as soon as the session's workflow is started, before its check
	// finished, with its ids (no digest yet). Optional.
	OnStarted func(SessionStarted)
	// SkipWorkerCheck starts the session even when no worker polls the task queue. Optional:
	// defaults to false (a *NoWorkerError at once).
	SkipWorkerCheck bool
}

// SessionStarted identifies an open session: its workflow and run id and its settings digest
// (every cell's digest binds it).
type SessionStarted struct {
	WorkflowID string `json:"session_id"`
	RunID      string `json:"run_id"`
	Digest     string `json:"settings_digest"`
}

// OpenSession starts a Session workflow with req on the client's task queue and waits until the
// worker has checked the settings and a sandbox host has opened the session's sandbox, so that
// it returns the settings digest of a session that takes cells. Settings that fail
// their check return the typed error (ToolUsageError or ConfigError) and the session has ended.
// Before anything is sent it refuses a workflow id outside guard.CheckWorkflowID's character
// set, text that is not UTF-8 and settings over Temporal's payload limits (ToolUsageError), and a
// task queue no worker polls (*NoWorkerError). As for Start, an existing id is a ConfigError unless
// its session was started with the same settings: a retried open gets that session.
func (c *Client) OpenSession(ctx context.Context, req guard.SessionRequest, opts SessionOptions) (SessionStarted, error) {
	id, err := newWorkflowID(opts.WorkflowID, SessionIDPrefix)
	if err != nil {
		return SessionStarted{}, err
	}
	in := contract.SessionInput{Request: req, SandboxTaskQueue: opts.SandboxTaskQueue}
	if err := checkSessionRequest(c, in); err != nil {
		return SessionStarted{}, err
	}
	run, err := c.startWorkflow(ctx, id, contract.SessionWorkflowName, in, opts.SkipWorkerCheck)
	if err != nil {
		return SessionStarted{}, err
	}
	started := SessionStarted{WorkflowID: run.GetID(), RunID: run.GetRunID()}
	if opts.OnStarted != nil {
		opts.OnStarted(started)
	}
	return c.awaitSessionCheck(ctx, started)
}

// CheckSessionRequest refuses, without any connection, settings that OpenSession would refuse
// before sending: text that is not UTF-8, or settings over Temporal's payload limits.
func CheckSessionRequest(req guard.SessionRequest) error {
	return checkSessionRequest(nil, contract.SessionInput{Request: req})
}

func checkSessionRequest(c *Client, in contract.SessionInput) error {
	req := in.Request
	for _, l := range req.Languages {
		if !utf8.ValidString(l) {
			return &guard.ToolUsageError{Msg: fmt.Sprintf("language %q is not valid UTF-8", l)}
		}
	}
	if err := guard.CheckEncodable(guard.Request{Settings: guard.Settings{Files: req.Files, Env: req.Env, Metadata: req.Metadata}}); err != nil {
		return err
	}
	n := 0
	for name, b := range req.Files {
		n += len(name) + len(b)
	}
	for name, v := range req.Env {
		n += len(name) + len(v)
	}
	dc := converter.GetDefaultDataConverter()
	if c != nil {
		dc = c.dc
	}
	return checkPayloadSize(dc, "the session's settings", n, in)
}

// awaitSessionCheck polls the new session's status until it is open (checked, its sandbox
// created) and returns its settings digest, or the typed error that ended it.
func (c *Client) awaitSessionCheck(ctx context.Context, started SessionStarted) (SessionStarted, error) {
	look := func(ctx context.Context) (checkLook, error) {
		st, err := c.SessionRunStatus(ctx, started.WorkflowID, started.RunID)
		l := checkLook{done: st.State != contract.SessionChecking && st.State != contract.SessionOpening, digest: st.Settings.Digest}
		if st.State != contract.SessionOpen {
			// The check failed, or the sandbox could not be opened: the session has ended with
			// the typed error.
			l.digest = ""
		}
		l.ended = fmt.Errorf("client: session %s ended in state %s before it opened (%s)", started.WorkflowID, st.State, st.End)
		return l, err
	}
	result := func(ctx context.Context) error {
		_, err := c.SessionResult(ctx, started.WorkflowID, started.RunID)
		return err
	}
	digest, err := c.awaitChecked(ctx, started.WorkflowID, started.RunID, "session "+started.WorkflowID, look, result)
	if err == nil {
		started.Digest = digest
	}
	return started, err
}

// SessionResult waits for the session to end and returns its result (every cell), or the typed
// error that ended it (errors.As finds *guard.SandboxLost, *guard.ToolUsageError,
// *guard.ConfigError, *guard.IntegrationError). runID empty: the current run.
func (c *Client) SessionResult(ctx context.Context, sessionID, runID string) (contract.SessionResult, error) {
	res, _, err := workflowResult[contract.SessionResult](ctx, c, sessionID, runID, "session "+sessionID)
	return res, err
}

// SessionInfo is a session as a reviewer's face reads it: its status (naming its workflow and
// run id), whether its workflow still runs, and when it started.
type SessionInfo struct {
	Status  contract.SessionStatus
	Running bool
	Started time.Time
}

// ReadSession describes sessionID, which must be a Session workflow (*NotSessionError
// otherwise), and queries the status of its current run by that run's id. The status names the
// workflow and run id that were described: one that names others is refused (a workflow worker
// answering with another session's status).
func (c *Client) ReadSession(ctx context.Context, sessionID string) (SessionInfo, error) {
	return c.readSession(ctx, sessionID, nil)
}

// readSession is ReadSession; with alsoRead, it calls alsoRead with the described run's id at
// the same time as the status query, and returns its error if the status is good.
func (c *Client) readSession(ctx context.Context, sessionID string, alsoRead func(runID string) error) (SessionInfo, error) {
	info, err := c.describeSession(ctx, sessionID)
	if err != nil {
		return SessionInfo{}, err
	}
	runID := info.GetExecution().GetRunId()
	var read func() error
	if alsoRead != nil {
		read = func() error { return alsoRead(runID) }
	}
	wait := alongside(read)
	st, err := c.SessionRunStatus(ctx, sessionID, runID)
	readErr := wait()
	if err != nil {
		return SessionInfo{}, err
	}
	if st.WorkflowID == "" {
		st.WorkflowID = sessionID
	}
	if st.RunID == "" {
		st.RunID = runID
	}
	if st.WorkflowID != sessionID || st.RunID != runID {
		return SessionInfo{}, fmt.Errorf("client: the status of session %s (run %s) names session %s (run %s): do not approve; the session's workflow worker may not be sandboxflow's",
			sessionID, runID, st.WorkflowID, st.RunID)
	}
	return SessionInfo{Status: st, Running: info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING, Started: info.GetStartTime().AsTime()}, readErr
}

// alongside starts read (nil: nothing) and returns the wait for its error: a statement's read of
// the start, side by side with the status query it is checked against.
func alongside(read func() error) (wait func() error) {
	if read == nil {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() { done <- read() }()
	return func() error { return <-done }
}

// IsSession reports whether workflowID names a Session workflow (false for another type, and
// the describe error when it names none).
func (c *Client) IsSession(ctx context.Context, workflowID string) (bool, error) {
	resp, err := c.tc.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return false, fmt.Errorf("client: describe %s: %w", workflowID, err)
	}
	return resp.GetWorkflowExecutionInfo().GetType().GetName() == contract.SessionWorkflowName, nil
}

// describeSession describes sessionID's current run, refusing a workflow of another type.
func (c *Client) describeSession(ctx context.Context, sessionID string) (*workflowpb.WorkflowExecutionInfo, error) {
	return c.describeAs(ctx, sessionID, contract.SessionWorkflowName, func(typ string) error {
		return &NotSessionError{WorkflowID: sessionID, Type: typ}
	})
}

// SessionStatus returns what the session's status query reports (its current run).
func (c *Client) SessionStatus(ctx context.Context, sessionID string) (contract.SessionStatus, error) {
	return c.SessionRunStatus(ctx, sessionID, "")
}

// SessionRunStatus is SessionStatus of run runID of sessionID (empty: its current run).
func (c *Client) SessionRunStatus(ctx context.Context, sessionID, runID string) (contract.SessionStatus, error) {
	return queryStatus[contract.SessionStatus](ctx, c, sessionID, runID, contract.QuerySessionStatus,
		"session "+sessionID, "the status of session "+sessionID)
}

// SubmitCell submits a cell to the session (update "submit-cell") and waits until the workflow
// accepted it: it returns the cell's index and the digest its reviewer approves. The workflow
// refuses a cell while another waits or runs, after the session ended, at its cell cap, or when
// the code fails its check (a ToolUsageError). A submit with req.RequestID is idempotent: the
// id is the update's id too, and a retry with it (after an answer was lost) gets the cell the
// first submit made, never a second one; the same id with other code is refused.
func (c *Client) SubmitCell(ctx context.Context, sessionID string, req contract.CellRequest) (contract.CellSubmitted, error) {
	var out contract.CellSubmitted
	if err := guard.CheckEncodable(guard.Request{Code: req.Code, Language: req.Language, Settings: guard.Settings{Metadata: req.Metadata}}); err != nil {
		return out, err
	}
	if err := checkPayloadSize(c.dc, "the cell", len(req.Code), req); err != nil {
		return out, err
	}
	if !utf8.ValidString(req.RequestID) || len(req.RequestID) > contract.MaxRequestIDBytes {
		return out, &guard.ToolUsageError{Msg: fmt.Sprintf("submit cell: the request id must be valid UTF-8 of at most %d bytes", contract.MaxRequestIDBytes)}
	}
	updateID := uuid.NewString()
	if req.RequestID != "" {
		// The server answers a retried update id with the first one's outcome, even from a
		// worker from before request ids; the id binds the code, language and packages too, so
		// that the same request id with other code or packages reaches the workflow, which
		// refuses it (packages only when there are any: the ids of other cells stay as they were).
		bound := req.Language + "\x00" + req.Code
		if req.Packages != "" {
			bound += "\x00" + req.Packages
		}
		sum := sha256.Sum256([]byte(bound))
		updateID = "submit-cell:" + req.RequestID + ":" + hex.EncodeToString(sum[:8])
	}
	err := c.update(ctx, sessionID, "", contract.UpdateSubmitCell, updateID, req, &out)
	if err != nil && req.RequestID != "" && ctx.Err() == nil && !deterministicRefusal(err) {
		// The server keeps a completed update's outcome, failures too: a submit that failed in
		// the handler (its check's activity, say) would fail every retry under the same update
		// id. Sent again under a fresh one, the workflow's own request-id check still keeps the
		// cell single.
		out = contract.CellSubmitted{}
		err = c.update(ctx, sessionID, "", contract.UpdateSubmitCell, updateID+":"+uuid.NewString(), req, &out)
	}
	if err != nil {
		return out, fmt.Errorf("client: submit a cell to %s: %w", sessionID, err)
	}
	return out, nil
}

// deterministicRefusal says whether err refuses the request itself (its code, or the worker's
// configuration), so that sending it again cannot change the answer.
func deterministicRefusal(err error) bool {
	switch guard.TypeOf(err) {
	case guard.TypeToolUsageError, guard.TypeConfigError:
		return true
	case guard.TypePolicyRefused:
		// A rule's refusal is; a cap's passes once fewer wait or run.
		var pr *guard.PolicyRefused
		return errors.As(err, &pr) && pr.Rule != ""
	}
	return false
}

// AwaitCell waits until cell of the session has ended (ran, denied, expired, dropped or failed)
// and returns it (update "await-cell"). A cell that ran carries its result; a timeout is a
// result. ctx bounds the wait.
func (c *Client) AwaitCell(ctx context.Context, sessionID string, cell int) (contract.CellStatus, error) {
	var out contract.CellStatus
	if err := c.update(ctx, sessionID, "", contract.UpdateAwaitCell, uuid.NewString(), contract.AwaitCell{Cell: cell}, &out); err != nil {
		// A session that has ended takes no update, but its status still answers: every cell of
		// an ended session has ended too (denied, expired, dropped, failed or with its result).
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) && ctx.Err() == nil {
			if st, serr := c.SessionStatus(ctx, sessionID); serr == nil && st.End != "" {
				if cs, ok := sessionCell(st, cell); ok && cs.Final() {
					return cs, nil
				}
			}
		}
		if ctx.Err() != nil {
			return out, fmt.Errorf("client: wait for cell %d of %s: %w", cell, sessionID, ctx.Err())
		}
		return out, fmt.Errorf("client: wait for cell %d of %s: %w", cell, sessionID, err)
	}
	return out, nil
}

// CloseSession closes the session (update "close-session"): a waiting cell is dropped, a running
// one finishes first, the sandbox is removed. It returns the session's status once it ended.
func (c *Client) CloseSession(ctx context.Context, sessionID, reason string) (contract.SessionStatus, error) {
	var out contract.SessionStatus
	if !utf8.ValidString(reason) {
		return out, &guard.ToolUsageError{Msg: "close: reason is not valid UTF-8"}
	}
	if err := c.update(ctx, sessionID, "", contract.UpdateCloseSession, uuid.NewString(), contract.CloseSession{Reason: reason}, &out); err != nil {
		return out, fmt.Errorf("client: close session %s: %w", sessionID, err)
	}
	return out, nil
}

// DecideCell sends a reviewer's decision for one cell (update "decide-cell") to run runID of
// sessionID only (empty: its current run), so that a decision read off one run never reaches
// another, and waits until the workflow accepted or refused it. With d.Wait the answer comes
// once the cell has ended, with its status (out.CellStatus); a worker from before that answers
// at once, and the cell is then awaited with "await-cell". ctx bounds the wait.
func (c *Client) DecideCell(ctx context.Context, sessionID, runID string, d contract.CellDecision) (contract.DecideResult, error) {
	var out contract.DecideResult
	if err := checkDecision(c.dc, d.Decision); err != nil {
		return out, err
	}
	if err := c.update(ctx, sessionID, runID, contract.UpdateDecideCell, d.Decision.ApprovalID, d, &out); err != nil {
		return out, fmt.Errorf("client: decide on cell %d of %s: %w", d.Cell, sessionID, err)
	}
	// A worker from before decide-wait-v1 answers at once; an approval that leaves a quorum short
	// is answered at once too, and is not waited for (the cell waits for another reviewer).
	if d.Wait && out.CellStatus == nil && out.State != contract.StatusAwaitingApproval {
		cs, err := c.AwaitCell(ctx, sessionID, d.Cell)
		if err != nil {
			return out, err
		}
		out.CellStatus = &cs
	}
	return out, nil
}

// update sends one update and waits for its outcome into out. A refusal of one of guard's types
// (a cell's code that fails its check is a ToolUsageError) is returned as that type.
func (c *Client) update(ctx context.Context, workflowID, runID, name, updateID string, arg, out any) error {
	h, err := c.tc.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		RunID:        runID,
		UpdateName:   name,
		UpdateID:     updateID,
		Args:         []any{arg},
		WaitForStage: tclient.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, out)
	}
	if typed := contract.FromFailure(err); err != nil && guard.TypeOf(typed) != "" {
		return typed
	}
	return err
}

// WaitingCell returns the index of the cell of st that waits for a decision, or 0 when none does.
func WaitingCell(st contract.SessionStatus) int {
	for _, c := range st.Cells {
		if c.State == contract.StatusAwaitingApproval {
			return c.Cell
		}
	}
	return 0
}

// sessionCell returns cell n of st.
func sessionCell(st contract.SessionStatus, n int) (contract.CellStatus, bool) {
	i := slices.IndexFunc(st.Cells, func(c contract.CellStatus) bool { return c.Cell == n })
	if i < 0 {
		return contract.CellStatus{}, false
	}
	return st.Cells[i], true
}

// CellResult is CellOutcome for a door that gives the result on: a result is returned only once
// it verified against its receipt (VerifyCell, against Options.Hosts).
func (c *Client) CellResult(ctx context.Context, sessionID string, cs contract.CellStatus) (guard.Result, error) {
	res, err := CellOutcome(sessionID, cs)
	if err != nil {
		return res, err
	}
	if err := c.VerifyCell(ctx, sessionID, cs.Cell, res, c.hosts); err != nil {
		return guard.Result{}, err
	}
	return res, nil
}

// CellOutcome returns the result of a cell that ended with one (a timeout is a result), or why
// it has none: a *guard.ApprovalDenied for a denied or expired cell, a *CellNotRunError for a
// dropped or failed one, and an error for a cell that has not ended.
func CellOutcome(sessionID string, c contract.CellStatus) (guard.Result, error) {
	switch {
	case c.Result != nil:
		return *c.Result, nil
	case c.State == contract.StatusDenied:
		d := &guard.ApprovalDenied{Reason: guard.DeniedByReviewer}
		if c.Decision != nil {
			d.Reviewer, d.Message = c.Decision.Reviewer, c.Decision.Reason
		}
		return guard.Result{}, d
	case c.State == contract.StatusExpired:
		return guard.Result{}, &guard.ApprovalDenied{Reason: guard.DeniedExpired, Message: "nobody decided on the cell in time; it did not run"}
	case !c.Final():
		return guard.Result{}, fmt.Errorf("client: cell %d of session %s has not ended: it is %s", c.Cell, sessionID, c.State)
	}
	return guard.Result{}, &CellNotRunError{SessionID: sessionID, Cell: c.Cell, State: c.State, Msg: c.Error}
}
