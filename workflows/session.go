package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// Timeouts of the Session workflow's activities that no setting gives.
const (
	// openTimeout bounds SessionOpen (creating and starting the sandbox).
	openTimeout = 5 * time.Minute
	// hostScheduleToStart bounds how long a hold or a cell waits in the host's task queue: only
	// that host polls it, so past it the host is gone.
	hostScheduleToStart = time.Minute
	// cellClaimMargin is added to a cell's StartToClose for its claim in the history (which can
	// wait for the claim to show).
	cellClaimMargin = 30 * time.Second
	// holdMargin is added to the session's lifetime and a cell's longest run for the hold's
	// StartToClose.
	holdMargin = 5 * time.Minute
)

// session is the state of one Session run, shared by its handlers and its main coroutine
// (workflow coroutines never run at the same time).
type session struct {
	status          contract.SessionStatus
	checked         guard.CheckedSession
	approvalTimeout time.Duration
	opts            contract.RunOptions
	// desk takes the cells' decisions (desk.go), a seat a cell.
	desk desk
	// notify is how cells' waits are notified (nil: not at all; see notifyPlan).
	notify *contract.NotifyOptions

	cells   []guard.Cell // every submitted cell, by index-1
	ballots []ballot     // each cell's decisions, by index-1
	// current is the index of the cell that waits or runs (0: none); submitting is set while a
	// submitted cell is being checked.
	current    int
	submitting bool
	// submittingID is the request id of the cell being checked (empty: none given).
	submittingID string
	// lastActive is when the last cell ended (or the session opened): the idle timeout counts
	// from it while no cell waits or runs.
	lastActive time.Time
	// wake counts changes the main loop must look at.
	wake int

	// hosts are the sandbox hosts' keys the check recorded (nil: none); lastReceipt is the hash
	// of the last cell's receipt, which the next cell's must chain to (receipt.go).
	hosts       *receipt.Hosts
	lastReceipt string

	// finalCellBytes memoizes the encoded size of each cell's status once it is final (0: not
	// yet), so the status budget re-encodes only the cells that can still change: a submit's
	// work stays bounded however large earlier cells' outputs were. It is filled as each cell
	// ends (endCell), in the task that ended it, replays included: a submit after a replay (the
	// worker restarted, or evicted the session from its cache) would otherwise encode every
	// cell at once, which for a status near its 2 MB budget took past the SDK's 1 s deadlock
	// detector on a loaded host.
	finalCellBytes []int

	closeRequested bool
	closeReason    string
	holdEnded      bool
	holdErr        error
	reholds        int // holds scheduled again after a heartbeat timeout (holdAgain)
	// stopCell cancels the running cell's activity (nil while no cell runs): cancelCell.
	stopCell workflow.CancelFunc
	ended    bool
	// cellClock holds the times of the current cell's phases (phases.go).
	cellClock phaseClock
}

// Session opens one sandbox for one task and runs the cells an orchestrator submits in it, each
// only after its own signed decision and at most once. See the package documentation.
func Session(ctx workflow.Context, in contract.SessionInput) (contract.SessionResult, error) {
	info := workflow.GetInfo(ctx)
	r := &session{status: contract.SessionStatus{State: contract.SessionChecking,
		WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, Cells: []contract.CellStatus{}}}
	if err := r.setHandlers(ctx); err != nil {
		return contract.SessionResult{}, err
	}

	// 1. Check.
	check, err := r.check(ctx, in)
	if err != nil {
		return contract.SessionResult{}, r.fail(ctx, contract.EndError, err)
	}
	r.checked = check.Session
	r.desk.reviewers = check.Reviewers
	_, r.notify = notifyPlan(ctx, check.Notify)
	r.hosts = check.Hosts
	r.desk.statementVersion = max(check.StatementVersion, approval.StatementVersion)
	r.approvalTimeout = check.ApprovalTimeout
	r.opts = check.Run
	r.status.StatementVersion = r.desk.statementVersion
	r.status.Settings = r.checked.Summary()
	r.status.Chain = guard.ChainStart(r.checked.Digest)
	r.startCellQuorum(ctx, check)

	// 2. Announce, and open the sandbox.
	if err := r.setState(ctx, contract.SessionOpening, r.announced()...); err != nil {
		return contract.SessionResult{}, err
	}
	opened, err := r.open(ctx, sandboxQueue(contract.Input{SandboxTaskQueue: in.SandboxTaskQueue}, r.opts, info.TaskQueueName))
	if err != nil {
		if ctx.Err() != nil {
			return contract.SessionResult{}, r.cancelled(ctx, err)
		}
		return contract.SessionResult{}, r.fail(ctx, contract.EndError, err)
	}
	r.status.SandboxTaskQueue = opened.HostTaskQueue
	r.status.SandboxID = opened.SandboxID

	// 3. Hold the sandbox for the session's life: a lost host or sandbox ends the hold.
	holdCtx, cancelHold := workflow.WithCancel(ctx)
	holdCtx = workflow.WithActivityOptions(holdCtx, workflow.ActivityOptions{
		TaskQueue:              opened.HostTaskQueue,
		ScheduleToStartTimeout: hostScheduleToStart,
		StartToCloseTimeout:    r.checked.Lifetime + r.checked.Limits.Timeout + r.opts.Grace + r.opts.ReportMargin + holdMargin,
		HeartbeatTimeout:       r.opts.HeartbeatTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		WaitForCancellation:    true,
	})
	hold := workflow.ExecuteActivity(holdCtx, acts.SessionHold, contract.SessionHoldInput{SandboxID: opened.SandboxID})
	workflow.Go(ctx, func(gctx workflow.Context) {
		for {
			err := hold.Get(gctx, nil)
			if !r.holdAgain(gctx, holdCtx, err) {
				r.holdEnded, r.holdErr = true, err
				r.wake++
				return
			}
			r.reholds++
			workflow.GetLogger(gctx).Warn("workflows: the session's hold timed out; holding the sandbox again", "error", err.Error(), "holds", r.reholds+1)
			hold = workflow.ExecuteActivity(holdCtx, acts.SessionHold, contract.SessionHoldInput{SandboxID: opened.SandboxID})
		}
	})

	now := workflow.Now(ctx)
	r.lastActive = now
	r.status.Opened = now
	r.status.Deadline = now.Add(r.checked.Lifetime)
	if err := r.setState(ctx, contract.SessionOpen); err != nil {
		return contract.SessionResult{}, err
	}

	// 4. Serve cells until the session ends.
	end, endErr := r.serve(ctx)
	return r.finish(ctx, end, endErr, cancelHold)
}

