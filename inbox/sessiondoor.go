package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sandboxflow/sandboxflow/contract"
)

// sessionDoor is what the inbox reads and sends of Session workflows (issue 28). The inbox's
// own implementation, temporalSessions, talks to Temporal directly; it is meant to fold into the
// client package's one reviewer door once that offers sessions (client.SessionStatus,
// DecideCell), as runs go through client.Client.
type sessionDoor interface {
	// ReadSession describes id, which must be a Session workflow (*notSessionError otherwise),
	// and queries the status of its current run by that run's id.
	ReadSession(ctx context.Context, id string) (sessionInfo, error)
	// SessionInput reads the input run runID of id was started with, from its start event: the
	// settings' file contents and env values, which the status does not carry.
	SessionInput(ctx context.Context, id, runID string) (contract.SessionInput, error)
	// DecideCell sends d as the update "decide-cell" to run runID of id only, and waits until the
	// workflow accepted or refused it.
	DecideCell(ctx context.Context, id, runID string, d contract.CellDecision) (contract.DecideResult, error)
	// PendingSessions lists the open sessions whose SandboxStatus says a cell waits.
	PendingSessions(ctx context.Context) ([]pendingSession, error)
}

// sessionInfo is a Session workflow as the inbox reads it: its status (naming its workflow and
// run id), whether it is still open, and when it started.
type sessionInfo struct {
	Status  contract.SessionStatus
	Running bool
	Started time.Time
}

// pendingSession is an open session with a waiting cell, as visibility lists it.
type pendingSession struct {
	WorkflowID, RunID string
	StartTime         time.Time
}

// notSessionError says that a workflow id names a workflow of another type than Session.
type notSessionError struct {
	WorkflowID, Type string
}

func (e *notSessionError) Error() string {
	return fmt.Sprintf("inbox: %s is a %s workflow, not a %s", e.WorkflowID, e.Type, contract.SessionWorkflowName)
}

// pendingSessionsQuery is the visibility query for sessions a cell of which waits for a person:
// Session workflows only, so a RunCode run (listed apart) or another type setting the same
// search attribute is never listed here.
var pendingSessionsQuery = fmt.Sprintf("WorkflowType = '%s' AND %s = '%s' AND ExecutionStatus = 'Running'",
	contract.SessionWorkflowName, contract.AttrStatus, contract.StatusAwaitingApproval)

// temporalSessions is the sessionDoor over a Temporal client.
type temporalSessions struct {
	tc tclient.Client
	dc converter.DataConverter
}

func (t temporalSessions) ReadSession(ctx context.Context, id string) (sessionInfo, error) {
	resp, err := t.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return sessionInfo{}, fmt.Errorf("inbox: describe %s: %w", id, err)
	}
	info := resp.GetWorkflowExecutionInfo()
	if typ := info.GetType().GetName(); typ != contract.SessionWorkflowName {
		return sessionInfo{}, &notSessionError{WorkflowID: id, Type: typ}
	}
	runID := info.GetExecution().GetRunId()
	v, err := t.tc.QueryWorkflow(ctx, id, runID, contract.QuerySessionStatus)
	if err != nil {
		return sessionInfo{}, fmt.Errorf("inbox: query %s: %w", id, err)
	}
	si := sessionInfo{Running: info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, Started: info.GetStartTime().AsTime()}
	if err := v.Get(&si.Status); err != nil {
		return sessionInfo{}, fmt.Errorf("inbox: decode the status of %s: %w", id, err)
	}
	// The ids the statement binds are the ones just described, whatever the status says.
	if si.Status.WorkflowID != "" && si.Status.WorkflowID != id || si.Status.RunID != "" && si.Status.RunID != runID {
		return sessionInfo{}, fmt.Errorf("inbox: the status of %s names run %s/%s, not the run it was asked of (%s)", id, si.Status.WorkflowID, si.Status.RunID, runID)
	}
	si.Status.WorkflowID, si.Status.RunID = id, runID
	return si, nil
}

func (t temporalSessions) SessionInput(ctx context.Context, id, runID string) (contract.SessionInput, error) {
	var in contract.SessionInput
	iter := t.tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return in, fmt.Errorf("inbox: the history of %s is empty", id)
	}
	ev, err := iter.Next()
	if err != nil {
		return in, fmt.Errorf("inbox: the history of %s: %w", id, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return in, fmt.Errorf("inbox: the first event of %s is not its start", id)
	}
	if typ := attrs.GetWorkflowType().GetName(); typ != contract.SessionWorkflowName {
		return in, &notSessionError{WorkflowID: id, Type: typ}
	}
	if err := t.dc.FromPayloads(attrs.GetInput(), &in); err != nil {
		return in, fmt.Errorf("inbox: decode the input of %s: %w", id, err)
	}
	return in, nil
}

func (t temporalSessions) DecideCell(ctx context.Context, id, runID string, d contract.CellDecision) (contract.DecideResult, error) {
	var out contract.DecideResult
	if runID == "" {
		return out, errors.New("inbox: decide-cell: the run id the page was read from is required")
	}
	h, err := t.tc.UpdateWorkflow(ctx, tclient.UpdateWorkflowOptions{
		WorkflowID:   id,
		RunID:        runID,
		UpdateName:   contract.UpdateDecideCell,
		UpdateID:     d.Decision.ApprovalID,
		Args:         []any{d},
		WaitForStage: tclient.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return out, fmt.Errorf("inbox: decide-cell on %s: %w", id, err)
	}
	if err := h.Get(ctx, &out); err != nil {
		return out, fmt.Errorf("inbox: decide-cell on %s: %w", id, err)
	}
	return out, nil
}

func (t temporalSessions) PendingSessions(ctx context.Context) ([]pendingSession, error) {
	var (
		out   []pendingSession
		token []byte
	)
	for {
		resp, err := t.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: pendingSessionsQuery, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("inbox: list sessions with a waiting cell: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			out = append(out, pendingSession{WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), StartTime: e.GetStartTime().AsTime()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 || len(out) >= maxListed {
			return out, nil
		}
	}
}
