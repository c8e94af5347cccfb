package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// sessionDoor is what the inbox reads and sends of Session workflows (issue 28). Its one
// implementation, clientSessions, goes through the client package's reviewer door, as runs do;
// the interface lets the page's tests answer as a Session's worker would.
type sessionDoor interface {
	// ReadSession describes id, which must be a Session workflow (*client.NotSessionError
	// otherwise), and queries the status of its current run by that run's id.
	ReadSession(ctx context.Context, id string) (sessionInfo, error)
	// SessionInput reads the input run runID of id was started with, from its start event: the
	// settings' file contents and env values, which the status does not carry.
	SessionInput(ctx context.Context, id, runID string) (contract.SessionInput, error)
	// DecideCell sends d as the update "decide-cell" to run runID of id only, and waits until the
	// workflow accepted or refused it.
	DecideCell(ctx context.Context, id, runID string, d contract.CellDecision) (contract.DecideResult, error)
	// PendingSessions lists the open sessions whose SandboxStatus says a cell waits.
	PendingSessions(ctx context.Context) ([]pendingSession, error)
	// SessionChanges is what changed since the previous run or session of the conversation of
	// run runID of id, started at started with req (client.SessionChangesOf).
	SessionChanges(ctx context.Context, id, runID string, started time.Time, req guard.SessionRequest) (*client.Changes, error)
	// CheckCellResults checks the cell results a page shows against the session's history
	// (client.CheckCellResults): nil for a cell whose result verifies, else why not.
	CheckCellResults(ctx context.Context, id string, results map[int]guard.Result, hosts *receipt.Hosts) map[int]error
	// CheckedReviewers is the reviewer keys run runID of id recorded when it was checked: the
	// only keys whose decisions it takes (client.Audit).
	CheckedReviewers(ctx context.Context, id, runID string) ([]approval.Key, error)
}

// sessionInfo is a Session workflow as the inbox reads it: its status (naming its workflow and
// run id), whether it is still open, and when it started.
type sessionInfo = client.SessionInfo

// pendingSession is an open session with a waiting cell, as visibility lists it.
type pendingSession struct {
	WorkflowID, RunID string
	StartTime         time.Time
}

// notSessionError says that a workflow id names a workflow of another type than Session.
type notSessionError = client.NotSessionError

// clientSessions is the sessionDoor over the client's one reviewer door.
type clientSessions struct{ c *client.Client }

func (d clientSessions) ReadSession(ctx context.Context, id string) (sessionInfo, error) {
	si, err := d.c.ReadSession(ctx, id)
	if err != nil {
		return sessionInfo{}, fmt.Errorf("inbox: %w", err)
	}
	return si, nil
}

func (d clientSessions) CheckCellResults(ctx context.Context, id string, results map[int]guard.Result, hosts *receipt.Hosts) map[int]error {
	return d.c.CheckCellResults(ctx, id, results, hosts)
}

func (d clientSessions) CheckedReviewers(ctx context.Context, id, runID string) ([]approval.Key, error) {
	return auditedReviewers(ctx, d.c, id, runID)
}

func (d clientSessions) SessionInput(ctx context.Context, id, runID string) (contract.SessionInput, error) {
	in, err := d.c.SessionStartInput(ctx, id, runID)
	if err != nil {
		return in, fmt.Errorf("inbox: %w", err)
	}
	return in, nil
}

func (d clientSessions) DecideCell(ctx context.Context, id, runID string, dec contract.CellDecision) (contract.DecideResult, error) {
	if runID == "" {
		return contract.DecideResult{}, errors.New("inbox: decide-cell: the run id the page was read from is required")
	}
	out, err := d.c.DecideCell(ctx, id, runID, dec)
	if err != nil {
		return out, fmt.Errorf("inbox: %w", err)
	}
	return out, nil
}

func (d clientSessions) SessionChanges(ctx context.Context, id, runID string, started time.Time, req guard.SessionRequest) (*client.Changes, error) {
	ch, err := d.c.SessionChangesOf(ctx, id, runID, started, req)
	if err != nil {
		return ch, fmt.Errorf("inbox: %w", err)
	}
	return ch, nil
}

// PendingSessions lists, of the client's pending list (RunCode runs and Session workflows, by
// workflow type), the sessions.
func (d clientSessions) PendingSessions(ctx context.Context) ([]pendingSession, error) {
	all, err := d.c.Pending(ctx)
	if err != nil {
		return nil, fmt.Errorf("inbox: list sessions with a waiting cell: %w", err)
	}
	var out []pendingSession
	for _, p := range all {
		if p.Kind == client.PendingSession && len(out) < maxListed {
			out = append(out, pendingSession{WorkflowID: p.WorkflowID, RunID: p.RunID, StartTime: p.StartTime})
		}
	}
	return out, nil
}
