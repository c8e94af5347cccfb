package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/guard/human"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// terminal makes s safe to print to a terminal: every invisible, direction-changing or control
// character (an escape sequence could rewrite what the reviewer reads) and every byte that is not
// UTF-8 is written as an escape; so is a carriage return, which would let a line overwrite itself.
func terminal(s string) string {
	return strings.ReplaceAll(pysource.VisibleText(s), "\r", `\r`)
}

// printReview writes what a reviewer reads about a run, for a person: who asked, the limits in
// units, network, env names, the digest, the deadline and the code with line numbers.
func printReview(w io.Writer, r client.Review, now time.Time) error {
	req := r.Request
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("run", "%s (run id %s)", terminal(r.WorkflowID), terminal(r.RunID))
	row("state", "%s", r.State)
	for _, f := range human.Metadata(req.Metadata) {
		row(f.K, "%s", terminal(f.V))
	}
	if req.Conversation != "" {
		row("conversation", "%s (the orchestrator's label; what changed since its previous run or session is shown after the code)", terminal(req.Conversation))
	}
	if req.Digest == "" {
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err := fmt.Fprintln(w, "\nThe request is not checked yet, or its check failed: there is nothing to review.")
		return err
	}
	row("language", "%s, %s", req.Language, human.Bytes(int64(req.CodeBytes)))
	row("backend", "%s", terminal(req.Backend))
	if req.Image != "" {
		row("image", "%s (what the code runs in; the digest binds it)", terminal(req.Image))
	}
	if r.SandboxTaskQueue != "" {
		row("runs on", "task queue %s", terminal(r.SandboxTaskQueue))
	}
	for _, f := range human.Limits(req.Limits) {
		row(f.K, "%s", f.V)
	}
	printSandbox(row, req, r.InputFiles != nil, r.Env, r.SensitiveEnvBytes)
	row("digest", "%s", req.Digest)
	if !r.ApprovalDeadline.IsZero() {
		row("deadline", "%s (%s left)", r.ApprovalDeadline.UTC().Format(time.RFC3339), human.Duration(r.ApprovalDeadline.Sub(now)))
	}
	printDecisions(row, r.Status)
	if t := client.PhasesText(r.Status.Phases); t != "" {
		row("time", "%s", t)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Warning != "" {
		fmt.Fprintf(w, "\n%s\n", r.Warning)
	}
	if r.NamesWarning != "" {
		fmt.Fprintf(w, "\n%s\n", terminal(r.NamesWarning))
	}
	if err := printStartupWarnings(w, req.Warnings); err != nil {
		return err
	}
	cols := terminalColumns(w)
	if err := printNumbered(w, "code", req.Code, cols); err != nil {
		return err
	}
	if err := printInputFiles(w, r.InputFiles, cols); err != nil {
		return err
	}
	return printChanges(w, req.Conversation, false, r.Changes, r.ChangesError)
}

// terminalColumns returns how many columns w shows in a row: the terminal's width when w is one,
// else $COLUMNS, else 80 (a pager or a file is read at about that).
func terminalColumns(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 80
}

// printInputFiles writes each input file, in name order: text numbered like the code, escaped
// the same way; anything else (not UTF-8, or holding NUL) as its size only.
func printInputFiles(w io.Writer, files map[string][]byte, cols int) error {
	return printFiles(w, "input file ", files, cols)
}

// printFiles writes each file's contents, numbered and escaped like the code, under a title of
// prefix and its name; a binary file as its size.
func printFiles(w io.Writer, prefix string, files map[string][]byte, cols int) error {
	for _, name := range slices.Sorted(maps.Keys(files)) {
		b := files[name]
		title := prefix + terminal(name)
		if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
			if _, err := fmt.Fprintf(w, "\n%s: binary, %s (--json gives it as base64)\n", title, human.Bytes(int64(len(b)))); err != nil {
				return err
			}
			continue
		}
		if err := printNumbered(w, title, string(b), cols); err != nil {
			return err
		}
	}
	return nil
}

