package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/guard/human"
)

// printSessionReview writes what a reviewer reads about a session, for a person: its settings as
// `show` writes a run's (with what changed in them since its conversation's previous run or
// session, when it names one), then every cell with its code (numbered, escaped and with its tabs drawn
// as `show` draws a run's), its decision and its output; the waiting cell is marked.
func printSessionReview(w io.Writer, r client.SessionReview, now time.Time) error {
	if err := printSessionSettings(w, r, now); err != nil {
		return err
	}
	cols := terminalColumns(w)
	if err := printInputFiles(w, r.InputFiles, cols); err != nil {
		return err
	}
	if err := printChanges(w, r.Settings.Conversation, true, r.Changes, r.ChangesError); err != nil {
		return err
	}
	if len(r.Cells) == 0 {
		_, err := fmt.Fprintln(w, "\nNo cell yet.")
		return err
	}
	for i, c := range r.Cells {
		var v client.CellView
		if i < len(r.Views) {
			v = r.Views[i]
		}
		if err := printCell(w, c, v, c.Cell == r.Waiting, now, cols); err != nil {
			return err
		}
		if err := printWrittenFiles(w, c, v, r.InputFiles != nil, cols); err != nil {
			return err
		}
	}
	return nil
}

// printWrittenFiles writes the warnings about the files cell c created or changed in /work (a
// later cell can import or run them without its code saying so) and, with --input-files, their
// contents, numbered and escaped as the input files are: a later cell's reviewer reads what an
// earlier cell left behind as part of the code.
func printWrittenFiles(w io.Writer, c contract.CellStatus, v client.CellView, contents bool, cols int) error {
	if err := printWrittenWarnings(w, c.Cell, v); err != nil {
		return err
	}
	if c.Result == nil || len(c.Result.Files) == 0 {
		return nil
	}
	if !contents {
		_, err := fmt.Fprintf(w, "\n(cell %d's files: --input-files shows their contents; a later cell can import or run them)\n", c.Cell)
		return err
	}
	files := make(map[string][]byte, len(c.Result.Files))
	for _, f := range c.Result.Files {
		files[f.Name] = f.Content
	}
	return printFiles(w, fmt.Sprintf("file cell %d wrote: ", c.Cell), files, cols)
}