// serve runs the session's loop: it returns why the session ended, and the error that ended
// it, if any.
func (r *session) serve(ctx workflow.Context) (string, error) {
	for {
		now := workflow.Now(ctx)
		switch {
		case ctx.Err() != nil:
			return contract.EndCanceled, ctx.Err()
		case r.holdEnded:
			return contract.EndLost, r.lostError(r.holdErr)
		case r.closeRequested && !r.running():
			return contract.EndClosed, nil
		case !now.Before(r.status.Deadline) && !r.running():
			return contract.EndLifetime, nil
		}
		if r.current != 0 && r.cell().State == contract.StatusAwaitingApproval && !now.Before(r.cell().ApprovalDeadline) {
			r.endCell(ctx, contract.StatusExpired, "no decision within the approval timeout of "+r.approvalTimeout.String())
			continue
		}
		if r.current != 0 && r.cell().State == contract.StatusRunning {
			if err := r.runCell(ctx); err != nil {
				if ctx.Err() != nil {
					return contract.EndCanceled, ctx.Err()
				}
				var lost *guard.SandboxLost
				if errors.As(err, &lost) {
					return contract.EndLost, err
				}
				return contract.EndError, err
			}
			continue
		}
		if r.current == 0 && !r.submitting {
			if len(r.cells) >= r.checked.MaxCells {
				return contract.EndMaxCells, nil
			}
			if !now.Before(r.idleDeadline()) {
				return contract.EndIdle, nil
			}
		}
		// Sleep until the next deadline or a change.
		next := r.status.Deadline
		if r.current != 0 {
			next = earliest(next, r.cell().ApprovalDeadline)
		} else if !r.submitting {
			next = earliest(next, r.idleDeadline())
		}
		r.status.IdleDeadline = time.Time{}
		if r.current == 0 && !r.submitting {
			r.status.IdleDeadline = r.idleDeadline()
		}
		seen := r.wake
		if _, err := workflow.AwaitWithTimeout(ctx, next.Sub(now), func() bool { return r.wake != seen }); err != nil {
			return contract.EndCanceled, err
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (r *session) idleDeadline() time.Time { return r.lastActive.Add(r.checked.IdleTimeout) }

// running reports whether a cell is approved and running.
func (r *session) running() bool {
	return r.current != 0 && r.cell().State == contract.StatusRunning
}

// cell is the status of the current cell.
func (r *session) cell() *contract.CellStatus { return &r.status.Cells[r.current-1] }

// finish ends the session: a waiting cell is dropped, the hold is cancelled and awaited (the
// host removes the sandbox), and the result or the error is returned.
func (r *session) finish(ctx workflow.Context, end string, endErr error, cancelHold workflow.CancelFunc) (contract.SessionResult, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if r.current != 0 && !r.cell().Final() {
		r.endCell(dctx, contract.CellDropped, "the session ended ("+end+") before the cell ran")
	}
	r.status.End = end
	r.status.IdleDeadline = time.Time{}
	if err := r.setState(dctx, contract.SessionClosing); err != nil {
		return contract.SessionResult{}, err
	}
	cancelHold()
	_ = workflow.Await(dctx, func() bool { return r.holdEnded })
	r.ended = true
	state := contract.SessionClosed
	if endErr != nil && end != contract.EndCanceled {
		state = contract.SessionError
		r.status.Error = endErr.Error()
	}
	if err := r.setState(dctx, state); err != nil {
		return contract.SessionResult{}, err
	}
	_ = workflow.Await(dctx, func() bool { return workflow.AllHandlersFinished(dctx) })
	switch {
	case end == contract.EndCanceled:
		return contract.SessionResult{}, endErr
	case endErr != nil:
		return contract.SessionResult{}, contract.ToFailure(endErr)
	}
	return contract.SessionResult{End: end, SettingsDigest: r.checked.Digest, Chain: r.status.Chain, Cells: r.status.Cells}, nil
}

// sessionReholdChange marks histories whose session holds its sandbox again after a hold's
// heartbeat timeout; before it, such a timeout ended the session SandboxLost.
const sessionReholdChange = "session-rehold-v1"

// maxReholds bounds how many times a session holds its sandbox again.
const maxReholds = 20

// holdAgain reports whether a hold that ended with err is followed by another: only when the
// server timed it out for missing heartbeats (a cut connection, a loaded server or worker: the
// host and its sandbox may be alive, and the host keeps the sandbox for the next hold), the
// session still holds it, and fewer than maxReholds holds were lost. A host that no longer keeps
// the sandbox refuses the next hold with a SandboxLost; a host that is gone never takes it.
func (r *session) holdAgain(ctx, holdCtx workflow.Context, err error) bool {
	if err == nil || holdCtx.Err() != nil || r.ended || r.reholds >= maxReholds ||
		!timedOut(err, enumspb.TIMEOUT_TYPE_HEARTBEAT) {
		return false
	}
	return workflow.GetVersion(ctx, sessionReholdChange, workflow.DefaultVersion, 1) != workflow.DefaultVersion
}

// lostError is the SandboxLost that ends a session whose hold ended with err.
func (r *session) lostError(err error) error {
	var lost *guard.SandboxLost
	if gerr := contract.FromFailure(err); errors.As(gerr, &lost) {
		return lost
	}
	msg := "the hold on the sandbox ended"
	if err != nil {
		msg += ": " + err.Error()
	}
	return &guard.SandboxLost{Msg: fmt.Sprintf("sandbox %s on %s: %s", r.status.SandboxID, r.status.SandboxTaskQueue, msg)}
}

// setHandlers registers the status query, the four updates and the claims' sink.
func (r *session) setHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, contract.QuerySessionStatus, func() (contract.SessionStatus, error) { return r.status, nil }); err != nil {
		return fmt.Errorf("workflows: set query handler: %w", err)
	}
	for _, u := range []struct {
		name      string
		handler   any
		validator any
	}{
		{contract.UpdateSubmitCell, r.submit, r.validateSubmit},
		{contract.UpdateDecideCell, r.decide, r.validateDecide},
		{contract.UpdateAwaitCell, r.await, r.validateAwait},
		{contract.UpdateCloseSession, r.close, r.validateClose},
		{contract.UpdateCancelCell, r.cancelCell, r.validateCancelCell},
	} {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name, u.handler, workflow.UpdateHandlerOptions{Validator: u.validator}); err != nil {
			return fmt.Errorf("workflows: set update handler %s: %w", u.name, err)
		}
	}
	claims := workflow.GetSignalChannel(ctx, contract.SignalSandboxClaim)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for claims.Receive(ctx, nil) {
		}
	})
	return nil
}

