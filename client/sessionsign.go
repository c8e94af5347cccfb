package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// CellStatementFor returns the statement a reviewer signs to decide on cell of the session st
// is the status of, without reading anything: the session's workflow and run id, the cell's
// digest and the session's sandbox task queue (the host that holds the sandbox), the decision,
// opts' approval id, expiry (by default DefaultStatementLifetime after now, or the cell's
// approval deadline when that comes first) and reviewer (required: a session's statement is
// version 2 and names its reviewer).
//
// For an approval it recomputes, from what st shows, the chain over every earlier cell (from
// guard.ChainStart of the settings digest, guard.ChainNext for each cell that has a result:
// its cell digest and guard.ResultDigest of the result it shows; a cell without one leaves the
// chain as it was) and the cell's digest (guard.CellDigest), and refuses with a
// *CellMismatchError when the status's own code digest, chain, digest or result digest of any
// of those cells, the state of a cell that ran and its result's outcome, or the session's chain,
// disagree: a workflow that shows one history and asks to sign another. Approving cell N then says "I read cells 1..N-1 and what they printed", as
// st shows them. The caller must have checked st's settings against the session's start
// (CheckSessionShown) and its ids against the session asked for (ReadSession).
//
// It fails when the cell does not wait for a decision, and an approval when st asks for a
// statement version older than approval.StatementVersion (ErrStatementVersion).
func CellStatementFor(st contract.SessionStatus, cell int, opts StatementOptions, now time.Time) (approval.Fields, error) {
	c, ok := sessionCell(st, cell)
	switch {
	case !ok:
		return approval.Fields{}, fmt.Errorf("client: session %s has no cell %d", st.WorkflowID, cell)
	case c.State != contract.StatusAwaitingApproval:
		return approval.Fields{}, fmt.Errorf("client: cell %d of session %s does not wait for a decision: it is %s", cell, st.WorkflowID, c.State)
	case st.End != "" || st.State == contract.SessionClosed || st.State == contract.SessionError:
		return approval.Fields{}, fmt.Errorf("client: session %s has ended (%s): cell %d will not run", st.WorkflowID, cmp.Or(st.End, st.State), cell)
	case st.SandboxTaskQueue == "":
		return approval.Fields{}, fmt.Errorf("client: session %s names no sandbox host (sandbox_task_queue): its sandbox is not open", st.WorkflowID)
	}
	digest := c.Digest
	if !opts.Deny {
		var err error
		if digest, err = VerifiedCellDigest(st, cell); err != nil {
			return approval.Fields{}, err
		}
	}
	run := contract.Status{
		WorkflowID: st.WorkflowID, RunID: st.RunID, State: contract.StatusAwaitingApproval,
		SandboxTaskQueue: st.SandboxTaskQueue, DecisionWait: contract.DecisionWait{ApprovalDeadline: c.ApprovalDeadline},
		StatementVersion: st.StatementVersion, Request: guard.Summary{Digest: digest},
	}
	return StatementFor(run, opts, now)
}

// VerifiedCellDigest returns the digest cell's reviewer approves, recomputed from what st shows
// (see CellStatementFor), or a *CellMismatchError naming the first cell and field that disagree.
// The cell must be the last one st shows (a cell waits only while no later one exists).
func VerifiedCellDigest(st contract.SessionStatus, cell int) (string, error) {
	chain, err := VerifyCells(st, cell-1)
	if err != nil {
		return "", err
	}
	if len(st.Cells) != cell {
		return "", &CellMismatchError{SessionID: st.WorkflowID, Field: "cells", Shown: fmt.Sprintf("%d cells while cell %d waits", len(st.Cells), cell)}
	}
	digest, _, err := verifyCell(st, st.Cells[cell-1], chain)
	if err != nil {
		return "", err
	}
	if st.Chain != "" && st.Chain != chain {
		return "", &CellMismatchError{SessionID: st.WorkflowID, Field: "chain", Shown: st.Chain, Computed: chain}
	}
	return digest, nil
}

