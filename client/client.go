package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// WorkflowIDPrefix starts the id of every run this package starts.
const WorkflowIDPrefix = "sandbox-"

// Options configure a Client.
type Options struct {
	// Temporal is a connected Temporal client. Required.
	Temporal tclient.Client
	// TaskQueue is where RunCode workflows are started. Optional: defaults to contract.DefaultTaskQueue.
	TaskQueue string
	// DataConverter decodes payloads read from history (a run's start input, for Review and
	// Statement). Optional: the converter of Connection.Options, or Temporal's default.
	DataConverter converter.DataConverter
	// Namespace is the namespace Temporal was dialled for: it names it in messages, and lets a
	// run's or a session's start be read as its one event rather than its history's first page
	// (a long session's every cell). Optional (Connect sets it); it must be Temporal's namespace
	// when set.
	Namespace string
	// WorkerWait is how long Start waits for a worker to poll the task queue before it returns a
	// *NoWorkerError (a worker that has just started is listed within a moment). Optional:
	// defaults to 3 s.
	WorkerWait time.Duration
	// CheckPoll is how often, at most, Start asks a new run whether its check finished (it asks
	// after 10 ms, then twice as long each time up to CheckPoll). Optional: defaults
	// to 100 ms.
	CheckPoll time.Duration
	// CheckWait bounds how long Start waits for the answer of the update that starts a run
	// (update-with-start, see Start) and, when Start polls the status instead, how long it keeps
	// asking while the query fails with a transient error (unavailable, deadline exceeded,
	// resource exhausted: a busy server); past it Start returns a *CheckUnansweredError, with the
	// run started. Start never waits for the result of a run that is still open. Optional:
	// defaults to 1 minute.
	CheckWait time.Duration
	// Reviewer is the principal a reviewer signs as (a name their key's reviewers-file line
	// allows) with Statement, Approve and Deny: a run's statement names it (statement version
	// 2), and the run records it as who decided. Optional: see StatementOptions.Reviewer.
	Reviewer string
	// Canceller names who cancels with Cancel, as the run records it (Result.Cancelled.By). It
	// is the caller's word, for people to read, and decides nothing. Optional: Reviewer, or else
	// "$USER@hostname".
	Canceller string
	// Hosts are the sandbox hosts' keys a run's result must carry a receipt of (VerifyResult):
	// Result, WaitResult and the wait of DecideAndWait return a result only once it verified.
	// Optional: nil takes the hosts the run's check recorded (a run that recorded none is not
	// checked).
	Hosts *receipt.Hosts
}

// Client starts and steers RunCode runs. Create it with New.
type Client struct {
	tc         tclient.Client
	owned      bool
	namespace  string
	dc         converter.DataConverter
	taskQueue  string
	checkPoll  time.Duration
	checkWait  time.Duration
	workerWait time.Duration
	reviewer   string
	canceller  string
	hosts      *receipt.Hosts
	// reviewersFile and passkeyOrigin verify a conversation's previous run's decision
	// (WithReviewersFile).
	reviewersFile, passkeyOrigin string
}

// New returns a Client, or an error when no Temporal client is given.
func New(opts Options) (*Client, error) {
	if opts.Temporal == nil {
		return nil, errors.New("client: Options.Temporal is required")
	}
	c := &Client{tc: opts.Temporal, dc: opts.DataConverter, taskQueue: opts.TaskQueue, checkPoll: opts.CheckPoll, namespace: opts.Namespace,
		reviewer: opts.Reviewer, canceller: opts.Canceller, hosts: opts.Hosts}
	if c.canceller == "" {
		c.canceller = c.reviewer
	}
	if c.canceller == "" {
		c.canceller = defaultCanceller()
	}
	if c.dc == nil {
		c.dc = converter.GetDefaultDataConverter()
	}
	if c.taskQueue == "" {
		c.taskQueue = contract.DefaultTaskQueue
	}
	if c.workerWait = opts.WorkerWait; c.workerWait <= 0 {
		c.workerWait = 3 * time.Second
	}
	if c.checkPoll <= 0 {
		c.checkPoll = 100 * time.Millisecond
	}
	if c.checkWait = opts.CheckWait; c.checkWait <= 0 {
		c.checkWait = time.Minute
	}
	return c, nil
}