// printSessionSettings writes the session's ids, state and settings.
func printSessionSettings(w io.Writer, r client.SessionReview, now time.Time) error {
	s := r.Settings
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("session", "%s (run id %s)", terminal(r.SessionID), terminal(r.RunID))
	state := terminal(r.State)
	if r.Waiting > 0 {
		state += fmt.Sprintf(" (cell %d waits for a decision)", r.Waiting)
	}
	if r.End != "" {
		state += " (ended: " + terminal(r.End) + ")"
	}
	row("state", "%s", state)
	for _, f := range human.Metadata(s.Metadata) {
		row(f.K, "%s", terminal(f.V))
	}
	if s.Conversation != "" {
		row("conversation", "%s (the orchestrator's label; what changed since its previous run or session is shown after the settings)", terminal(s.Conversation))
	}
	if s.Digest == "" {
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err := fmt.Fprintln(w, "\nThe settings are not checked yet, or their check failed: there is nothing to review.")
		return err
	}
	row("languages", "%s", terminal(strings.Join(s.Languages, ", ")))
	row("backend", "%s", terminal(s.Backend))
	if s.Image != "" {
		row("image", "%s (what the cells run in; the settings digest binds it)", terminal(s.Image))
	}
	if r.SandboxTaskQueue != "" {
		row("runs on", "task queue %s (sandbox %s)", terminal(r.SandboxTaskQueue), terminal(r.SandboxID))
	}
	for _, f := range human.Limits(s.Limits) {
		row(f.K, "%s (each cell)", f.V)
	}
	sandbox := guard.Summary{Network: s.Network, Egress: s.Egress, Secrets: s.Secrets, Packages: s.Packages, Files: s.Files, EnvNames: s.EnvNames}
	printSandbox(row, sandbox, r.InputFiles != nil, r.Env, r.SensitiveEnvBytes)
	row("lifetime", "%s", human.Duration(s.Lifetime))
	if !r.Deadline.IsZero() {
		row("", "ends at %s (%s left)", r.Deadline.UTC().Format(time.RFC3339), human.Duration(r.Deadline.Sub(now)))
	}
	row("idle timeout", "%s", human.Duration(s.IdleTimeout))
	row("cells", "%d of at most %d", len(r.Cells), s.MaxCells)
	row("settings digest", "%s", s.Digest)
	printRules(row, r.Rules, nil, false)
	if r.Chain != "" {
		row("chain", "%s (over every cell that ran; checked against the cells below)", r.Chain)
	}
	if r.RejectedDecisions > 0 {
		row("refused", "%d decision(s); the last because %s", r.RejectedDecisions, terminal(r.LastRejection))
	}
	if r.Error != "" {
		row("error", "%s", terminal(r.Error))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printStartupWarnings(w, s.Warnings)
}

// printCell writes one cell: a header (the waiting one marked), its digests, its decision, the
// warnings about its code, the code numbered, then its result.
func printCell(w io.Writer, c contract.CellStatus, v client.CellView, waiting bool, now time.Time, cols int) error {
	header := fmt.Sprintf("\n=== cell %d (%s, %s)", c.Cell, terminal(c.Language), terminal(c.State))
	if waiting {
		header += "  <<< WAITS FOR YOUR DECISION"
	}
	if _, err := fmt.Fprintln(w, header+" ==="); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	printCellRows(row, c, waiting, now)
	printPackages(row, c.Packages)
	for _, pc := range v.PackageChanges {
		row("", "%s (against the session's packages so far)", terminal(pc.String()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	threads := ""
	if v.ThreadsWarning != "" {
		threads = "WARNING: " + v.ThreadsWarning + "."
	}
	for _, warning := range []string{v.Warning, v.NamesWarning, threads} {
		if warning != "" {
			if _, err := fmt.Fprintf(w, "\n%s\n", terminal(warning)); err != nil {
				return err
			}
		}
	}
	if err := printNumbered(w, fmt.Sprintf("cell %d code", c.Cell), c.Code, cols); err != nil {
		return err
	}
	if err := printRetry(w, c.Cell, v.Retry); err != nil {
		return err
	}
	return printCellOutput(w, c, cols)
}

// printRetry writes what changed since the cell a cell retries, after its whole code.
func printRetry(w io.Writer, cell int, r *client.CellRetry) error {
	if r == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\ncell %d retries cell %d (%s", cell, r.Of, terminal(r.State))
	if r.Error != "" {
		fmt.Fprintf(&b, ": %s", terminal(r.Error))
	}
	b.WriteString("); what changed since it:\n")
	if r.Diff == "" {
		b.WriteString("nothing: the same code.\n")
	} else {
		fmt.Fprintf(&b, "%d line(s) added, %d removed\n%s", r.Added, r.Removed, r.Diff)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printCellRows writes a cell's facts as rows: its metadata, size and digest, its deadline while
// it waits, its approvals, its decision, its error and its result's summary.
func printCellRows(row func(k, format string, a ...any), c contract.CellStatus, waiting bool, now time.Time) {
	for _, f := range human.Metadata(c.Metadata) {
		row(f.K, "%s", terminal(f.V))
	}
	row("code", "%s", human.Bytes(int64(len(c.Code))))
	row("digest", "%s", terminal(c.Digest))
	if waiting && !c.ApprovalDeadline.IsZero() {
		row("deadline", "%s (%s left)", c.ApprovalDeadline.UTC().Format(time.RFC3339), human.Duration(c.ApprovalDeadline.Sub(now)))
	}
	if c.Quorum > 0 {
		had := make([]string, len(c.Approvals))
		for i, a := range c.Approvals {
			had[i] = terminal(a.Reviewer)
		}
		row("approvals", "%d of %d needed, by distinct reviewers with distinct keys: %s", len(c.Approvals), c.Quorum, strings.Join(had, ", "))
	}
	if d := c.Decision; d != nil {
		verb := "denied"
		if d.Approve {
			verb = "approved"
		}
		how := strings.TrimSpace(d.Method + " " + d.KeyType + " " + d.Fingerprint)
		if how != "" {
			how = " (" + terminal(how) + ")"
		}
		row("decision", "%s by %s at %s%s", verb, terminal(d.Reviewer), d.Time.UTC().Format(time.RFC3339), how)
		if d.Reason != "" {
			row("reason", "%s", terminal(d.Reason))
		}
	}
	if c.Error != "" {
		row("error", "%s", terminal(c.Error))
	}
	if t := client.PhasesText(c.Phases); t != "" {
		row("time", "%s", t)
	}
	if r := c.Result; r != nil {
		row("result", "%s, exit code %d%s, %s", r.Outcome, r.ExitCode, human.ExitSource(*r), human.Duration(r.Duration))
		if r.StateReset {
			row("", "the interpreter was started afresh for this cell: variables and imports of earlier cells are gone, /work is kept")
		}
		for _, f := range r.Files {
			row("file", "%s, %s (created or changed by this cell)", terminal(f.Name), human.Bytes(f.Size))
		}
		if r.FilesTruncated {
			row("", "some files were left out (limits or names)")
		}
		printOutputRows(row, r.Outputs, r.OutputsTruncated)
	}
}

// printCellOutput writes the stdout and stderr of a cell that ran, numbered, each unless empty,
// and what it showed as text or a table (printOutputTexts): a later cell's reviewer reads it.
func printCellOutput(w io.Writer, c contract.CellStatus, cols int) error {
	if r := c.Result; r != nil {
		for _, out := range []struct {
			name      string
			b         []byte
			truncated bool
		}{{"stdout", r.Stdout, r.StdoutTruncated}, {"stderr", r.Stderr, r.StderrTruncated}} {
			if len(out.b) == 0 && !out.truncated {
				continue
			}
			title := fmt.Sprintf("cell %d %s", c.Cell, out.name)
			if out.truncated {
				title += " (truncated)"
			}
			if err := printNumbered(w, title, string(out.b), cols); err != nil {
				return err
			}
		}
		return printOutputTexts(w, fmt.Sprintf("cell %d ", c.Cell), r.Outputs, cols)
	}
	return nil
}

// printWaitingCell writes, before a decision on it, the cell that waits: what the decision is for.
func printWaitingCell(w io.Writer, r client.SessionReview) error {
	for i, c := range r.Cells {
		if c.Cell != r.Waiting {
			continue
		}
		var v client.CellView
		if i < len(r.Views) {
			v = r.Views[i]
		}
		fmt.Fprintf(w, "starter: deciding on cell %d of session %s (settings digest %s); the earlier cells and their output: starter session show %s\n",
			c.Cell, terminal(r.SessionID), r.Settings.Digest, terminal(r.SessionID))
		// What earlier cells left in /work runs with this one's code: their warnings come first.
		for j := range i {
			var earlier client.CellView
			if j < len(r.Views) {
				earlier = r.Views[j]
			}
			if err := printWrittenWarnings(w, r.Cells[j].Cell, earlier); err != nil {
				return err
			}
		}
		return printCell(w, c, v, true, time.Now(), terminalColumns(w))
	}
	return fmt.Errorf("starter: session %s: no cell waits", r.SessionID)
}

// printWrittenWarnings writes one WARNING line for each file cell wrote that a later
// interpreter may run without the code calling it, and each name in those files that reads as
// another.
func printWrittenWarnings(w io.Writer, cell int, v client.CellView) error {
	var b strings.Builder
	for _, x := range v.WrittenStartup {
		fmt.Fprintf(&b, "\nWARNING: cell %d wrote %s\n", cell, terminal(x.String()))
	}
	for _, n := range v.WrittenNames {
		fmt.Fprintf(&b, "\nWARNING: cell %d wrote %s, line %d column %d: %s %s\n", cell, terminal(n.File), n.Line, n.Column, terminal(n.Name), terminal(n.Reason))
	}
	for _, s := range v.WrittenSource {
		fmt.Fprintf(&b, "\nWARNING: cell %d: %s (a later cell that imports or runs it reads other code than shown)\n", cell, terminal(s))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
