package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"
	"unicode/utf8"

	"go.temporal.io/api/serviceerror"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/guard/human"
	"github.com/sandboxflow/sandboxflow/pysource"
)

const (
	// maxListed bounds the pending list.
	maxListed = 200
	// previewBytes is how much of an output file is shown as text.
	previewBytes = 4096
	// inputPreviewBytes is how much of one input file is shown as text. Input files can be code
	// the program runs (a module it imports), so a reviewer sees all of one up to this, and can
	// download every input file whole.
	inputPreviewBytes = 256 << 10
	// outputPreviewBytes is how much of stdout and stderr is shown as text.
	outputPreviewBytes = 64 << 10
	// temporalTimeout bounds each call to Temporal a page makes.
	temporalTimeout = 10 * time.Second
)

// loadRun reads the run (it must be a RunCode run) through the client, with the inbox's sandbox
// task queue for a status that names none.
func (s *Server) loadRun(ctx context.Context, id string) (*client.RunInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	ri, err := s.runs.ReadRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	if ri.Status.SandboxTaskQueue == "" {
		ri.Status.SandboxTaskQueue = s.cfg.SandboxTaskQueue
	}
	return &ri, nil
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	var nr *client.NotRunCodeError
	return errors.As(err, &nr) || errors.As(err, &nf)
}

// pendingRow is one line of the pending list.
type pendingRow struct {
	ID          string
	Agent       string
	RequestedBy string
	Language    string
	CodeSize    string
	Network     string
	Age         string
	TimeLeft    string
	Started     string
	Digest      string
	// Approvals is "n of M" for a run that needs M approvals (empty for runs checked before
	// quorums, and for sessions).
	Approvals string
	// Session says the row is a Session workflow's, and Cell the index of its cell that waits
	// (0 when its status shows none).
	Session bool
	Cell    int
	// at orders the list: when the run started, or the session's cell was submitted.
	at time.Time
	// runID is the run of the workflow the row is for.
	runID string
}

// pendingRows lists the runs and the sessions' cells that wait for a decision, newest first,
// each with what its status says (agent, requester, code size, egress, time left). A list that
// could not be read is said in the error; what could be read is still returned.
func (s *Server) pendingRows(ctx context.Context) ([]pendingRow, error) {
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	runs, runsErr := s.pendingRunRows(ctx)
	cells, cellsErr := s.pendingCellRows(ctx)
	return mergePending(runs, cells), errors.Join(runsErr, cellsErr)
}

// mergePending lists runs and sessions' cells together, newest first, at most maxListed. A run
// row of a session's workflow and run (a client whose pending list holds sessions too) is left
// out: the session's own row says which cell waits and links to its page.
func mergePending(runs, cells []pendingRow) []pendingRow {
	type key struct{ id, runID string }
	sessions := map[key]bool{}
	for _, c := range cells {
		sessions[key{c.ID, c.runID}] = true
	}
	rows := make([]pendingRow, 0, len(runs)+len(cells))
	for _, r := range runs {
		if !sessions[key{r.ID, r.runID}] {
			rows = append(rows, r)
		}
	}
	rows = append(rows, cells...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].at.After(rows[j].at) })
	if len(rows) > maxListed {
		rows = rows[:maxListed]
	}
	return rows
}