// submitted returns, for a request whose RequestID names a submitted cell, that cell's answer
// (ok), or why the id cannot be used again (another cell's code or language under the same id).
// A request id that names no cell, or none, gives !ok and no error.
func (r *session) submitted(req contract.CellRequest) (out contract.CellSubmitted, ok bool, err error) {
	if req.RequestID == "" {
		return out, false, nil
	}
	for _, st := range r.status.Cells {
		if st.RequestID != req.RequestID {
			continue
		}
		if st.Code != req.Code || req.Language != "" && req.Language != st.Language || guard.Lock(st.Packages) != lockOf(req.Packages) {
			return out, false, &guard.ToolUsageError{Msg: fmt.Sprintf("submit cell: request id %q was used for cell %d, whose code, language or packages differ; give a new request id for a new cell", req.RequestID, st.Cell)}
		}
		return contract.CellSubmitted{Cell: st.Cell, CodeDigest: st.CodeDigest, Chain: st.Chain, Digest: st.Digest, ApprovalDeadline: st.ApprovalDeadline}, true, nil
	}
	return out, false, nil
}

// lockOf is a cell lock written as guard.Lock writes it, to compare with a cell's packages; a
// lock that does not parse is returned as it is (it matches no cell's).
func lockOf(lock string) string {
	if lock == "" {
		return ""
	}
	pkgs, err := guard.ParseLock(lock)
	if err != nil {
		return lock
	}
	return guard.Lock(pkgs)
}

