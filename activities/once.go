package activities

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/google/uuid"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// An approval runs code once. The workflow schedules one sandbox activity, and a fresh one only
// after a failure that says the code never started; but any namespace writer can poll the
// workflow task queue and answer a RunCode run's workflow tasks itself, scheduling SandboxRun as
// often as it likes with the run's genuine signed input, and can fail a running activity by its
// id, making it look like a failure from before the start. So the sandbox host, before anything
// starts, claims the approval in the run's history (a contract.SandboxClaim signal committing to
// a secret only it holds) and then reads the history (written by the server, in order):
//   - every SandboxRun scheduled before this one ended in a failure from before the code could
//     start: none is still waiting or running, none completed, timed out, was cancelled or
//     failed otherwise;
//   - every claim before its own was released, which only the host that made it can do (by
//     revealing the secret), and does only when its code did not start.
//
// The history is the one record every sandbox host shares, so this holds across hosts and
// restarts: a failure forged by id while the code runs leaves that host's claim unreleased.

// RunLog is a run's history, which the sandbox host reads and adds its claims to; a Temporal
// client is one.
type RunLog interface {
	HistoryReader
	WorkflowService() workflowservice.WorkflowServiceClient
}

// HistoryReader reads a run's history.
type HistoryReader interface {
	GetWorkflowHistory(ctx context.Context, workflowID, runID string, isLongPoll bool, filterType enumspb.HistoryEventFilterType) tclient.HistoryEventIterator
}

// historyReadTimeout bounds each history read and claim signal before a run.
const historyReadTimeout = 30 * time.Second

// claim is this host's claim on the approval of the run an activity belongs to.
type claim struct {
	info   activity.Info
	secret []byte
	msg    contract.SandboxClaim
}

// newClaim makes a claim with a fresh secret.
func newClaim(info activity.Info, approvalID string) *claim {
	secret := make([]byte, 32)
	rand.Read(secret) // never fails (crypto/rand)
	return &claim{info: info, secret: secret, msg: contract.SandboxClaim{
		RunID: info.WorkflowExecution.RunID, ApprovalID: approvalID, ActivityID: info.ActivityID, Commitment: commitment(secret)}}
}

// commitment is what a claim publishes of its secret.
func commitment(secret []byte) string {
	sum := sha256.Sum256(secret)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// hostIdentity is the identity on this host's claim signals.
var hostIdentity = func() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s sandbox host", os.Getpid(), host)
}()

// send adds the claim, or with release its release, to the run's history. The payload is plain
// JSON: a worker's payload codec does not apply to it.
func (c *claim) send(ctx context.Context, log RunLog, release bool) error {
	msg := c.msg
	if release {
		msg.Secret = hex.EncodeToString(c.secret)
	}
	input, err := converter.GetDefaultDataConverter().ToPayloads(msg)
	if err != nil {
		return err
	}
	return signalRun(ctx, log, c.info, contract.SignalSandboxClaim, input)
}

// signalRun sends the signal name with input to the run of the activity info names, waiting at
// most historyReadTimeout for the server's answer.
func signalRun(ctx context.Context, log RunLog, info activity.Info, name string, input *commonpb.Payloads) error {
	ctx, cancel := context.WithTimeout(ctx, historyReadTimeout)
	defer cancel()
	_, err := log.WorkflowService().SignalWorkflowExecution(ctx, &workflowservice.SignalWorkflowExecutionRequest{
		Namespace:         info.Namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: info.WorkflowExecution.ID, RunId: info.WorkflowExecution.RunID},
		SignalName:        name,
		Input:             input,
		Identity:          hostIdentity,
		RequestId:         uuid.NewString(),
	})
	return err
}

// release releases the claim after a failure from before the start (runErr), so that the
// workflow's fresh activity may use the approval. It returns runErr, saying so if the release
// failed: the fresh activity will then be refused.
func (c *claim) release(ctx context.Context, log RunLog, runErr error) error {
	err := c.send(context.WithoutCancel(ctx), log, true)
	if err == nil {
		return runErr
	}
	return &guard.IntegrationError{Op: "sandbox activity", Err: fmt.Errorf("%w (and its claim on the approval could not be released, so a fresh activity will refuse it: %v)", runErr, err)}
}

