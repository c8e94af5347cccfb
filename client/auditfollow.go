package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sandboxflow/sandboxflow/contract"
)

// FollowOptions say where FollowAudit starts and how it reads.
type FollowOptions struct {
	// Cursor is a record's cursor: the stream resumes after that record. Optional: Since.
	Cursor string
	// Since starts the stream at the records of this time and later, when Cursor is empty.
	// Optional: zero means now.
	Since time.Time
	// Settle is how long a record waits, after its history time, before it is emitted, so that
	// records of many runs come out in one order that a cursor can resume (see
	// docs/receipts-and-audit.md). It must exceed the visibility store's lag and the clock skew
	// between this program and the Temporal server. Optional: zero means DefaultSettle.
	Settle time.Duration
	// Poll is how often the runs are listed and their histories read. Optional: zero means one
	// second.
	Poll time.Duration
}

// DefaultSettle is FollowOptions.Settle's default.
const DefaultSettle = 5 * time.Second

// ErrCursorExpired says a cursor is older than the namespace's retention: the histories of runs
// that closed after it may be gone, so resuming from it could leave a gap. Start again with
// FollowOptions.Since (and accept the gap), or resume sooner. It is checked when the Client knows
// its namespace (Options.Namespace; Connect sets it).
var ErrCursorExpired = errors.New("client: audit follow: the cursor is older than the namespace's retention")

// FollowAudit calls f with every audit stream record of every RunCode run and Session, in one
// order (by history time, then run, then event), as they happen (each once it has settled), each
// with the cursor that resumes after it, until ctx ends (nil then) or f fails. Records come from
// the runs' histories: one history read per open run per poll.
func (c *Client) FollowAudit(ctx context.Context, opts FollowOptions, f func(contract.AuditStreamRecord) error) error {
	fl, err := c.newFollower(ctx, opts)
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		if err := fl.poll(ctx, first, f); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(fl.every):
		}
	}
}

// follower is FollowAudit's state: the last key emitted and the runs read.
type follower struct {
	c      *Client
	last   streamKey
	settle time.Duration
	every  time.Duration
	runs   map[runRef]*followedRun
}

type runRef struct{ workflowID, runID string }

// followedRun is a run whose history was read: the keys of its records seen, and whether it had
// closed (then it is not read again).
type followedRun struct {
	seen    map[streamKey]bool
	records []keyedRecord
	closed  bool
	closeAt time.Time
}

// newFollower checks the cursor (a *ErrCursorExpired one is refused) and makes the follower.
func (c *Client) newFollower(ctx context.Context, opts FollowOptions) (*follower, error) {
	fl := &follower{c: c, settle: opts.Settle, every: opts.Poll, runs: map[runRef]*followedRun{}}
	if fl.settle <= 0 {
		fl.settle = DefaultSettle
	}
	if fl.every <= 0 {
		fl.every = time.Second
	}
	if opts.Cursor == "" {
		fl.last = streamKey{Time: opts.Since}
		if opts.Since.IsZero() {
			fl.last.Time = time.Now()
		}
		return fl, nil
	}
	k, err := parseCursor(opts.Cursor)
	if err != nil {
		return nil, err
	}
	fl.last = k
	if c.namespace == "" {
		return fl, nil
	}
	ns, err := c.tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: c.namespace})
	if err != nil {
		return nil, fmt.Errorf("client: audit follow: describe namespace %s: %w", c.namespace, err)
	}
	if ret := ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); ret > 0 && time.Since(k.Time) > ret {
		return nil, fmt.Errorf("%w (%s): the cursor is of %s", ErrCursorExpired, ret, k.Time.Format(time.RFC3339))
	}
	return fl, nil
}

// poll lists the runs that may have records after the last key, reads the histories of those
// still open (and of closed ones once), and emits the settled records in order. A record found
// after records later than it were emitted (a run that the visibility store listed late) is
// emitted then, marked late; on the first poll such records are taken as emitted by the follower
// the cursor came from.
func (fl *follower) poll(ctx context.Context, first bool, f func(contract.AuditStreamRecord) error) error {
	horizon := time.Now().Add(-fl.settle)
	refs, err := fl.list(ctx)
	if err != nil {
		return err
	}
	var listed []*followedRun
	for _, ref := range refs {
		r := fl.runs[ref]
		if r == nil {
			r = &followedRun{seen: map[streamKey]bool{}}
			fl.runs[ref] = r
		}
		if !r.closed {
			if err := fl.read(ctx, ref, r); err != nil {
				return err
			}
		}
		listed = append(listed, r)
	}
	for _, rec := range settled(listed, &fl.last, horizon, first) {
		if err := f(rec); err != nil {
			return err
		}
	}
	fl.forget()
	return nil
}