// submitRefusal says why a cell cannot be submitted now, or nil.
func (r *session) submitRefusal(req contract.CellRequest) error {
	switch {
	case len(req.RequestID) > contract.MaxRequestIDBytes:
		return &guard.ToolUsageError{Msg: fmt.Sprintf("submit cell: the request id has %d bytes, past %d", len(req.RequestID), contract.MaxRequestIDBytes)}
	case r.ended || r.status.State != contract.SessionOpen || r.closeRequested:
		return &guard.ToolUsageError{Msg: "submit cell: the session is " + r.status.State + ", not open"}
	case r.current != 0 || r.submitting:
		return &guard.ToolUsageError{Msg: fmt.Sprintf("submit cell: cell %d waits or runs; submit the next cell when it has ended", max(r.current, len(r.cells)))}
	case len(r.cells) >= r.checked.MaxCells:
		return &guard.ToolUsageError{Msg: fmt.Sprintf("submit cell: the session's %d cells are used", r.checked.MaxCells)}
	case req.Code == "":
		return &guard.ToolUsageError{Msg: "submit cell: code is empty"}
	case req.Retries != 0:
		return r.retriesRefusal(req.Retries)
	}
	return nil
}

// retriesRefusal says why a cell cannot say it retries cell n: n must be an earlier cell that
// ended without succeeding.
func (r *session) retriesRefusal(n int) error {
	if n < 1 || n > len(r.status.Cells) {
		return &guard.ToolUsageError{Msg: fmt.Sprintf("submit cell: retries %d: the session has no cell %d", n, n)}
	}
	if st := r.status.Cells[n-1]; !st.Final() || st.State == contract.StatusSucceeded {
		return &guard.ToolUsageError{Msg: fmt.Sprintf("submit cell: retries %d: cell %d %s; a cell retries one that ended without succeeding", n, n, st.State)}
	}
	return nil
}

// validateSubmit refuses what submitRefusal refuses, and a cell that could put the session's
// status past statusBudgetBytes (the status query, every reviewer door's read, and the session's
// result carry every cell with its result, in one payload under Temporal's 2 MiB limit). The
// budget is checked here only, where no history is written: a replayed submit is not checked
// again.
func (r *session) validateSubmit(req contract.CellRequest) error {
	if _, ok, err := r.submitted(req); ok || err != nil {
		return contract.ToFailure(err)
	}
	if r.submitting && req.RequestID != "" && req.RequestID == r.submittingID {
		return nil // the same request while it is checked: its handler waits for it
	}
	if err := r.submitRefusal(req); err != nil {
		return contract.ToFailure(err)
	}
	if err := r.writtenRefusal(); err != nil {
		return contract.ToFailure(err)
	}
	return contract.ToFailure(r.budgetRefusal(req))
}

// writtenRefusal refuses every cell once an earlier cell has left in /work a file that a cell
// could import or run as other code than every view draws (pysource.CheckWrittenCode: bytecode,
// a coding declaration other than UTF-8, a module whose indentation reads two ways), as its
// result reports it; a later cell's version of the same file replaces it. Nothing says such a
// file was removed since (results list what a cell created or changed), so the session takes no
// more cells. Checked in the validator only, like the budget: a replayed submit is not checked
// again.
func (r *session) writtenRefusal() error {
	seen := map[string]bool{} // names a later cell's result reported
	for i := len(r.status.Cells) - 1; i >= 0; i-- {
		st := r.status.Cells[i]
		if st.Result == nil {
			continue
		}
		for _, f := range st.Result.Files {
			if seen[f.Name] {
				continue
			}
			seen[f.Name] = true
			if err := pysource.CheckWrittenCode(f.Name, f.Content); err != nil {
				return &guard.ToolUsageError{Msg: fmt.Sprintf("submit cell: cell %d left in /work a file a cell could import or run as other code than the views draw: %v; "+
					"this session takes no more cells: close it and open another, with the files the next cell needs as input files", st.Cell, err)}
			}
		}
	}
	return nil
}

// statusBudgetBytes bounds the JSON of a session's status: under the server's 2 MiB payload
// limit (BlobSizeLimitError's default, which the worker applies to a query's answer too), with
// room for a payload codec's envelope. It is above guard.MaxEncodedPayloadBytes, the most one
// result may take, so a session whose policy allows that still takes its first cell.
const statusBudgetBytes = 2_000_000

// cellStatusOverheadBytes bounds a cell's status without its code and result (field names,
// digests, chain, times, reviewer, metadata kept small by the check).
const cellStatusOverheadBytes = 4096