// claimApproval claims the approval approvalID, verified as v, for the activity info names (of
// cell index cell in a session; 0 for a run) and returns the claim, or an error when its code
// must not start: an ApprovalRefused when the approval may have been used, or when it lapsed
// (v.StillValid on this host's clock, after the history read, which can wait for the claim to
// show), a retryable IntegrationError when the claim could not be made or checked (a claim made
// is then released).
//
// A run's claim is read back from the history (firstUse). A cell's is not: the host keeps the
// session's only sandbox and its own record of it (the indexes it admitted, the approval ids it
// used, the chain over the results it returned), which the cell's admission checks before the
// claim (cellSubject), and a host that lost that record has lost the sandbox too (SandboxLost),
// unless a worker took the sandbox over with the record its spool kept (adoptsession.go).
// promela/session.pml proves a cell's at-most-once and its decision binding (S1, S2) from those
// checks alone, and that a cell starts only after its claim was recorded (S4): a signal the
// server acknowledged is durable, in the history at the latest when the workflow task in
// flight, if any, completes.
//
// before, when not nil, is called with the claim before it is sent (SandboxRun spools it there,
// so that a worker that adopts the run after this one died can release it: spool.go).
func claimApproval(ctx context.Context, log RunLog, info activity.Info, cell int, approvalID string, v validity, before func(*claim)) (*claim, error) {
	c := newClaim(info, approvalID)
	c.msg.Cell = cell
	if before != nil {
		before(c)
	}
	err := c.send(ctx, log, false)
	switch {
	case err != nil:
		err = &guard.IntegrationError{Op: "sandbox activity: claim the approval in the run's history", Err: err}
	case cell == 0:
		err = firstUse(ctx, log, info, c.msg.Commitment)
	}
	if err == nil {
		if lapsed := v.StillValid(time.Now()); lapsed != nil {
			err = refusal(lapsed)
		}
	}
	if err == nil {
		return c, nil
	}
	// The claim may stand (a signal can be recorded though its answer was lost): release it.
	if guard.Retryable(err) {
		return nil, c.release(ctx, log, err)
	}
	_ = c.send(context.WithoutCancel(ctx), log, true) // a refusal stays one whatever the release did
	return nil, err
}

// sandboxActivity is one SandboxRun scheduled in a run's history, and how it ended so far.
type sandboxActivity struct {
	id  string
	end string // one of the end* values
	// endAt is the index of the event that ended it (readRun counts every event).
	endAt int
}

const (
	endOpen       = "scheduled and not ended"
	endNotStarted = "failed before the code could start"
	endTimedOut   = "timed out"
)

// heldClaim is a claim in a run's history.
type heldClaim struct {
	activityID string
	commitment string
	released   bool
	// at is the index of the claim's event.
	at int
}

// notStarted reports whether activity r's code never started: it failed before it could, or the
// server timed it out with no claim of its own held that came before its end (none was made, or
// each was released by its secret, which only the claiming host, or the worker that adopted its
// spool, reveals, and only for code that never started). A claim of r that came after its end
// never let code start: its host reads its own activity open in the history that shows its
// claim (firstActivity), or starts nothing.
func (rec *runRecord) notStarted(r sandboxActivity) bool {
	switch r.end {
	case endNotStarted:
		return true
	case endTimedOut:
		for _, c := range rec.claims {
			if c.activityID == r.id && c.at < r.endAt && !c.released {
				return false
			}
		}
		return true
	}
	return false
}

// stale reports whether claim c came after the server timed its own activity out: its host
// started nothing with it (notStarted), and it holds nothing back.
func (rec *runRecord) stale(c heldClaim) bool {
	for _, r := range rec.runs {
		if r.id == c.activityID && r.end == endTimedOut && r.endAt < c.at {
			return true
		}
	}
	return false
}

// runRecord is what a run's history says of its sandbox activities and claims, in order.
type runRecord struct {
	runs   []sandboxActivity
	claims []heldClaim
	// at is the index of the event being read.
	at int
}

// claimVisibleWait bounds how long firstUse waits for the host's own claim to show in the
// history: a signal that arrives while a workflow task is in flight is held by the server until
// that task completes (or times out, after 10 s by default).
const claimVisibleWait = 15 * time.Second

// firstUse returns nil when nothing before the sandbox activity info names, holding the claim
// mine, may have used the approval: every SandboxRun scheduled before it and every claim before
// its own count; otherwise an ApprovalRefused naming what may have. It fails with a retryable
// IntegrationError (nothing started) when the history cannot be read or does not show the claim
// within claimVisibleWait.
func firstUse(ctx context.Context, h HistoryReader, info activity.Info, mine string) error {
	ctx, cancel := context.WithTimeout(ctx, historyReadTimeout)
	defer cancel()
	deadline := time.Now().Add(claimVisibleWait)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		rec, err := readRun(h.GetWorkflowHistory(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT), info.WorkflowExecution.RunID)
		if err != nil {
			return &guard.IntegrationError{Op: "sandbox activity: read the run's history", Err: err}
		}
		if err := rec.firstActivity(info.ActivityID); err != nil {
			return err
		}
		if rec.holds(mine) || time.Now().Add(wait).After(deadline) {
			return rec.firstClaim(mine)
		}
		select {
		case <-ctx.Done():
			return &guard.IntegrationError{Op: "sandbox activity: wait for its claim in the run's history", Err: ctx.Err()}
		case <-time.After(wait):
		}
	}
}