// settled returns, in order and with their cursors, the records of runs not yet emitted whose
// time is at or before horizon, marking them emitted and moving last to the last of them. A record
// at or before last is late (marked so, with last's cursor), except on the first poll, where it
// is taken as emitted by the follower whose cursor last is.
func settled(runs []*followedRun, last *streamKey, horizon time.Time, first bool) []contract.AuditStreamRecord {
	var due []keyedRecord
	for _, r := range runs {
		for _, kr := range r.records {
			switch {
			case r.seen[kr.key] || kr.key.Time.After(horizon):
				continue
			case kr.key.compare(*last) <= 0 && first:
			case kr.key.compare(*last) <= 0:
				kr.rec.Late = true
				due = append(due, kr)
			default:
				due = append(due, kr)
			}
			r.seen[kr.key] = true
		}
	}
	slices.SortFunc(due, func(a, b keyedRecord) int { return a.key.compare(b.key) })
	out := make([]contract.AuditStreamRecord, 0, len(due))
	for _, kr := range due {
		if !kr.rec.Late {
			*last = kr.key
		}
		kr.rec.Cursor = last.cursor()
		out = append(out, kr.rec)
	}
	return out
}

// list returns the runs open now, and those closed since a second before the last key.
func (fl *follower) list(ctx context.Context) ([]runRef, error) {
	mark := fl.last.Time.Add(-time.Second)
	query := fmt.Sprintf("WorkflowType IN ('%s', '%s') AND (ExecutionStatus = 'Running' OR CloseTime >= '%s')",
		contract.WorkflowName, contract.SessionWorkflowName, mark.UTC().Format(time.RFC3339Nano))
	var refs []runRef
	var token []byte
	for {
		resp, err := fl.c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("client: audit follow: list runs: %w", err)
		}
		for _, ex := range resp.GetExecutions() {
			refs = append(refs, runRef{ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return refs, nil
		}
	}
}

// read reads ref's history and makes its records.
func (fl *follower) read(ctx context.Context, ref runRef, r *followedRun) error {
	var events []*historypb.HistoryEvent
	iter := fl.c.tc.GetWorkflowHistory(ctx, ref.workflowID, ref.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			return fmt.Errorf("client: audit follow: history of %s: %w", ref.workflowID, err)
		}
		events = append(events, e)
	}
	recs, err := streamRecords(fl.c.dc, ref.workflowID, ref.runID, events)
	if err != nil {
		return err
	}
	r.records = recs
	if n := len(events); n > 0 && isClose(events[n-1].GetEventType()) {
		r.closed, r.closeAt = true, events[n-1].GetEventTime().AsTime()
	}
	return nil
}

// forget drops the runs that closed before the list's mark once every record of theirs was
// emitted: no list names them again.
func (fl *follower) forget() {
	mark := fl.last.Time.Add(-time.Second)
	for ref, r := range fl.runs {
		if r.closed && r.closeAt.Before(mark) && len(r.seen) == len(r.records) {
			delete(fl.runs, ref)
		}
	}
}

func isClose(t enumspb.EventType) bool {
	switch t {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return true
	}
	return false
}

// cursorWire is a cursor's content before its base64 encoding.
type cursorWire struct {
	V   string    `json:"v"`
	T   time.Time `json:"t"`
	W   string    `json:"w,omitempty"`
	R   string    `json:"r,omitempty"`
	E   int64     `json:"e,omitempty"`
	Seq int       `json:"s,omitempty"`
}

// cursor is k written as a cursor.
func (k streamKey) cursor() string {
	b, _ := json.Marshal(cursorWire{V: contract.AuditStreamVersion, T: k.Time.UTC(), W: k.WorkflowID, R: k.RunID, E: k.EventID, Seq: k.Seq})
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseCursor reads a record's cursor; anything else is refused.
func parseCursor(s string) (streamKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return streamKey{}, fmt.Errorf("client: audit follow: cursor %q: %w: %w", s, errBadCursor, err)
	}
	var w cursorWire
	if err := json.Unmarshal(b, &w); err != nil || w.V != contract.AuditStreamVersion || w.T.IsZero() {
		return streamKey{}, fmt.Errorf("client: audit follow: cursor %q: %w", s, errBadCursor)
	}
	return streamKey{Time: w.T, WorkflowID: w.W, RunID: w.R, EventID: w.E, Seq: w.Seq}, nil
}