// budgetRefusal says why req's cell could put the status past statusBudgetBytes, or nil: the
// status as it is now, plus the cell's code and metadata as encoded and the worst result the
// session's limits let through.
func (r *session) budgetRefusal(req contract.CellRequest) error {
	size, err := r.statusBytes()
	if err != nil {
		return err
	}
	code, err := json.Marshal(req.Code)
	if err != nil {
		return fmt.Errorf("workflows: encode the cell's code: %w", err)
	}
	meta, err := json.Marshal(req.Metadata)
	if err != nil {
		return fmt.Errorf("workflows: encode the cell's metadata: %w", err)
	}
	// A cell's packages, as its status encodes them, take at most twice its lock's bytes (each
	// hash quoted, each package's keys).
	next := int64(cellStatusOverheadBytes+r.quorumBytes()+len(code)+len(meta)+2*len(req.Packages)) + guard.WorstResultEncodingBytes(r.checked.Limits)
	if int64(size)+next > statusBudgetBytes {
		return &guard.ToolUsageError{Msg: fmt.Sprintf("submit cell: the session's status holds %d bytes and one more cell could add %d, past the %d bytes a status answer may carry; close this session and open another (lower output and file limits leave room for more cells)",
			size, next, statusBudgetBytes)}
	}
	return nil
}

// statusBytes is the size of the status's JSON: the status without its cells, plus each cell's
// encoding and its separator. A final cell's size is encoded once and memoized.
func (r *session) statusBytes() (int, error) {
	bare := r.status
	bare.Cells = nil
	b, err := json.Marshal(bare)
	if err != nil {
		return 0, fmt.Errorf("workflows: encode the session status: %w", err)
	}
	size := len(b) + 1 // "null" becomes "[]" plus the cells and their commas
	for len(r.finalCellBytes) < len(r.status.Cells) {
		r.finalCellBytes = append(r.finalCellBytes, 0)
	}
	for i, st := range r.status.Cells {
		n := r.finalCellBytes[i]
		if n == 0 {
			cb, err := json.Marshal(st)
			if err != nil {
				return 0, fmt.Errorf("workflows: encode cell %d's status: %w", i+1, err)
			}
			n = len(cb) + 1
			if st.Final() {
				r.finalCellBytes[i] = n
			}
		}
		size += n
	}
	return size, nil
}

// memoCellBytes records the encoded size of st, a cell that has just ended (statusBytes).
func (r *session) memoCellBytes(st *contract.CellStatus) {
	for len(r.finalCellBytes) < st.Cell {
		r.finalCellBytes = append(r.finalCellBytes, 0)
	}
	// encoding/json sorts map keys: the size is the same on every replay.
	cb, err := json.Marshal(st) //workflowcheck:ignore
	if err == nil && st.Final() {
		r.finalCellBytes[st.Cell-1] = len(cb) + 1
	}
}

// submit checks the cell in a local activity, gives it the next index, and starts its wait for a
// decision.
func (r *session) submit(ctx workflow.Context, req contract.CellRequest) (contract.CellSubmitted, error) {
	if r.submitting && req.RequestID != "" && req.RequestID == r.submittingID {
		// A retry of the request being checked: it gets that request's cell, once it has one.
		if err := workflow.Await(ctx, func() bool { return !r.submitting }); err != nil {
			return contract.CellSubmitted{}, err
		}
	}
	if out, ok, err := r.submitted(req); ok || err != nil {
		return out, contract.ToFailure(err)
	}
	if err := r.submitRefusal(req); err != nil {
		return contract.CellSubmitted{}, contract.ToFailure(err)
	}
	r.submitting, r.submittingID = true, req.RequestID
	r.wake++
	begun := workflow.Now(ctx)
	index := len(r.cells) + 1
	cell, err := checkLocally[guard.Cell](ctx, acts.SessionCellCheck, contract.CellCheckInput{
		Session: r.checked, Index: index, Language: req.Language, Code: req.Code,
		Packages: req.Packages, EarlierPackages: r.earlierPackages(req)}, "cell")
	r.submitting, r.submittingID = false, ""
	r.wake++
	if err != nil {
		return contract.CellSubmitted{}, contract.ToFailure(err) // an untyped error unchanged
	}
	if r.ended || r.status.State != contract.SessionOpen || r.closeRequested {
		return contract.CellSubmitted{}, contract.ToFailure(&guard.ToolUsageError{Msg: "submit cell: the session ended while the cell was checked"})
	}
	now := workflow.Now(ctx)
	r.cellClock = phaseClock{begun: begun, checked: now}
	digest := guard.CellDigest(r.checked.Digest, cell.Index, cell.CodeDigest, r.status.Chain)
	st := contract.CellStatus{
		Cell: cell.Index, Language: cell.Language, Code: cell.Code, CodeBytes: len(cell.Code), CodeDigest: cell.CodeDigest,
		Packages: cell.Packages, Chain: r.status.Chain, Digest: digest, State: contract.StatusAwaitingApproval, Metadata: req.Metadata, RequestID: req.RequestID, Retries: req.Retries,
		Submitted: now, DecisionWait: contract.DecisionWait{ApprovalDeadline: now.Add(r.approvalTimeout)},
		SuspiciousCharacters: pysource.SuspiciousCharacters(cell.Code),
		Phases:               r.cellClock.phases(time.Time{}, nil),
	}
	r.cells = append(r.cells, cell)
	r.ballots = append(r.ballots, ballot{})
	if r.desk.quorumCounted() {
		st.Quorum = r.desk.quorum
	}
	r.status.Cells = append(r.status.Cells, st)
	r.current = cell.Index
	r.status.IdleDeadline = time.Time{}
	if err := r.setState(ctx, contract.SessionOpen, contract.DigestKey.ValueSet(digest)); err != nil {
		return contract.CellSubmitted{}, err
	}
	r.event(ctx, contract.EventApprovalRequested, "cell", cell.Index, "digest", digest, "language", cell.Language,
		"code_bytes", len(cell.Code), "approval_timeout", r.approvalTimeout.String())
	r.notifyCell(ctx, st)
	return contract.CellSubmitted{Cell: cell.Index, CodeDigest: cell.CodeDigest, Chain: st.Chain, Digest: digest, ApprovalDeadline: st.ApprovalDeadline}, nil
}