// WithReviewer returns a copy of c that signs as reviewer (Options.Reviewer), and cancels as them.
func (c *Client) WithReviewer(reviewer string) *Client {
	d := *c
	d.owned = false
	d.reviewer = reviewer
	d.canceller = reviewer
	return &d
}

// WithCanceller returns a copy of c that cancels as canceller (Options.Canceller).
func (c *Client) WithCanceller(canceller string) *Client {
	d := *c
	d.owned = false
	d.canceller = canceller
	return &d
}

// WithHosts returns a Client like c whose result doors verify receipts against hosts
// (Options.Hosts; nil: the hosts each run's check recorded). It shares c's connection.
func (c *Client) WithHosts(hosts *receipt.Hosts) *Client {
	d := *c
	d.owned = false
	d.hosts = hosts
	return &d
}

// StartOptions adjust one run.
type StartOptions struct {
	// WorkflowID names the run. Optional: defaults to "sandbox-" and a random UUID. An id that
	// names an existing workflow, open or closed, is refused with a ConfigError.
	WorkflowID string
	// SandboxTaskQueue is the task queue of the sandbox activity. Optional: the workers' setting.
	SandboxTaskQueue string
	// OnStarted is called once the run is known to be started, with its ids (no digest yet):
	// when the server answers the start, which with update-with-start is usually once the check
	// finished too. Optional.
	OnStarted func(Started)
	// SkipWorkerCheck starts the run even when no worker polls the task queue. Optional: defaults
	// to false, which returns a *NoWorkerError at once instead of starting a run nobody checks.
	SkipWorkerCheck bool
}

// Started identifies a run that waits for its decision, with the digest a reviewer must approve.
type Started struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Digest     string `json:"digest"`
}

// Start starts a RunCode run and waits until the worker has checked the request, so that it can
// return the digest. It starts the run with the update contract.UpdateAwaitCheck in the same call
// (update-with-start), which the workflow answers once its check finished: one call, no status
// query. A server that refuses update-with-start (before v1.26, or updates turned off) gets a
// plain start and the status is polled, as is a run whose worker does not know the update. A
// request that fails its check returns the typed error (ToolUsageError or ConfigError) and
// nothing waits. Before anything is sent, Start refuses a workflow id outside
// guard.CheckWorkflowID's character set, bytes that are not UTF-8 and a request over Temporal's
// payload limits (ToolUsageError), and a task queue no worker polls
// (*NoWorkerError). An existing workflow id is a ConfigError, unless its run was started with the
// same request: a start retried after its answer was lost gets that run (the id is the caller's
// idempotency key), never a second one.
func (c *Client) Start(ctx context.Context, req guard.Request, opts StartOptions) (Started, error) {
	id, err := newWorkflowID(opts.WorkflowID, WorkflowIDPrefix)
	if err != nil {
		return Started{}, err
	}
	in := contract.Input{Request: req, SandboxTaskQueue: opts.SandboxTaskQueue}
	if err := guard.CheckEncodable(req); err != nil {
		return Started{}, err
	}
	if err := checkPayloadSize(c.dc, "the request", requestBytes(req), in); err != nil {
		return Started{}, err
	}
	return c.startChecked(ctx, id, in, opts)
}

// startWorkflow starts workflow type typ with in under id on the client's task queue, once a
// worker polls it (unless skipWorkerCheck): an id used before, by an open or a closed workflow,
// is refused with a ConfigError, unless that workflow was started with the same input (a retried
// start): its run is returned.
func (c *Client) startWorkflow(ctx context.Context, id, typ string, in any, skipWorkerCheck bool) (tclient.WorkflowRun, error) {
	if !skipWorkerCheck {
		if err := c.checkWorkers(ctx); err != nil {
			return nil, err
		}
	}
	run, err := c.tc.ExecuteWorkflow(ctx, c.startOptions(id), typ, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			if runID, same := c.sameStart(ctx, id, started.RunId, typ, in); same {
				return c.tc.GetWorkflow(ctx, id, runID), nil
			}
			return nil, usedIDError(id)
		}
		return nil, fmt.Errorf("client: start %s %s: %w", typ, id, err)
	}
	return run, nil
}