// pendingRunRows lists the RunCode runs that wait for a decision.
func (s *Server) pendingRunRows(ctx context.Context) ([]pendingRow, error) {
	pending, err := s.runs.Pending(ctx)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	sort.SliceStable(pending, func(i, j int) bool { return pending[i].StartTime.After(pending[j].StartTime) })
	if len(pending) > maxListed {
		pending = pending[:maxListed]
	}
	now := s.cfg.Now()
	rows := make([]pendingRow, 0, len(pending))
	for _, p := range pending {
		row := pendingRow{ID: p.WorkflowID, runID: p.RunID, Language: p.Language, Digest: p.Digest, at: p.StartTime,
			Age: human.Duration(now.Sub(p.StartTime)), Started: p.StartTime.UTC().Format(time.RFC3339)}
		if st, err := s.runs.RunStatus(ctx, p.WorkflowID, p.RunID); err == nil {
			req := st.Request
			row.Agent, row.RequestedBy = visible(req.Metadata.Agent), visible(req.Metadata.RequestedBy)
			row.CodeSize = human.Bytes(int64(req.CodeBytes))
			row.Network = human.Network(req)
			if !st.ApprovalDeadline.IsZero() {
				row.TimeLeft = human.Duration(st.ApprovalDeadline.Sub(now))
			}
			if st.Quorum > 0 {
				row.Approvals = fmt.Sprintf("%d of %d", len(st.Approvals), st.Quorum)
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// pendingCellRows lists the sessions whose SandboxStatus says a cell waits, each as the cell
// its status shows waiting (a session whose status shows none, or could not be read, is listed
// without one, so that it is not hidden).
func (s *Server) pendingCellRows(ctx context.Context) ([]pendingRow, error) {
	pending, err := s.door.PendingSessions(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	rows := make([]pendingRow, 0, len(pending))
	for _, p := range pending {
		row := pendingRow{ID: p.WorkflowID, runID: p.RunID, Session: true, at: p.StartTime, Age: human.Duration(now.Sub(p.StartTime)), Started: p.StartTime.UTC().Format(time.RFC3339)}
		if si, err := s.door.ReadSession(ctx, p.WorkflowID); err == nil && si.Status.RunID == p.RunID {
			set := si.Status.Settings
			row.Agent, row.RequestedBy = visible(set.Metadata.Agent), visible(set.Metadata.RequestedBy)
			row.Network = human.Network(guard.Summary{Network: set.Network, Egress: set.Egress})
			if c := waitingCell(si.Status); c != nil {
				row.Cell, row.Language, row.Digest = c.Cell, c.Language, c.Digest
				row.CodeSize = human.Bytes(int64(len(c.Code)))
				if !c.Submitted.IsZero() {
					row.at, row.Age, row.Started = c.Submitted, human.Duration(now.Sub(c.Submitted)), c.Submitted.UTC().Format(time.RFC3339)
				}
				if !c.ApprovalDeadline.IsZero() {
					row.TimeLeft = human.Duration(c.ApprovalDeadline.Sub(now))
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// inputFile is an input file as the run page shows it; N is its place in name order, which
// its download names.
type inputFile struct {
	N       int
	Name    string
	Size    string
	Preview string
	Binary  bool
	Cut     bool
}

// readInput reads the input the run was started with from its start event, through the client
// (the status carries only file names and sizes, env names).
func (s *Server) readInput(ctx context.Context, id, runID string) (contract.Input, error) {
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	in, err := s.runs.StartInput(ctx, id, runID)
	if err != nil {
		return contract.Input{}, fmt.Errorf("inbox: %w", err)
	}
	return in, nil
}

// inputFiles lists the request's input files as the run page shows them: text as escaped
// text with its tabs drawn at Python's columns, binary as its size only.
func inputFiles(req guard.Request) []inputFile {
	out := make([]inputFile, 0, len(req.Files))
	for i, n := range slices.Sorted(maps.Keys(req.Files)) {
		b := req.Files[n]
		f := inputFile{N: i, Name: visible(n), Size: human.Bytes(int64(len(b)))}
		f.Preview, f.Binary, f.Cut = preview(b, inputPreviewBytes)
		// An input file can be a module: its tabs are drawn at Python's columns, as the code's.
		f.Preview = pysource.ShowTabsText(f.Preview)
		out = append(out, f)
	}
	return out
}

// checkShown refuses an approval of a run whose status's digest is not the digest of what the
// page shows (client.CheckShown): the status is answered by whatever worker polls the run's
// task queue.
func checkShown(st contract.Status, in contract.Input, readErr error) error {
	if readErr != nil {
		return fmt.Errorf("the inbox cannot check what the status shows against the run's start: %w", readErr)
	}
	return client.CheckShown(st, in)
}

// preview returns up to max bytes of b as text with invisible characters escaped, or binary
// when b is not text (not UTF-8, or holding NUL, as starter show decides).
func preview(b []byte, max int) (text string, binary, cut bool) {
	if len(b) > max {
		b, cut = b[:max], true
		for len(b) > 0 && !utf8.Valid(b) && len(b) > max-4 {
			b = b[:len(b)-1]
		}
	}
	// Binary is what starter show calls binary too: not UTF-8, or holding NUL. Other control
	// characters are drawn as their escapes (visible): a module with a form feed between its
	// sections, or an escape sequence in a string, is source Python runs and must be read.
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return "", true, cut
	}
	return visible(string(b)), false, cut
}

// result returns the result of a closed run, or the error that ended it.
func (s *Server) result(ctx context.Context, id string) (guard.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, temporalTimeout)
	defer cancel()
	return s.runs.Result(ctx, id)
}