// earlierPackages are the packages earlier cells that ran brought to the session, which a cell
// that brings packages may add to but not change (none for a cell without packages).
func (r *session) earlierPackages(req contract.CellRequest) []guard.Package {
	if req.Packages == "" {
		return nil
	}
	var out []guard.Package
	for i, c := range r.cells {
		if len(c.Packages) == 0 || r.status.Cells[i].Result == nil {
			continue
		}
		for _, p := range c.Packages {
			if !slices.ContainsFunc(out, func(q guard.Package) bool { return q.Name == p.Name }) {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b guard.Package) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// seat is cell's seat at the desk, as it is now; a cell the session does not have gets an empty
// ballot of its own and is not waiting. A cell takes no edits and answers a decision sent with
// Wait once it has ended, with its status.
func (r *session) seat(cell int) seat {
	s := seat{what: "cell", of: fmt.Sprintf(" for cell %d", cell), tag: []any{"cell", cell},
		queue: r.status.SandboxTaskQueue, event: r.event}
	if cell < 1 || cell > len(r.cells) {
		s.ballot, s.shown = &ballot{}, &contract.DecisionWait{}
		s.notWaiting = fmt.Sprintf("not waiting: the session has no cell %d", cell)
		return s
	}
	st := &r.status.Cells[cell-1]
	s.digest = st.Digest
	s.ballot, s.shown = &r.ballots[cell-1], &st.DecisionWait
	if cell != r.current || st.State != contract.StatusAwaitingApproval {
		s.notWaiting = fmt.Sprintf("not waiting: cell %d is %s", cell, st.State)
	}
	s.end = endAnswer{change: decideWaitChange,
		ended: func() bool { return r.status.Cells[cell-1].Final() },
		answer: func(res *contract.DecideResult) {
			st := r.status.Cells[cell-1]
			res.CellStatus = &st
		}}
	return s
}

// validateDecide is the update's validator (desk.validate); it also refuses an edit
// (cellEditRefusal).
func (r *session) validateDecide(ctx workflow.Context, cd contract.CellDecision) error {
	s := r.seat(cd.Cell)
	if rej := cellEditRefusal(cd); rej != nil {
		r.desk.rejected(ctx, s, cd.Decision, contract.ViaUpdate, rej)
		return rej.Failure()
	}
	return r.desk.validate(ctx, s, cd.Decision)
}

// decide accepts a decision for the waiting cell (desk.decide). Once the decision is taken, a
// denied cell ends, and an approved one runs.
func (r *session) decide(ctx workflow.Context, cd contract.CellDecision) (contract.DecideResult, error) {
	s := r.seat(cd.Cell)
	res, rej := r.desk.decide(ctx, s, cd.Decision)
	if rej != nil {
		r.status.RejectedDecisions++
		r.status.LastRejection = rej.Error()
		return contract.DecideResult{}, rej.Failure()
	}
	if res.State == contract.StatusAwaitingApproval {
		return res, nil // the cell waits for more approvals: its decision is not made yet
	}
	d := *s.decision // the first approval, under a quorum
	if err := r.desk.taken(ctx, s, d); err != nil {
		return contract.DecideResult{}, err
	}
	if !d.Approve {
		r.endCell(ctx, contract.StatusDenied, "")
		return r.desk.answerWhenEnded(ctx, s, cd.Wait, res)
	}
	r.status.Cells[cd.Cell-1].State = contract.StatusRunning
	r.wake++
	if err := r.setState(ctx, contract.SessionOpen); err != nil {
		return contract.DecideResult{}, err
	}
	return r.desk.answerWhenEnded(ctx, s, cd.Wait, res)
}

// decideWaitChange is the change id of decide-cell's wait: a decision sent with Wait is answered
// once its cell has ended. A history from before it answered such a decision at once.
const decideWaitChange = "decide-wait-v1"

// endCell gives the current cell its final state (and error text, if any) and lets the next
// cell come.
func (r *session) endCell(ctx workflow.Context, state, why string) {
	st := r.cell()
	st.State = state
	st.Error = why
	st.Phases = r.cellClock.phases(workflow.Now(ctx), st.Result)
	r.memoCellBytes(st)
	if state == contract.StatusExpired {
		r.event(ctx, contract.EventApprovalExpired, "cell", st.Cell, "approval_timeout", r.approvalTimeout.String())
	}
	r.current = 0
	r.lastActive = workflow.Now(ctx)
	r.wake++
	if r.ended {
		return
	}
	if err := r.setState(ctx, r.status.State, contract.DigestKey.ValueUnset()); err != nil {
		workflow.GetLogger(ctx).Warn("workflows: set search attributes", "error", err.Error())
	}
}

// runCell runs the approved current cell on the host. A refusal by the host or a failure from
// before the cell could start ends the cell in StatusError and the session goes on; a lost
// sandbox (or host) or a failure whose cell may have started is returned and ends the session.
func (r *session) runCell(ctx workflow.Context) error {
	st := r.cell()
	if st.Cancel != nil {
		// Cancelled between its approval and its run: nothing was scheduled, nothing ran.
		r.endCell(ctx, contract.StatusCancelled, "cancelled by "+st.Cancel.By+" before it ran")
		return nil
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              r.status.SandboxTaskQueue,
		ScheduleToStartTimeout: hostScheduleToStart,
		StartToCloseTimeout:    r.checked.Limits.Timeout + r.opts.Grace + r.opts.ReportMargin + cellClaimMargin,
		HeartbeatTimeout:       r.opts.HeartbeatTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		WaitForCancellation:    true,
	})
	actx, r.stopCell = workflow.WithCancel(actx)
	r.cellClock.schedule(ctx)
	st.Phases = r.cellClock.phases(time.Time{}, nil)
	var res guard.Result
	err := workflow.ExecuteActivity(actx, acts.SessionCell, r.cellRunInput()).Get(actx, &res)
	r.stopCell = nil
	if err == nil {
		if rerr := r.checkCellReceipt(ctx, res, st); rerr != nil {
			r.endCell(ctx, contract.StatusError, rerr.Error())
			return rerr // what the sandbox holds now is unknown
		}
		r.cellResult(ctx, st, res)
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	if lost, due := r.cellLateDue(ctx, err); due { // celllate.go
		late, ok, wait := r.awaitCellLate(ctx, lost)
		if ok {
			r.cellResult(ctx, st, late)
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		err = fmt.Errorf("no late result within %s: %w", wait, err)
	}
	if st.Cancel != nil {
		ended, cause := r.cancelledCellFailure(err)
		if ended {
			r.endCell(ctx, contract.StatusCancelled, "cancelled by "+st.Cancel.By+" before its code started")
			return nil
		}
		r.endCell(ctx, contract.StatusError, cause.Error())
		return cause
	}
	cause := r.cellFailure(err)
	r.endCell(ctx, contract.StatusError, cause.Error())
	var (
		lost *guard.SandboxLost
		ie   *guard.IntegrationError
	)
	switch {
	case r.holdEnded:
		return r.lostError(r.holdErr)
	case errors.As(cause, &lost):
		return cause
	case errors.As(cause, &ie) && ie.CodeMayHaveStarted:
		return cause // the sandbox's state is unknown
	}
	return nil // refused or failed before the cell could start: nothing ran
}

// cellResult makes res, whose receipt the workflow checked, the result of cell st, and chains
// the session to it.
func (r *session) cellResult(ctx workflow.Context, st *contract.CellStatus, res guard.Result) {
	rd := guard.ResultDigest(res)
	st.Result = &res
	st.ResultDigest = rd
	r.status.Chain = guard.ChainNext(st.Chain, st.Digest, rd)
	r.endCell(ctx, contract.FinalState(res.Outcome), "")
}

// cellFailure is the typed error of a failed cell activity: a timeout (the host or its sandbox
// went away while the cell ran or before it started) is a SandboxLost; an untyped failure is an
// IntegrationError whose cell may have started.
func (r *session) cellFailure(err error) error {
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		what := "did not answer while the cell ran"
		if te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			what = "did not take the cell"
		}
		return &guard.SandboxLost{Msg: fmt.Sprintf("the host of sandbox %s (task queue %s) %s: %v", r.status.SandboxID, r.status.SandboxTaskQueue, what, err)}
	}
	gerr := contract.FromFailure(err)
	if guard.TypeOf(gerr) == "" {
		return &guard.IntegrationError{Op: "run cell", Err: fmt.Errorf("outcome unknown; the approval was used: %w", err), CodeMayHaveStarted: true}
	}
	return gerr
}

func (r *session) validateAwait(a contract.AwaitCell) error {
	if a.Cell < 1 || a.Cell > len(r.cells) {
		return contract.ToFailure(&guard.ToolUsageError{Msg: fmt.Sprintf("await cell: the session has no cell %d", a.Cell)})
	}
	return nil
}

// await waits until the cell has ended and returns its status.
func (r *session) await(ctx workflow.Context, a contract.AwaitCell) (contract.CellStatus, error) {
	if err := r.validateAwait(a); err != nil {
		return contract.CellStatus{}, err
	}
	if err := workflow.Await(ctx, func() bool { return r.status.Cells[a.Cell-1].Final() }); err != nil {
		return contract.CellStatus{}, err
	}
	return r.status.Cells[a.Cell-1], nil
}

func (r *session) validateClose(contract.CloseSession) error {
	if r.ended {
		return contract.ToFailure(&guard.ToolUsageError{Msg: "close session: the session has ended"})
	}
	return nil
}

// close asks for the session's end and returns its status once it has ended.
func (r *session) close(ctx workflow.Context, c contract.CloseSession) (contract.SessionStatus, error) {
	if !r.closeRequested {
		r.closeRequested, r.closeReason = true, c.Reason
		r.wake++
	}
	if err := workflow.Await(ctx, func() bool { return r.ended }); err != nil {
		return contract.SessionStatus{}, err
	}
	return r.status, nil
}

// check applies the worker's policy in a local activity (checkLocally).
func (r *session) check(ctx workflow.Context, in contract.SessionInput) (contract.SessionCheckResult, error) {
	return checkLocally[contract.SessionCheckResult](ctx, acts.SessionCheck, contract.SessionCheckInput{Request: in.Request}, "session")
}

// open schedules SessionOpen on queue; a failure from before any sandbox started
// (guard.Retryable) is retried with backoff by scheduling a fresh activity, as RunCode's run.
func (r *session) open(ctx workflow.Context, queue string) (contract.SessionOpened, error) {
	opts := r.opts
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: opts.ScheduleToStartTimeout,
		StartToCloseTimeout:    openTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		WaitForCancellation:    true,
	})
	backoff := opts.StartBackoff
	for attempt := 1; ; attempt++ {
		var opened contract.SessionOpened
		err := workflow.ExecuteActivity(ctx, acts.SessionOpen, contract.SessionOpenInput{Session: r.checked}).Get(ctx, &opened)
		if err == nil {
			return opened, nil
		}
		if ctx.Err() != nil {
			return opened, err
		}
		if timedOut(err, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START) {
			return opened, &guard.IntegrationError{Op: "open session", Err: fmt.Errorf("no sandbox worker took the session from task queue %s within %s: %w", queue, opts.ScheduleToStartTimeout, err)}
		}
		gerr := contract.FromFailure(err)
		switch {
		case guard.TypeOf(gerr) == "":
			return opened, &guard.IntegrationError{Op: "open session", Err: err}
		case !guard.Retryable(gerr):
			return opened, gerr
		case attempt >= opts.StartAttempts:
			return opened, &guard.IntegrationError{Op: fmt.Sprintf("open session: the backend failed before the sandbox started, %d times", attempt), Err: gerr}
		}
		var serr error
		if backoff, serr = startBackoff(ctx, opts, attempt, backoff, err, gerr, r.checked.Digest); serr != nil {
			return opened, serr
		}
	}
}

