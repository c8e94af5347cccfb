package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/guard/human"
	"github.com/sandboxflow/sandboxflow/internal/outputtext"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// resultView is a result as the starter shows it to a person (printResultView): the result,
// what the starter checked of its receipt, and what --out wrote. printOutcome builds it, for
// result and for every --wait that prints a result.
type resultView struct {
	// Label names what ran: "run sandbox-...", or a session's cell.
	Label  string
	Result guard.Result
	// Receipt is what the starter checked of the result's receipt.
	Receipt receiptCheck
	// Out is what --out wrote; nil without --out.
	Out *outWritten
	// Phases is where a run's time went (client.PhasesText of its audit record); "" for a cell
	// or when the history could not be read.
	Phases string
}

// receiptCheck is which sandbox host's receipt a result carries and what it verified against,
// or why none was checked.
type receiptCheck struct {
	// Host is the host whose key signed the receipt, once it verified against Against.
	Host    receipt.Host
	Against string
	// Unchecked, when set, says why no host is named: no receipt, no hosts to check it against.
	Unchecked string
}

// textOutputLines and textOutputBytes clip a text output in the summary; --out writes it whole.
const (
	textOutputLines = 20
	textOutputBytes = 2048
)

// forPerson says whether result prints for a person: stdout is a terminal and --json was not
// given. Scripts, pipes and files get the JSON they always got.
func forPerson(stdout io.Writer, asJSON bool) bool {
	f, ok := stdout.(*os.File)
	return !asJSON && ok && term.IsTerminal(int(f.Fd()))
}

// printResultView writes a result for a person: how it ended and who says so, who approved it,
// which host's receipt vouches for it, the files and outputs with their sizes and types, then
// stdout, stderr and the text outputs, numbered and escaped as show escapes code (the code wrote
// them: no escape sequence of theirs reaches the terminal), and what --out wrote.
func printResultView(w io.Writer, v resultView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	printOutcomeRows(row, v)
	printProduceRows(row, v.Result)
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printResultStreams(w, v.Result); err != nil {
		return err
	}
	return printOutWritten(w, v.Out)
}

// printOutcomeRows writes the rows of how the run ended, who approved it and what vouches for it.
func printOutcomeRows(row func(k, format string, a ...any), v resultView) {
	r := v.Result
	row("run", "%s", terminal(v.Label))
	exit := human.ExitSource(r)
	if exit == "" {
		exit = " (measured by the sandbox host)"
	}
	row("outcome", "%s, exit code %d%s, took %s", r.Outcome, r.ExitCode, exit, roundDuration(r.Duration))
	if r.Signal != 0 {
		row("", "ended by signal %d", r.Signal)
	}
	if v.Phases != "" {
		row("time", "%s", v.Phases)
	}
	if c := r.Cancelled; c != nil {
		row("cancelled", "by %s: %s", terminal(c.By), terminal(c.Reason))
	}
	if rc := r.Recovered; rc != nil {
		row("recovered", "late, after a %s timeout of activity %s: the host delivered it afterwards", terminal(rc.Timeout), terminal(rc.ActivityID))
	}
	for _, a := range r.Approvals {
		row("approved", "by %s (key %s, approval %s)", terminal(a.Reviewer), terminal(a.Fingerprint), terminal(a.ApprovalID))
	}
	if len(r.Approvals) == 0 && r.Reviewer != "" {
		row("approved", "by %s (approval %s)", terminal(r.Reviewer), terminal(r.ApprovalID))
	}
	if e := r.Edit; e != nil {
		row("edited", "the code that ran is %s's edit (digest %s) of the code the run was started with (%s)", terminal(e.Editor), terminal(e.Digest), terminal(e.OriginalDigest))
	}
	switch rc := v.Receipt; {
	case rc.Unchecked != "":
		row("receipt", "%s", rc.Unchecked)
	default:
		row("receipt", "signed by host %s (%s), verified against %s", terminal(rc.Host.Name), terminal(rc.Host.Fingerprint), terminal(rc.Against))
	}
	if r.Backend != "" {
		ran := terminal(r.Backend)
		if r.ImageID != "" {
			ran += ", image " + shortDigest(terminal(r.ImageID))
		}
		row("ran on", "%s", ran)
	}
	if r.StateReset {
		row("", "the interpreter was started afresh for this cell: variables and imports of earlier cells are gone")
	}
	if r.ThreadsAlive > 0 {
		row("threads", "%d left running in the interpreter: they run on into later cells", r.ThreadsAlive)
	}
}

