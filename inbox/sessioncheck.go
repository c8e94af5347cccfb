package inbox

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A Session's status is answered by whatever worker polls its task queue: a namespace writer's
// worker can answer one that shows other code, other output or other settings than the chain
// the sandbox host checks. The inbox therefore offers an approval of a cell only when the
// digest it signs is the one recomputed here from what the page shows: the settings (with the
// file contents and env values of the session's start input) hashed to the settings digest,
// every cell's code to its code digest, every earlier cell's shown result to its result digest,
// and the chain over them (guard.ChainStart, ChainNext, CellDigest, ResultDigest). These
// functions are the session half of client.CheckShown and client.StatementFor; they are meant
// to fold into the client package's CellStatementFor.

// errNotShown starts every reason why what a status shows is not what it hashes to.
var errNotShown = errors.New("do not approve; the session's workflow worker may not be sandboxflow's")

// shownSession rebuilds the checked session that sum shows, with the file contents and env
// values of req (the request the session was started with), and returns it when it hashes to
// sum's settings digest.
func shownSession(sum guard.SessionSummary, req guard.SessionRequest) (guard.CheckedSession, error) {
	if sum.Digest == "" {
		return guard.CheckedSession{}, errors.New("the status shows no checked settings")
	}
	mismatch := func(what string) error {
		return fmt.Errorf("the status and the request the session was started with differ in their %s: %w", what, errNotShown)
	}
	langs := slices.Clone(req.Languages)
	slices.Sort(langs)
	langs = slices.Compact(langs)
	switch {
	case len(langs) > 0 && !slices.Equal(langs, sum.Languages):
		return guard.CheckedSession{}, mismatch("languages")
	case sum.Network != req.Network:
		return guard.CheckedSession{}, mismatch("network")
	case !slices.Equal(sum.Secrets, slices.Sorted(slices.Values(req.Secrets))):
		return guard.CheckedSession{}, mismatch("secrets")
	case req.Lifetime != 0 && req.Lifetime != sum.Lifetime:
		return guard.CheckedSession{}, mismatch("lifetime")
	case req.IdleTimeout != 0 && req.IdleTimeout != sum.IdleTimeout:
		return guard.CheckedSession{}, mismatch("idle timeout")
	case req.MaxCells != 0 && req.MaxCells != sum.MaxCells:
		return guard.CheckedSession{}, mismatch("max cells")
	}
	if _, err := guard.ParseEgressPatterns(sum.Egress); err != nil {
		return guard.CheckedSession{}, fmt.Errorf("the status shows egress that does not parse: %w", err)
	}
	s := guard.CheckedSession{Languages: sum.Languages, Limits: sum.Limits, Network: sum.Network, Egress: sum.Egress,
		Secrets: sum.Secrets, Backend: sum.Backend, Lifetime: sum.Lifetime, IdleTimeout: sum.IdleTimeout, MaxCells: sum.MaxCells}
	names := slices.Sorted(maps.Keys(req.Files))
	if len(names) != len(sum.Files) {
		return guard.CheckedSession{}, mismatch("input files")
	}
	for i, n := range names {
		if sum.Files[i].Name != n || sum.Files[i].Size != int64(len(req.Files[n])) {
			return guard.CheckedSession{}, mismatch("input files")
		}
		s.Files = append(s.Files, guard.InputFile{Name: n, Content: req.Files[n]})
	}
	envNames := slices.Sorted(maps.Keys(req.Env))
	if !slices.Equal(envNames, sum.EnvNames) {
		return guard.CheckedSession{}, mismatch("env names")
	}
	for _, n := range envNames {
		s.Env = append(s.Env, guard.EnvVar{Name: n, Value: req.Env[n]})
	}
	if got := guard.SessionDigest(&s); got != sum.Digest {
		return guard.CheckedSession{}, fmt.Errorf("the status's settings digest %s is not the digest of the settings it shows (%s): %w", sum.Digest, got, errNotShown)
	}
	return s, nil
}

// cellRan reports whether a cell in state ran in the sandbox (so the chain binds its result).
func cellRan(state string) bool {
	switch state {
	case contract.StatusSucceeded, contract.StatusFailed, contract.StatusTimedOut:
		return true
	}
	return false
}

// cellProblem is what is wrong with one cell as a status shows it.
type cellProblem struct {
	Cell int
	Msg  string
}

func (p cellProblem) Error() string {
	return fmt.Sprintf("cell %d: %s: %s", p.Cell, p.Msg, errNotShown)
}

func (p cellProblem) Unwrap() error { return errNotShown }