// VerifyCells checks the first upTo cells st shows (all of them when upTo is len(st.Cells) or
// more) as CellStatementFor checks the cells before the one it signs, and returns the chain
// after them. A status whose cells are not numbered 1, 2, ... in order, or in which a cell
// other than the last waits or runs, is refused.
func VerifyCells(st contract.SessionStatus, upTo int) (string, error) {
	mismatch := func(cell int, field, shown, computed string) error {
		return &CellMismatchError{SessionID: st.WorkflowID, Cell: cell, Field: field, Shown: shown, Computed: computed}
	}
	if st.Settings.Digest == "" {
		return "", mismatch(0, "settings", "", "")
	}
	chain := guard.ChainStart(st.Settings.Digest)
	for i, c := range st.Cells {
		if i >= upTo {
			break
		}
		if c.Cell != i+1 {
			return "", mismatch(i+1, "cells", "cell "+strconv.Itoa(c.Cell)+" in its place", "")
		}
		digest, ran, err := verifyCell(st, c, chain)
		if err != nil {
			return "", err
		}
		switch c.State {
		case contract.StatusSucceeded, contract.StatusFailed, contract.StatusTimedOut:
			if c.Result == nil {
				return "", mismatch(c.Cell, "result", "none for a cell that "+c.State, "")
			}
			if want := contract.FinalState(c.Result.Outcome); c.State != want {
				return "", mismatch(c.Cell, "state", c.State, want+" (its result's outcome is "+c.Result.Outcome.String()+")")
			}
		case contract.StatusDenied, contract.StatusExpired, contract.CellDropped:
			if c.Result != nil {
				return "", mismatch(c.Cell, "result", "a result for a cell that was "+c.State, "")
			}
		case contract.StatusCancelled:
			// Cancelled while it waited (no result) or while it ran (stopped: a cancelled result).
			if c.Cancel == nil {
				return "", mismatch(c.Cell, "cancel", "none for a cell that was cancelled", "")
			}
			if c.Result != nil && c.Result.Outcome != guard.OutcomeCancelled {
				return "", mismatch(c.Cell, "state", c.State, contract.FinalState(c.Result.Outcome)+" (its result's outcome is "+c.Result.Outcome.String()+")")
			}
		case contract.StatusError:
		case contract.StatusAwaitingApproval, contract.StatusRunning:
			// Only the last cell waits or runs, and it has no result yet.
			if i != len(st.Cells)-1 || c.Result != nil {
				return "", mismatch(c.Cell, "state", c.State+" before the last cell, or with a result", "")
			}
		default:
			return "", mismatch(c.Cell, "state", c.State+" before the last cell", "")
		}
		if ran != "" {
			chain = guard.ChainNext(chain, digest, ran)
		}
	}
	return chain, nil
}

// verifyCell checks one cell's language, code size, code digest, chain and digest against chain
// (the chain before it), and its result digest against its result; it returns the cell's digest
// and, for a cell with a result, that result's digest.
func verifyCell(st contract.SessionStatus, c contract.CellStatus, chain string) (digest, result string, err error) {
	mismatch := func(field, shown, computed string) error {
		return &CellMismatchError{SessionID: st.WorkflowID, Cell: c.Cell, Field: field, Shown: shown, Computed: computed}
	}
	if !slices.Contains(st.Settings.Languages, c.Language) {
		return "", "", mismatch("language", c.Language, "")
	}
	if c.CodeBytes != len(c.Code) {
		return "", "", mismatch("code_bytes", strconv.Itoa(c.CodeBytes), strconv.Itoa(len(c.Code)))
	}
	if err := guard.CheckPackages(c.Packages); err != nil {
		return "", "", mismatch("packages", err.Error(), "")
	}
	code := guard.CellCodeDigest(c.Language, c.Code, c.Packages...)
	if c.CodeDigest != code {
		return "", "", mismatch("code_digest", c.CodeDigest, code)
	}
	if c.Chain != chain {
		return "", "", mismatch("chain", c.Chain, chain)
	}
	digest = guard.CellDigest(st.Settings.Digest, c.Cell, code, chain)
	if c.Digest != digest {
		return "", "", mismatch("digest", c.Digest, digest)
	}
	if c.Result != nil {
		result = guard.ResultDigest(*c.Result)
		if c.ResultDigest != result {
			return "", "", mismatch("result_digest", c.ResultDigest, result)
		}
	} else if c.ResultDigest != "" {
		return "", "", mismatch("result_digest", c.ResultDigest, "")
	}
	return digest, result, nil
}