// checkWorkers returns a *NoWorkerError when no worker polls the workflow task queue within
// Options.WorkerWait.
func (c *Client) checkWorkers(ctx context.Context) error {
	deadline := time.Now().Add(c.workerWait)
	for {
		resp, err := c.tc.DescribeTaskQueue(ctx, c.taskQueue, enums.TASK_QUEUE_TYPE_WORKFLOW)
		var denied *serviceerror.PermissionDenied
		var unimplemented *serviceerror.Unimplemented
		switch {
		case errors.As(err, &denied) || errors.As(err, &unimplemented):
			// This client may not ask; the run is started and waits for a worker as before.
			return nil
		case err != nil:
			return fmt.Errorf("client: describe task queue %s: %w", c.taskQueue, err)
		}
		if len(resp.GetPollers()) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return &NoWorkerError{TaskQueue: c.taskQueue, Namespace: c.namespace}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("client: waiting for a worker on %s: %w", c.taskQueue, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// awaitCheck polls the new run's status until its check finished and returns its digest, or the
// typed error that ended it. A status query that fails is never answered by waiting for the
// run's result: only a run that has closed (its check failed) is asked for it; while the run is
// open, transient failures are retried for up to CheckWait and any other failure is returned.
func (c *Client) awaitCheck(ctx context.Context, started Started) (Started, error) {
	look := func(ctx context.Context) (checkLook, error) {
		st, err := c.Status(ctx, started.WorkflowID)
		ended := fmt.Errorf("client: run %s ended in state %s without a digest", started.WorkflowID, st.State)
		return checkLook{done: st.State != contract.StatusChecking, digest: st.Request.Digest, ended: ended}, err
	}
	result := func(ctx context.Context) error {
		_, err := c.Result(ctx, started.WorkflowID)
		return err
	}
	digest, err := c.awaitChecked(ctx, started.WorkflowID, started.RunID, started.WorkflowID, look, result)
	if err == nil {
		started.Digest = digest
	}
	return started, err
}

// isClosed reports whether the started run has closed.
func (c *Client) isClosed(ctx context.Context, started Started) (bool, error) {
	resp, err := c.tc.DescribeWorkflowExecution(ctx, started.WorkflowID, started.RunID)
	if err != nil {
		return false, fmt.Errorf("client: describe %s: %w", started.WorkflowID, err)
	}
	return resp.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// isTransient reports query failures that a busy or restarting server gives and that asking
// again may cure.
func isTransient(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var exhausted *serviceerror.ResourceExhausted
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &exhausted) ||
		errors.Is(err, context.DeadlineExceeded)
}

// RunInfo is a RunCode run as a reviewer's face reads it: its status (naming its workflow and run
// id), whether it still runs, and when it started and closed (zero while it runs).
type RunInfo struct {
	Status          contract.Status
	Running         bool
	Started, Closed time.Time
}

// ReadRun describes workflowID, which must be a RunCode run (*NotRunCodeError otherwise), and
// queries the status of its current run by that run's id.
func (c *Client) ReadRun(ctx context.Context, workflowID string) (RunInfo, error) {
	info, err := c.describeRunCode(ctx, workflowID)
	if err != nil {
		return RunInfo{}, err
	}
	runID := info.GetExecution().GetRunId()
	st, err := c.RunStatus(ctx, workflowID, runID)
	if err != nil {
		return RunInfo{}, err
	}
	ri := RunInfo{
		Status:  st,
		Running: info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING,
		Started: info.GetStartTime().AsTime(),
	}
	if info.GetCloseTime() != nil {
		ri.Closed = info.GetCloseTime().AsTime()
	}
	if ri.Status.WorkflowID == "" {
		ri.Status.WorkflowID = workflowID
	}
	if ri.Status.RunID == "" {
		ri.Status.RunID = runID
	}
	return ri, nil
}

// RequireRunCode returns a *NotRunCodeError when workflowID names a workflow that is not a RunCode
// run, and the describe error when it names none.
func (c *Client) RequireRunCode(ctx context.Context, workflowID string) error {
	_, err := c.describeRunCode(ctx, workflowID)
	return err
}

// describeRunCode describes workflowID's current run, refusing a workflow of another type.
func (c *Client) describeRunCode(ctx context.Context, workflowID string) (*workflowpb.WorkflowExecutionInfo, error) {
	return c.describeAs(ctx, workflowID, contract.WorkflowName, func(typ string) error {
		return &NotRunCodeError{WorkflowID: workflowID, Type: typ}
	})
}

// isQueryNotReady reports errors that mean "ask again": the first workflow task has not run yet.
func isQueryNotReady(err error) bool {
	var failedPre *serviceerror.FailedPrecondition
	var notFound *serviceerror.NotFound
	return errors.As(err, &failedPre) || errors.As(err, &notFound)
}

// Status returns what the run's status query reports: its state and the request as a reviewer
// reads it (env values are never in it).
func (c *Client) Status(ctx context.Context, workflowID string) (contract.Status, error) {
	return c.RunStatus(ctx, workflowID, "")
}

// RunStatus is Status of run runID of workflowID (empty: its current run).
func (c *Client) RunStatus(ctx context.Context, workflowID, runID string) (contract.Status, error) {
	return queryStatus[contract.Status](ctx, c, workflowID, runID, contract.QueryStatus, workflowID, "status of "+workflowID)
}

// Pending is a run, or a session with a cell, that waits for a decision, as visibility lists it.
type Pending struct {
	// Kind says which it is: PendingRun (a RunCode run) or PendingSession (a Session whose
	// waiting cell is read with `starter session show`).
	Kind       string    `json:"kind"`
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	StartTime  time.Time `json:"start_time"`
	Digest     string    `json:"digest"`
	Language   string    `json:"language"`
	Backend    string    `json:"backend"`
	// Approvals and Quorum are how many approvals the run has and needs, as its workflow
	// worker keeps them in the memo (contract.MemoApprovals). Absent for sessions and for runs
	// checked before quorums.
	Approvals int `json:"approvals,omitempty"`
	Quorum    int `json:"quorum,omitempty"`
}

// Kinds of Pending.
const (
	PendingRun     = "run"
	PendingSession = "session"
)

// PendingQuery is the visibility query for what waits for a person: RunCode runs and Sessions
// (which set SandboxStatus to awaiting_approval while a cell waits) only, so that another
// workflow type that sets the same search attribute is never listed.
var PendingQuery = fmt.Sprintf("WorkflowType IN ('%s', '%s') AND %s = '%s' AND ExecutionStatus = 'Running'",
	contract.WorkflowName, contract.SessionWorkflowName, contract.AttrStatus, contract.StatusAwaitingApproval)

// Pending lists the runs and sessions that wait for a decision, newest first, every page of them. Visibility
// is eventually consistent: a run started a moment ago may not be listed yet.
func (c *Client) Pending(ctx context.Context) ([]Pending, error) {
	var (
		out   []Pending
		token string
	)
	for {
		page, err := c.PendingPage(ctx, 0, token)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Runs...)
		if token = page.NextPageToken; token == "" {
			return out, nil
		}
	}
}

// PendingPage is one page of the runs that wait for a decision.
type PendingPage struct {
	Runs []Pending `json:"pending"`
	// NextPageToken asks PendingPage for the page after this one; "" when this is the last.
	NextPageToken string `json:"next_page_token"`
}

// PendingPage lists one page of the runs that wait for a decision, newest first: at most
// pageSize of them (0: the server's default page), after the page whose NextPageToken is
// pageToken ("" for the first page).
func (c *Client) PendingPage(ctx context.Context, pageSize int, pageToken string) (PendingPage, error) {
	if pageSize < 0 || pageSize > math.MaxInt32 {
		return PendingPage{}, fmt.Errorf("client: pending page size %d: want 0 or more", pageSize)
	}
	token, err := base64.RawURLEncoding.DecodeString(pageToken)
	if err != nil {
		return PendingPage{}, fmt.Errorf("client: pending page token: %w", err)
	}
	resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: PendingQuery, PageSize: int32(pageSize), NextPageToken: token})
	if err != nil {
		return PendingPage{}, fmt.Errorf("client: list pending runs: %w", err)
	}
	page := PendingPage{Runs: []Pending{}, NextPageToken: base64.RawURLEncoding.EncodeToString(resp.GetNextPageToken())}
	for _, e := range resp.GetExecutions() {
		p := Pending{
			Kind:       PendingRun,
			WorkflowID: e.GetExecution().GetWorkflowId(),
			RunID:      e.GetExecution().GetRunId(),
			StartTime:  e.GetStartTime().AsTime(),
		}
		if e.GetType().GetName() == contract.SessionWorkflowName {
			p.Kind = PendingSession
		}
		fields := e.GetSearchAttributes().GetIndexedFields()
		p.Digest = keyword(fields[contract.AttrDigest])
		p.Language = keyword(fields[contract.AttrLanguage])
		p.Backend = keyword(fields[contract.AttrBackend])
		if m := e.GetMemo().GetFields()[contract.MemoApprovals]; m != nil {
			var count contract.ApprovalCount
			if c.dc.FromPayload(m, &count) == nil {
				p.Approvals, p.Quorum = count.Approvals, count.Quorum
			}
		}
		page.Runs = append(page.Runs, p)
	}
	return page, nil
}