// holds reports whether the history shows the claim.
func (rec *runRecord) holds(commitment string) bool {
	for _, c := range rec.claims {
		if c.commitment == commitment {
			return true
		}
	}
	return false
}

// openAt is the index in rec.runs of the activity id that is scheduled and has not ended (the
// last, should the history name it twice), or -1 when there is none.
func (rec *runRecord) openAt(id string) int {
	at := -1
	for i, r := range rec.runs {
		if r.id == id && r.end == endOpen {
			at = i
		}
	}
	return at
}

// firstActivity checks that every SandboxRun scheduled before the open one named id failed
// before its code could start.
func (rec *runRecord) firstActivity(id string) error {
	mine := rec.openAt(id)
	if mine < 0 {
		return &guard.ApprovalRefused{Reason: guard.RefusedNotScheduled, Msg: fmt.Sprintf("sandbox activity: the run's history schedules no sandbox activity %q", id)}
	}
	for _, r := range rec.runs[:mine] {
		if !rec.notStarted(r) {
			return &guard.ApprovalRefused{Reason: guard.RefusedAlreadyUsed, Msg: fmt.Sprintf("sandbox activity: the approval was already used in this run by sandbox activity %q (%s); an approval runs code once", r.id, r.end)}
		}
	}
	return nil
}

// firstClaim checks that every claim before mine was released.
func (rec *runRecord) firstClaim(mine string) error {
	for _, c := range rec.claims {
		switch {
		case c.commitment == mine && !c.released:
			return nil
		case !c.released && !rec.stale(c):
			return &guard.ApprovalRefused{Reason: guard.RefusedAlreadyUsed, Msg: fmt.Sprintf("sandbox activity: sandbox activity %q claimed the approval of this run first and never released it (its code may have run); an approval runs code once", c.activityID)}
		}
	}
	return &guard.IntegrationError{Op: "sandbox activity: find its claim in the run's history", Err: fmt.Errorf("the claim is not there after %s", claimVisibleWait)}
}

// readRun reads the SandboxRun activities and the claims of the history of run runID.
func readRun(iter tclient.HistoryEventIterator, runID string) (*runRecord, error) {
	rec := &runRecord{}
	bySchedule := map[int64]int{}
	for at := 0; iter.HasNext(); at++ {
		ev, err := iter.Next()
		if err != nil {
			return nil, err
		}
		rec.at = at
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			if a.GetActivityType().GetName() == contract.RunActivityName {
				bySchedule[ev.GetEventId()] = len(rec.runs)
				rec.runs = append(rec.runs, sandboxActivity{id: a.GetActivityId(), end: endOpen})
			}
			continue
		}
		if s := ev.GetWorkflowExecutionSignaledEventAttributes(); s != nil {
			if s.GetSignalName() == contract.SignalSandboxClaim {
				rec.add(s.GetInput(), runID)
			}
			continue
		}
		if scheduled, end := activityEnd(ev); end != "" {
			if i, ok := bySchedule[scheduled]; ok {
				rec.runs[i].end, rec.runs[i].endAt = end, at
			}
		}
	}
	return rec, nil
}

// add records a claim signal's input: a claim for run runID, or the release of an earlier claim.
// Anything else (no host of ours sent it for this run) is passed over: only a host's own claims
// let its code start.
func (rec *runRecord) add(input *commonpb.Payloads, runID string) {
	var msg contract.SandboxClaim
	if err := converter.GetDefaultDataConverter().FromPayloads(input, &msg); err != nil || msg.Commitment == "" || msg.RunID != runID {
		return
	}
	if msg.Secret == "" {
		rec.claims = append(rec.claims, heldClaim{activityID: msg.ActivityID, commitment: msg.Commitment, at: rec.at})
		return
	}
	secret, err := hex.DecodeString(msg.Secret)
	if err != nil {
		return
	}
	c := commitment(secret)
	for i := range rec.claims {
		if rec.claims[i].commitment == c {
			rec.claims[i].released = true
		}
	}
}

// activityEnd returns the scheduled event id and the end of an event that ends an activity, or
// "" for any other event.
func activityEnd(ev *historypb.HistoryEvent) (scheduled int64, end string) {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		return ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), "completed"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		a := ev.GetActivityTaskFailedEventAttributes()
		// The failure's type and retryability are plain fields (a payload codec encodes only
		// messages and details). contract.ToFailure makes an IntegrationError retryable exactly
		// when the code could not have started.
		if app := a.GetFailure().GetApplicationFailureInfo(); app.GetType() == guard.TypeIntegrationError && !app.GetNonRetryable() {
			return a.GetScheduledEventId(), endNotStarted
		}
		return a.GetScheduledEventId(), "failed"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		return ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), endTimedOut
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		return ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId(), "cancelled"
	}
	return 0, ""
}