// CheckSessionShown refuses a session status whose settings digest is not the digest of the
// settings it shows, with the file contents and env values of in, the session's start input:
// the status is answered by whatever worker polls the session's task queue, and only the start
// was written by the caller who opened the session.
func CheckSessionShown(st contract.SessionStatus, in contract.SessionInput) error {
	sum, req := st.Settings, in.Request
	differ := func(what string) error {
		return fmt.Errorf("client: session %s: the status and the settings the session was opened with differ in their %s: do not approve; the session's workflow worker may not be sandboxflow's", st.WorkflowID, what)
	}
	if sum.Digest == "" {
		return fmt.Errorf("client: session %s: the status shows no checked settings", st.WorkflowID)
	}
	langs := slices.Compact(slices.Sorted(slices.Values(req.Languages)))
	switch {
	case len(langs) > 0 && !slices.Equal(langs, sum.Languages):
		return differ("languages")
	case sum.Network != req.Network:
		return differ("network")
	case !slices.Equal(sum.Secrets, slices.Sorted(slices.Values(req.Secrets))):
		return differ("secrets")
	case req.Lifetime != 0 && req.Lifetime != sum.Lifetime,
		req.IdleTimeout != 0 && req.IdleTimeout != sum.IdleTimeout,
		req.MaxCells != 0 && req.MaxCells != sum.MaxCells:
		return differ("lifetime, idle timeout or cell cap")
	}
	if _, err := guard.ParseEgressPatterns(sum.Egress); err != nil {
		return fmt.Errorf("client: session %s: the status shows egress that does not parse: %w", st.WorkflowID, err)
	}
	if err := contract.ShownPackages(sum.Packages, req.Packages); err != nil {
		return fmt.Errorf("client: session %s: %w", st.WorkflowID, err)
	}
	s := guard.CheckedSession{Languages: sum.Languages, Lifetime: sum.Lifetime, IdleTimeout: sum.IdleTimeout, MaxCells: sum.MaxCells,
		CheckedSettings: guard.CheckedSettings{Limits: sum.Limits, Network: sum.Network, Egress: sum.Egress,
			Secrets: sum.Secrets, Backend: sum.Backend, Image: sum.Image, Packages: sum.Packages}}
	names := slices.Sorted(maps.Keys(req.Files))
	if len(names) != len(sum.Files) {
		return differ("input files")
	}
	for i, n := range names {
		if sum.Files[i].Name != n || sum.Files[i].Size != int64(len(req.Files[n])) {
			return differ("input files")
		}
		s.Files = append(s.Files, guard.InputFile{Name: n, Content: req.Files[n]})
	}
	envNames := slices.Sorted(maps.Keys(req.Env))
	if !slices.Equal(envNames, sum.EnvNames) {
		return differ("env names")
	}
	for _, n := range envNames {
		s.Env = append(s.Env, guard.EnvVar{Name: n, Value: req.Env[n]})
	}
	if got := guard.SessionDigest(&s); got != sum.Digest {
		return &CellMismatchError{SessionID: st.WorkflowID, Field: "settings", Shown: sum.Digest, Computed: got}
	}
	return nil
}

// SessionStartInput reads the input run runID of sessionID was started with, from its start
// event: the settings with the file contents and env values hashed into its settings digest.
func (c *Client) SessionStartInput(ctx context.Context, sessionID, runID string) (contract.SessionInput, error) {
	in, err := contract.ReadSessionInput(ctx, c.tc, c.dc, c.namespace, sessionID, runID)
	var wt *contract.WorkflowTypeError
	if errors.As(err, &wt) {
		return in, &NotSessionError{WorkflowID: sessionID, Type: wt.Type}
	}
	if err != nil {
		return in, fmt.Errorf("client: %w", err)
	}
	return in, nil
}

// cellStatement is Statement of cell (CellWaiting: the waiting one) of sessionID, for opts'
// reviewer, with the status it was made from. It reads the session (ReadSession) and, for an
// approval, checks its settings against the session's start (CheckSessionShown) and its cells
// (CellStatementFor).
func (c *Client) cellStatement(ctx context.Context, sessionID string, cell int, opts StatementOptions) (approval.Fields, contract.SessionStatus, error) {
	// For an approval, the session's start is read at the same time as its status, both of the
	// run described: one round trip instead of two, on the path a reviewer waits on.
	var (
		in       contract.SessionInput
		readFrom func(runID string) error
	)
	if !opts.Deny {
		readFrom = func(runID string) (err error) {
			in, err = c.SessionStartInput(ctx, sessionID, runID)
			return err
		}
	}
	info, err := c.readSession(ctx, sessionID, readFrom)
	if err != nil {
		return approval.Fields{}, info.Status, err
	}
	st := info.Status
	if cell < 1 {
		if cell = WaitingCell(st); cell == 0 {
			return approval.Fields{}, st, fmt.Errorf("client: no cell of session %s waits for a decision", sessionID)
		}
	}
	if !opts.Deny {
		if err := CheckSessionShown(st, in); err != nil {
			return approval.Fields{}, st, err
		}
	}
	f, err := CellStatementFor(st, cell, opts, time.Now())
	return f, st, err
}