// checkCells walks the cells st shows, in order, recomputing each one's code digest and cell
// digest, each result's digest and the chain, and compares them with what st says. It returns
// the digest it recomputed for every cell (index 0 is cell 1), or the first disagreement.
// Cells are numbered from 1 with none left out; only the last may be unfinished; a cell that
// ran (succeeded, failed, timed out) carries a result, which the chain then binds; any other
// carries none and leaves the chain as it was.
func checkCells(st contract.SessionStatus) ([]string, error) {
	settings := st.Settings.Digest
	if settings == "" {
		return nil, errors.New("the status shows no checked settings")
	}
	chain := guard.ChainStart(settings)
	digests := make([]string, 0, len(st.Cells))
	for i, c := range st.Cells {
		bad := func(format string, args ...any) error {
			return cellProblem{Cell: c.Cell, Msg: fmt.Sprintf(format, args...)}
		}
		switch {
		case c.Cell != i+1:
			return nil, fmt.Errorf("the status lists cell %d in place %d (cells are numbered from 1, none left out): %w", c.Cell, i+1, errNotShown)
		case !slices.Contains(st.Settings.Languages, c.Language):
			return nil, bad("its language %q is not one of the session's", c.Language)
		case guard.CellCodeDigest(c.Language, c.Code) != c.CodeDigest:
			return nil, bad("its code digest %s is not the digest of the code shown (%s)", c.CodeDigest, guard.CellCodeDigest(c.Language, c.Code))
		case c.Chain != chain:
			return nil, bad("its chain %s is not the chain over the cells shown before it (%s)", c.Chain, chain)
		case !c.Final() && i != len(st.Cells)-1:
			return nil, bad("it is %s, but a later cell follows", cmp.Or(c.State, "in no state"))
		}
		digest := guard.CellDigest(settings, c.Cell, c.CodeDigest, chain)
		if c.Digest != digest {
			return nil, bad("its digest %s is not the digest of the session, its index, its code and the chain (%s)", c.Digest, digest)
		}
		digests = append(digests, digest)
		switch {
		case cellRan(c.State) && c.Result == nil:
			return nil, bad("it %s but shows no result", c.State)
		case cellRan(c.State):
			rd := guard.ResultDigest(*c.Result)
			if rd != c.ResultDigest {
				return nil, bad("its result digest %s is not the digest of the output shown (%s)", c.ResultDigest, rd)
			}
			chain = guard.ChainNext(chain, digest, rd)
		case c.Result != nil || c.ResultDigest != "":
			return nil, bad("it is %s (it did not run) but shows a result", c.State)
		}
	}
	if st.Chain != "" && st.Chain != chain {
		return nil, fmt.Errorf("the session's chain %s is not the chain over the cells shown (%s): %w", st.Chain, chain, errNotShown)
	}
	return digests, nil
}

// waitingCell returns the cell of st that waits for a decision, or nil. Only the last cell can.
func waitingCell(st contract.SessionStatus) *contract.CellStatus {
	if n := len(st.Cells); n > 0 && st.Cells[n-1].State == contract.StatusAwaitingApproval {
		return &st.Cells[n-1]
	}
	return nil
}

// cellStatementFor returns the statement a reviewer signs to decide on cell of the session st
// is the status of: the session's workflow id, run id and sandbox task queue (the one host that
// holds the sandbox), the cell's digest, the decision, opts' approval id (a fresh one by
// default), reviewer (required) and expiry (by default client.DefaultStatementLifetime after
// now, or the cell's approval deadline when that comes first). It fails when cell is not the
// one that waits. An approval's digest is the one checkCells recomputed from what st shows,
// and it fails when st disagrees with it anywhere; a denial's is the cell's own (a denial runs
// nothing, so it stays possible when the status lies). The caller must check the settings
// against the session's start (shownSession) before offering an approval.
func cellStatementFor(st contract.SessionStatus, cell int, opts client.StatementOptions, now time.Time) (approval.Fields, error) {
	w := waitingCell(st)
	switch {
	case w == nil:
		return approval.Fields{}, fmt.Errorf("no cell of session %s waits for a decision", st.WorkflowID)
	case w.Cell != cell:
		return approval.Fields{}, &staleCellError{Asked: cell, Waiting: w.Cell}
	case st.SandboxTaskQueue == "":
		return approval.Fields{}, fmt.Errorf("session %s names no sandbox host's task queue yet", st.WorkflowID)
	}
	f := approval.Fields{
		Version:    max(st.StatementVersion, approval.StatementVersion1),
		WorkflowID: st.WorkflowID, RunID: st.RunID, Digest: w.Digest, Approve: !opts.Deny,
		ApprovalID: opts.ApprovalID, SandboxTaskQueue: st.SandboxTaskQueue, Expires: opts.Expires, Reviewer: opts.Reviewer,
	}
	if !opts.Deny {
		if f.Version < approval.StatementVersion {
			return approval.Fields{}, fmt.Errorf("session %s asks for an approval of statement version %d: %w", st.WorkflowID, f.Version, client.ErrStatementVersion)
		}
		digests, err := checkCells(st)
		if err != nil {
			return approval.Fields{}, err
		}
		f.Digest = digests[len(digests)-1]
	}
	if f.Version >= approval.StatementVersion2 && f.Reviewer == "" {
		return approval.Fields{}, errors.New("the session's statement names the reviewer (statement version 2): give the reviewer")
	}
	if f.ApprovalID == "" {
		f.ApprovalID = uuid.NewString()
	}
	if f.Expires.IsZero() {
		f.Expires = now.Add(client.DefaultStatementLifetime)
		if !w.ApprovalDeadline.IsZero() && w.ApprovalDeadline.Before(f.Expires) {
			f.Expires = w.ApprovalDeadline
		}
	}
	f.Expires = f.Expires.UTC().Truncate(time.Second)
	if err := f.Check(); err != nil {
		return approval.Fields{}, fmt.Errorf("statement for cell %d of %s: %w", cell, st.WorkflowID, err)
	}
	return f, nil
}

// staleCellError says that a decision was made for a cell that is not the one that waits: the
// page was read before a newer cell came, or the cell was decided meanwhile.
type staleCellError struct {
	Asked, Waiting int
}

func (e *staleCellError) Error() string {
	return fmt.Sprintf("cell %d does not wait for a decision; cell %d does: read the session's page again, with what cell %d printed, before you decide", e.Asked, e.Waiting, e.Asked)
}