// keyword decodes a Keyword search attribute's payload; a missing or odd one is "".
func keyword(p *commonpb.Payload) string {
	var s string
	if p == nil || converter.GetDefaultDataConverter().FromPayload(p, &s) != nil {
		return ""
	}
	return s
}

// Decide sends a decision as the update "decide" and waits until the workflow accepted or refused
// it.
func (c *Client) Decide(ctx context.Context, workflowID string, d contract.Decision) (contract.DecideResult, error) {
	return c.DecideRun(ctx, workflowID, "", d)
}

// DecideRun is Decide for run runID of workflowID only (empty: its current run), so that a
// decision read off one run's page never reaches another.
func (c *Client) DecideRun(ctx context.Context, workflowID, runID string, d contract.Decision) (contract.DecideResult, error) {
	var out contract.DecideResult
	if err := checkDecision(c.dc, d); err != nil {
		return out, err
	}
	h, err := c.tc.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		RunID:        runID,
		UpdateName:   contract.UpdateDecide,
		UpdateID:     d.ApprovalID,
		Args:         []any{d},
		WaitForStage: tclient.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return out, fmt.Errorf("client: decide on %s: %w", workflowID, err)
	}
	if err := h.Get(ctx, &out); err != nil {
		return out, fmt.Errorf("client: decide on %s: %w", workflowID, err)
	}
	return out, nil
}

// Result waits for the run to end and returns its result, or its typed error: errors.As finds
// *guard.ApprovalDenied, *guard.ToolUsageError, *guard.ConfigError or *guard.IntegrationError.
func (c *Client) Result(ctx context.Context, workflowID string) (guard.Result, error) {
	return c.resultOf(ctx, workflowID, "")
}

// resultOf is Result for run runID of workflowID (empty: its current run, and the runs it
// continues as).
func (c *Client) resultOf(ctx context.Context, workflowID, runID string) (guard.Result, error) {
	res, run, err := workflowResult[guard.Result](ctx, c, workflowID, runID, workflowID)
	if err != nil {
		return res, err
	}
	if runID == "" {
		runID = run.GetRunID()
	}
	return res, c.verifyResultOf(ctx, workflowID, runID, res, c.hosts)
}
