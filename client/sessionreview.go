package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// SessionReview is everything a reviewer reads about a session: its status (settings, every
// cell with its code, its decision and its result), what this client computed of each cell's
// code (the characters a person could not see, names that read as others), and the settings'
// env values and input files when asked for.
type SessionReview struct {
	SessionID string `json:"session_id"`
	contract.SessionStatus
	// Waiting is the index of the cell that waits for a decision; 0 when none does.
	Waiting int `json:"waiting_cell,omitempty"`
	// Views has one entry per cell of Cells, in the same order.
	Views []CellView `json:"cell_views"`
	Extras
}

// CellView is what this client computed of one cell's code, as Review computes it of a run's.
type CellView struct {
	Cell                 int                       `json:"cell"`
	SuspiciousCharacters []pysource.Suspicious     `json:"suspicious_characters,omitempty"`
	Warning              string                    `json:"warning,omitempty"`
	ConfusableNames      []pysource.ConfusableName `json:"confusable_names,omitempty"`
	NamesWarning         string                    `json:"names_warning,omitempty"`
	// WrittenStartup and WrittenNames are about the files the cell created or changed in /work,
	// which outlives it: a file a later cell's interpreter may run without that cell calling it
	// (pysource.StartupWarnings), and names in those files that read as others. Cell 1 can write a
	// module from bytes the reviewer never reads as code, and cell 2 import it.
	WrittenStartup []pysource.StartupWarning `json:"written_startup,omitempty"`
	WrittenNames   []pysource.ConfusableName `json:"written_confusable_names,omitempty"`
	// WrittenSource says, for each file the cell wrote that Python or sh could read as other
	// than what the views draw (a coding declaration other than UTF-8, mixed indentation, lone
	// carriage returns, a byte order mark: pysource.CheckWrittenSource, the checks input files
	// must pass to be accepted at all), why.
	WrittenSource []string `json:"written_source,omitempty"`
	// ThreadsWarning says what threads of the session's interpreter the host counted alive at
	// the end of the cell before this one (they run on in this one) and of this one
	// (ThreadsWarning); empty when none.
	ThreadsWarning string `json:"threads_warning,omitempty"`
	// Retry is what changed since the cell this one retries (CellRequest.Retries), nil when it
	// retries none. A reading aid beside the whole code, never in its place.
	Retry *CellRetry `json:"retry,omitempty"`
	// PackageChanges is what the cell's packages change in the session's set so far
	// (CellPackageChanges); empty for a cell without packages.
	PackageChanges []guard.PackageChange `json:"package_changes,omitempty"`
}