// printStartupWarnings writes one WARNING line for each input file the interpreter may run
// without the code calling it (pysource.StartupWarnings).
func printStartupWarnings(w io.Writer, warnings []pysource.StartupWarning) error {
	if len(warnings) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nWARNING: %d input file(s) may run without the code calling them; read them as part of the code (--input-files):\n", len(warnings))
	for _, x := range warnings {
		fmt.Fprintf(&b, "  %s\n", terminal(x.String()))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printSandbox writes the rows of what a run's or a session's sandbox gets, as sum says: its
// network and the hosts it may reach, the secrets the proxy adds, the packages, the input files (and how to
// read them, unless filesRead) and the env, with the values and sensitive lengths read.
func printSandbox(row func(k, format string, a ...any), sum guard.Summary, filesRead bool, values map[string]string, sensitive map[string]int) {
	row("network", "%s", human.Network(sum))
	for _, e := range sum.Egress {
		row("", "may reach %s", terminal(e))
	}
	for _, s := range sum.Secrets {
		row("secret", "%s (added by the proxy; the code never sees it)", terminal(s))
	}
	printPackages(row, sum.Packages)
	for _, f := range sum.Files {
		row("input file", "%s, %s", terminal(f.Name), human.Bytes(f.Size))
	}
	if len(sum.Files) > 0 && !filesRead {
		row("", "(contents: --input-files shows them)")
	}
	printEnv(row, sum.EnvNames, values, sensitive)
}

// printPackages writes each package the sandbox host installs before the code runs, and every
// hash a file of it may have, in full: what the digest binds.
func printPackages(row func(k, format string, a ...any), pkgs []guard.Package) {
	for _, p := range pkgs {
		row("package", "%s (installed before the code runs; what it does when imported is trusted)", terminal(p.Requirement()))
		for _, h := range p.Hashes {
			row("", "  --hash=%s", terminal(h))
		}
	}
}

// printEnv writes each env var with its value quoted and escaped (pysource.QuoteValue), a value the
// policy marks sensitive as its length, and a value not read as such.
func printEnv(row func(k, format string, a ...any), names []string, values map[string]string, sensitive map[string]int) {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for _, n := range sorted {
		v, shown := values[n]
		size, hidden := sensitive[n]
		switch {
		case shown:
			row("env", "%s = %s", terminal(n), pysource.QuoteValue(v))
		case hidden:
			row("env", "%s = %s", terminal(n), guard.SensitiveValue(size))
		default:
			row("env", "%s (value not read)", terminal(n))
		}
	}
}

func printDecisions(row func(k, format string, a ...any), st contract.Status) {
	printQuorum(row, st)
	printRules(row, st.Rules, st.Missing, st.Decision == nil)
	if d := st.Decision; d != nil {
		verb := "denied"
		if d.Approve {
			verb = "approved"
		}
		how := d.Method
		if d.Touched {
			how += ", security key touched"
		}
		row("decision", "%s by %s at %s (%s, %s %s)", verb, terminal(d.Reviewer), d.Time.UTC().Format(time.RFC3339), how, d.KeyType, d.Fingerprint)
		if d.Reason != "" {
			row("reason", "%s", terminal(d.Reason))
		}
	}
	if st.RejectedDecisions > 0 {
		row("refused", "%d decision(s); the last because %s", st.RejectedDecisions, terminal(st.LastRejection))
	}
	if st.IgnoredDecisions > 0 {
		row("ignored", "%d decision(s) sent after the accepted one", st.IgnoredDecisions)
	}
	if st.Error != "" {
		row("error", "%s", terminal(st.Error))
	}
}

// printNumbered writes text under title with line numbers, each line escaped for a terminal and
// its tabs drawn at Python's columns (pysource.ShowTabs), counted from the start of the line, not
// from the terminal's tab stops that the line numbers move. A line too long for a row of cols
// columns is broken into rows here, each after the first marked ContinuedMarker where the line
// number stands: left to the terminal, the rest of the line would start a row of its own with
// nothing to tell it from a line of the code (code padded with spaces can make its tail look
// like an indented line of the block above, with a fake "|" before it).
func printNumbered(w io.Writer, title, code string, cols int) error {
	lines := strings.Split(code, "\n")
	if len(lines) > 1 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	width := len(fmt.Sprint(len(lines)))
	// One column spare: some terminals wrap on writing the last one.
	room := max(cols-width-len(" | ")-1, 20)
	var b strings.Builder
	b.WriteString("\n" + title + ":\n")
	wrapped := false
	for i, l := range lines {
		rows := splitColumns(pysource.ShowTabs(terminal(l)), room)
		fmt.Fprintf(&b, "%*d | %s\n", width, i+1, rows[0])
		for _, r := range rows[1:] {
			fmt.Fprintf(&b, "%*s | %s\n", width, ContinuedMarker, r)
			wrapped = true
		}
	}
	if strings.Contains(code, "\t") {
		fmt.Fprintf(&b, "(%s is a tab, drawn to the next multiple of 8 columns, as Python reads indentation)\n", pysource.TabMarker)
	}
	if wrapped {
		fmt.Fprintf(&b, "(%s continues the line above: the same line of the code, broken to fit)\n", ContinuedMarker)
	}
	if !strings.HasSuffix(code, "\n") {
		b.WriteString("(no newline at the end)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ContinuedMarker stands where a line number would, on each row that continues a line of code
// too long for one row.
const ContinuedMarker = "↪"

// splitColumns breaks s, which terminal has made printable, into rows of at most room columns,
// counting a character outside ASCII as two (a wide character is; counting too many only breaks
// a row early, counting too few would let the terminal break it unmarked).
func splitColumns(s string, room int) []string {
	var rows []string
	start, col := 0, 0
	for i, r := range s {
		n := 1
		if r >= utf8.RuneSelf {
			n = 2
		}
		if col+n > room {
			rows = append(rows, s[start:i])
			start, col = i, 0
		}
		col += n
	}
	return append(rows, s[start:])
}

// printPending writes a page of the runs that wait for a decision as a table, newest first, and
// how to get the next page when there is one. details, when given, holds one pendingDetail a
// row: its kind (run, cell N), agent, how long it has waited, its deadline, its code's size and
// first line (escaped).
func printPending(w io.Writer, page client.PendingPage, details []pendingDetail, pageSize int, now time.Time) error {
	pending := page.Runs
	if len(pending) == 0 && page.NextPageToken == "" {
		_, err := fmt.Fprintln(w, "No run waits for a decision.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW ID\tKIND\tWAITING\tDEADLINE\tAGENT\tAPPROVALS\tLANGUAGE\tBACKEND\tDIGEST\tCODE")
	sessions := false
	for i, p := range pending {
		var d pendingDetail
		if i < len(details) {
			d = details[i]
		}
		kind := cmp.Or(d.Kind, p.Kind, client.PendingRun)
		if d.Packages > 0 {
			kind += fmt.Sprintf(" +%d pkg", d.Packages)
		}
		sessions = sessions || p.Kind == client.PendingSession
		approvals := "-"
		if p.Quorum > 0 {
			approvals = fmt.Sprintf("%d of %d", p.Approvals, p.Quorum)
		}
		since := p.StartTime
		if !d.Since.IsZero() {
			since = d.Since
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", terminal(p.WorkflowID), terminal(kind), human.Duration(now.Sub(since)),
			pendingDeadline(d.Deadline, now), cmp.Or(terminal(d.Agent), "-"), approvals, terminal(p.Language), terminal(p.Backend),
			shortDigest(terminal(p.Digest)), pendingCode(d, details != nil))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printPendingFooter(w, sessions); err != nil || page.NextPageToken == "" {
		return err
	}
	size := ""
	if pageSize != defaultPageSize {
		size = fmt.Sprintf(" --page-size %d", pageSize)
	}
	// The token is base64url, no shell quoting needed.
	_, err := fmt.Fprintf(w, "More runs wait; the next page: starter pending%s --next-page %s\n", size, terminal(page.NextPageToken))
	return err
}

// printPendingFooter says where the whole digest and code are, and how to decide on each.
func printPendingFooter(w io.Writer, sessions bool) error {
	if sessions {
		// WAITING of a session is how long its cell has waited, when its status was read.
		if _, err := fmt.Fprintln(w, "A session waits with one cell: read it, and every cell before it, with starter session show ID."); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, "The whole digest and code: starter show ID; to decide on each in turn: starter review.")
	return err
}

// pendingDeadline is when a wait ends, as time left, or "?" when unknown.
func pendingDeadline(deadline, now time.Time) string {
	if deadline.IsZero() {
		return "?"
	}
	if left := deadline.Sub(now); left > 0 {
		return human.Duration(left) + " left"
	}
	return "passed"
}

// pendingCode is the code's size and first line, escaped, "…" when more follows; "?" when its
// status was read but failed, "-" when it was not read.
func pendingCode(d pendingDetail, read bool) string {
	switch {
	case !read:
		return "-"
	case d.Kind == "":
		return "?"
	}
	line := fmt.Sprintf("%s: %s", human.Bytes(int64(d.CodeBytes)), terminal(d.FirstLine))
	if d.More {
		line += " …"
	}
	return line
}

// shortDigest keeps enough of a digest to tell runs apart; `starter show` prints all of it.
func shortDigest(d string) string {
	if len(d) <= len("sha256:")+12 {
		return d
	}
	return d[:len("sha256:")+12] + "…"
}

// printQuorum writes the approvals a run has and needs, and the edit its code is, if any.
func printQuorum(row func(k, format string, a ...any), st contract.Status) {
	if e := st.Edit; e != nil {
		row("edited", "by %s: this is their edit of the code the run was started with (digest %s); approvals of that code no longer count", terminal(e.Editor), terminal(e.OriginalDigest))
	}
	if st.Quorum == 0 {
		return
	}
	var who []string
	for _, a := range st.Approvals {
		who = append(who, fmt.Sprintf("%s (%s)", terminal(a.Reviewer), terminal(a.Fingerprint)))
	}
	had := "none yet"
	if len(who) > 0 {
		had = strings.Join(who, ", ")
	}
	row("approvals", "%d of %d needed, by distinct reviewers with distinct keys: %s", len(st.Approvals), st.Quorum, had)
}

// printRules writes what the policy rules decided for a subject: the policy's hash, each
// group's approvals and, while it waits, what they still lack; the rules' warnings.
func printRules(row func(k, format string, a ...any), r *guard.RuleDecision, missing []string, waiting bool) {
	if r == nil {
		return
	}
	row("policy", "%s", r.PolicyHash)
	for _, g := range r.Groups {
		row("needs", "%d approval(s) from %s (%s), by rule %s", g.Approvals, terminal(g.Group), terminal(strings.Join(g.Principals, ", ")), terminal(strings.Join(g.Rules, ", ")))
	}
	if waiting && len(missing) > 0 {
		row("waiting for", "%s", terminal(strings.Join(missing, " and ")))
	}
	for _, w := range r.Warnings {
		row("WARNING", "%s (policy rule)", terminal(w))
	}
}