// roundDuration keeps what a person reads of d: milliseconds, or microseconds under one.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// printProduceRows writes the rows of what the run cost and what the code produced besides its
// streams: connections, files and outputs, each with its size and type.
func printProduceRows(row func(k, format string, a ...any), r guard.Result) {
	if u := r.Usage; u != nil && u.MeasuredBy != "" {
		row("cost", "%s CPU in %s, %s peak memory (the sandbox's %s), %s in files", roundDuration(time.Duration(u.CPUTime)),
			roundDuration(time.Duration(u.WallTime)), human.Bytes(u.PeakMemoryBytes), human.Bytes(u.SandboxPeakMemoryBytes), human.Bytes(u.FilesBytes))
	}
	if e := r.Egress; e != nil {
		row("egress", "%d connection attempt(s), %s out, %s in", len(e.Attempts)+e.Dropped, human.Bytes(e.BytesOut), human.Bytes(e.BytesIn))
	}
	for _, f := range r.Files {
		row("file", "%s, %s", terminal(f.Name), human.Bytes(f.Size))
	}
	if r.FilesTruncated {
		row("", "some files were left out (limits or names)")
	}
	printOutputRows(row, r.Outputs, r.OutputsTruncated)
}

// printOutputRows writes a row for each output: what it is and its size, the other
// representations of the same shown thing as "also".
func printOutputRows(row func(k, format string, a ...any), outs []guard.Output, truncated bool) {
	last := 0
	for _, o := range outs {
		k := fmt.Sprintf("output %d", o.Index)
		what := outputtext.Describe(o)
		if o.Index == last {
			k, what = "", "also "+what
		}
		last = o.Index
		if (o.MIME == guard.MIMEHTML || o.MIME == guard.MIMESVG) && !o.LeftOut {
			what += " (markup: never drawn here; --out writes it)"
		}
		row(k, "%s", what)
	}
	if truncated {
		row("", "some outputs were dropped or left out (the output limits)")
	}
}

// printResultStreams writes stdout and stderr numbered and escaped, each unless empty, and each
// text output that is the first representation of what the code showed, clipped.
func printResultStreams(w io.Writer, r guard.Result) error {
	cols := terminalColumns(w)
	for _, s := range []struct {
		name              string
		b                 []byte
		truncated, binary bool
	}{{"stdout", r.Stdout, r.StdoutTruncated, r.StdoutBinary}, {"stderr", r.Stderr, r.StderrTruncated, r.StderrBinary}} {
		if len(s.b) == 0 && !s.truncated {
			if _, err := fmt.Fprintf(w, "\n%s: empty\n", s.name); err != nil {
				return err
			}
			continue
		}
		title := s.name
		if s.truncated {
			title += " (truncated: the code wrote more)"
		}
		if s.binary {
			title += " (not UTF-8: the bytes that were not show as \uFFFD)"
		}
		if err := printNumbered(w, title, string(s.b), cols); err != nil {
			return err
		}
	}
	return printOutputTexts(w, "", r.Outputs, cols)
}

// printOutputTexts writes, for each shown thing whose first representation is text, JSON or a
// table, that representation numbered and escaped (a table as aligned text), clipped; each title
// starts with prefix.
func printOutputTexts(w io.Writer, prefix string, outs []guard.Output, cols int) error {
	last := 0
	for _, o := range outs {
		first := o.Index != last
		last = o.Index
		if !first || o.LeftOut {
			continue
		}
		text := string(o.Data)
		switch o.MIME {
		case guard.MIMEText, guard.MIMEJSON:
		case guard.MIMETable:
			t, err := outputtext.Table(o.Data)
			if err != nil {
				continue
			}
			text = outputtext.TableText(t, textOutputBytes)
		default:
			continue
		}
		text, clipped := clipText(text)
		title := fmt.Sprintf("%soutput %d (%s)", prefix, o.Index, o.MIME)
		if clipped > 0 {
			title += fmt.Sprintf(", the first %d lines (%s more: --out writes it whole)", textOutputLines, human.Bytes(int64(clipped)))
		}
		if err := printNumbered(w, title, text, cols); err != nil {
			return err
		}
	}
	return nil
}

// clipText keeps the first textOutputLines lines of s, and at most textOutputBytes bytes (cut
// at a character's start), and returns how many bytes it left out.
func clipText(s string) (string, int) {
	cut, lines := len(s), 0
	for i := 0; i < len(s) && cut == len(s); i++ {
		if s[i] == '\n' {
			if lines++; lines == textOutputLines {
				cut = i + 1
			}
		}
	}
	if cut > textOutputBytes {
		cut = textOutputBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
	}
	return s[:cut], len(s) - cut
}

// printOutWritten writes what --out wrote, and where.
func printOutWritten(w io.Writer, out *outWritten) error {
	if out == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nwritten to %s:\n", terminal(out.Dir))
	if len(out.Files) == 0 {
		b.WriteString("  nothing: the result has no files and no outputs with data\n")
	}
	for _, f := range out.Files {
		fmt.Fprintf(&b, "  %s  %s (%s)\n", terminal(f.Name), human.Bytes(f.Size), terminal(f.What))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