// CellRetry is what changed from the cell a cell retries to it.
type CellRetry struct {
	// Of is the retried cell; State how it ended (denied, failed, ...) and Error why, if said.
	Of    int    `json:"of"`
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Diff is the unified diff of the code (and the language, when it changed), each line
	// escaped as Changes.Diff's are; empty when nothing changed. Added and Removed count it.
	Diff    string `json:"diff,omitempty"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
}

// RetryOf is what changed from the cell c retries to c, or nil when c retries none or names a
// cell that is not an earlier one of st.
func RetryOf(st contract.SessionStatus, c contract.CellStatus) *CellRetry {
	if c.Retries < 1 || c.Retries >= c.Cell || c.Retries > len(st.Cells) {
		return nil
	}
	prev := st.Cells[c.Retries-1]
	r := &CellRetry{Of: prev.Cell, State: prev.State, Error: prev.Error}
	var ch Changes
	ch.add("code", prev.Code, c.Code)
	ch.add("language", prev.Language+"\n", c.Language+"\n")
	r.Diff, r.Added, r.Removed = ch.Diff, ch.Added, ch.Removed
	return r
}

// reviewSession is Review of a cell of sessionID, with what opts adds. It refuses a
// workflow that is not a Session (*NotSessionError), a status that names another session, a
// status whose settings digest is not the digest of what it shows with the session's start
// (CheckSessionShown), and one whose cells do not compute the chain and digests it shows
// (VerifyCells, a *CellMismatchError). The start-up warnings are computed here from the start's
// input files, and every cell's suspicious characters from its code: nothing a reviewer is
// warned of is taken from the workflow's word.
func (c *Client) reviewSession(ctx context.Context, sessionID string, opts ReviewOptions) (SessionReview, error) {
	info, err := c.ReadSession(ctx, sessionID)
	if err != nil {
		return SessionReview{}, err
	}
	st := info.Status
	r := SessionReview{SessionID: sessionID, Waiting: WaitingCell(st)}
	if st.Settings.Digest != "" {
		in, err := c.SessionStartInput(ctx, sessionID, st.RunID)
		if err != nil {
			return SessionReview{}, err
		}
		if err := CheckSessionShown(st, in); err != nil {
			return SessionReview{}, err
		}
		if _, err := VerifyCells(st, len(st.Cells)); err != nil {
			return SessionReview{}, err
		}
		names := slices.Sorted(maps.Keys(in.Request.Files))
		st.Settings.Warnings = pysource.StartupWarnings(names)
		// So is the conversation, which the diff is read for.
		st.Settings.Conversation = in.Request.Conversation
		r.Extras = opts.extras(in.Request.Env, in.Request.Files, st.Settings.SensitiveEnv)
		req := in.Request
		req.Limits = CheckedLimits(req.Limits, st.Settings.Limits)
		r.Changes, r.ChangesError = changesText(c.SessionChangesOf(ctx, sessionID, st.RunID, info.Started, req))
	}
	r.Views = make([]CellView, 0, len(st.Cells))
	for i, cell := range st.Cells {
		v := CellView{Cell: cell.Cell, SuspiciousCharacters: pysource.SuspiciousCharacters(cell.Code), ConfusableNames: pysource.ConfusableNames(cell.Code)}
		v.Warning = SuspiciousWarning(v.SuspiciousCharacters)
		v.NamesWarning = ConfusableWarning(v.ConfusableNames)
		st.Cells[i].SuspiciousCharacters = v.SuspiciousCharacters
		v.WrittenStartup, v.WrittenNames, v.WrittenSource = writtenWarnings(cell.Result)
		v.ThreadsWarning = ThreadsWarning(st, i)
		v.Retry = RetryOf(st, cell)
		v.PackageChanges = CellPackageChanges(st, i)
		r.Views = append(r.Views, v)
	}
	r.SessionStatus = st
	return r, nil
}

// writtenWarnings returns the start-up warnings and confusable names of the files a cell's result
// carries: what it left in /work for later cells.
func writtenWarnings(res *guard.Result) ([]pysource.StartupWarning, []pysource.ConfusableName, []string) {
	if res == nil {
		return nil, nil, nil
	}
	var names, source []string
	var confusable []pysource.ConfusableName
	for _, f := range res.Files {
		names = append(names, f.Name)
		confusable = append(confusable, pysource.FileConfusableNames(f.Name, f.Content)...)
		if err := pysource.CheckWrittenSource(f.Name, f.Content); err != nil {
			source = append(source, err.Error())
		}
	}
	return pysource.StartupWarnings(names), confusable, source
}

// ThreadsWarning is what the views of cell st.Cells[i] say of the threads the host counted alive
// in the session's interpreter (guard.Result.ThreadsAlive) at the end of the cell that ran before
// it, which run on in this one, and at the end of this one; empty when none.
func ThreadsWarning(st contract.SessionStatus, i int) string {
	var parts []string
	for j := i - 1; j >= 0; j-- {
		if r := st.Cells[j].Result; r != nil {
			if r.ThreadsAlive > 0 {
				parts = append(parts, fmt.Sprintf("cell %d ended with %d thread(s) it or an earlier cell started still running in the interpreter: "+
					"they run on in this cell, where they can print, change its variables and end it before its code did", st.Cells[j].Cell, r.ThreadsAlive))
			}
			break
		}
	}
	if r := st.Cells[i].Result; r != nil && r.ThreadsAlive > 0 {
		parts = append(parts, fmt.Sprintf("when this cell ended, %d thread(s) besides the interpreter's own were running: its output, its end and its exit status may be theirs", r.ThreadsAlive))
	}
	return strings.Join(parts, "; ")
}