// announced is the search attributes the session sets as it opens: its languages, its backend
// and its conversation, if it names one. They go into one upsert, the same command with or
// without the conversation: replay matches an upsert by its kind, and the checked session comes
// from the recorded check.
func (r *session) announced() []temporal.SearchAttributeUpdate {
	attrs := []temporal.SearchAttributeUpdate{contract.LanguageKey.ValueSet(strings.Join(r.checked.Languages, ",")),
		contract.BackendKey.ValueSet(r.checked.Backend)}
	if r.checked.Conversation != "" {
		attrs = append(attrs, contract.ConversationKey.ValueSet(r.checked.Conversation))
	}
	if r.status.Rules != nil {
		// The policy's caps count sessions by agent (only checks with rules record Rules).
		attrs = append(attrs, contract.AgentKey.ValueSet(r.checked.Metadata.Agent))
	}
	return attrs
}

// setState records the session state in the status and the SandboxStatus search attribute
// (which a waiting or running cell overrides with its own state), with any other search
// attributes given.
func (r *session) setState(ctx workflow.Context, state string, more ...temporal.SearchAttributeUpdate) error {
	r.status.State = state
	attr := state
	if state == contract.SessionOpen && r.current != 0 {
		attr = r.cell().State
	}
	return upsertStatus(ctx, attr, more...)
}

// fail ends a session that never opened.
func (r *session) fail(ctx workflow.Context, end string, err error) error {
	r.status.End = end
	r.status.Error = err.Error()
	r.ended = true
	return failed(r.setState(ctx, contract.SessionError), err)
}

// cancelled ends a session cancelled before it opened.
func (r *session) cancelled(ctx workflow.Context, err error) error {
	r.status.End = contract.EndCanceled
	r.ended = true
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return cancelledWith(ctx, r.setState(dctx, contract.SessionClosed), err)
}

// event writes a workflow event (logEvent) of the session's settings digest; never code or
// output.
func (r *session) event(ctx workflow.Context, typ contract.EventType, kv ...any) {
	logEvent(ctx, typ, "settings_digest", r.checked.Digest, kv...)
}
