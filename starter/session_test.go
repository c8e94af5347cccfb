package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
	"github.com/sandboxflow/sandboxflow/pysource"
)

func TestParseSessionArgsRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"session"},
		{"session", "nosuch", "ID"},
		{"session", "open", "stray"},
		{"session", "open", "--language", "ruby"},
		{"session", "open", "--language", "python,"},
		{"session", "open", "--language", "python,python"},
		{"session", "open", "--language", "python", "--language", "python"},
		{"session", "open", "--language", "python,sh", "--language", "sh"},
		{"session", "open", "--language", ""},
		{"session", "open", "--lifetime", "-1s"},
		{"session", "open", "--idle-timeout", "-1m"},
		{"session", "open", "--max-cells", "-1"},
		{"session", "open", "--max-cells", "1", "--max-cells", "2"},
		{"session", "open", "--timeout", "-1s"},
		{"session", "open", "--env", "A=1", "--env", "A=2"},
		{"session", "open", "--input", "a.txt="},
		{"session", "open", "--allow-host", ""},
		{"session", "open", "--workflow-id", ""},
		{"session", "cell"},
		{"session", "cell", "ID"},
		{"session", "cell", "ID", "--code", "x = 1", "file.py"},
		{"session", "cell", "ID", "a.py", "b.py"},
		{"session", "cell", "ID", "--code", ""},
		{"session", "cell", "ID", "--language", "", "--code", "x"},
		{"session", "show"},
		{"session", "show", "ID", "other"},
		{"session", "close"},
		{"session", "close", "ID", "other"},
		{"approve", "ID", "--key", "k", "--cell", "-1"},
		{"approve", "ID", "--key", "k"},
		{"approve", "ID", "--cell", "2"},
		{"deny", "ID", "--key", "k", "--cell", "2"},
		{"statement", "ID", "--cell", "-2"},
		{"approve", "ID", "--key", "k", "--cell", "1", "--cell", "2"},
	} {
		_, err := parseArgs(args, io.Discard)
		var ue *cli.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("parseArgs(%q) = %v; want a *cli.UsageError", args, err)
		}
	}
}

func TestParseSessionArgsAccepts(t *testing.T) {
	cmd, err := parseArgs([]string{"session", "open", "--language", "python,sh", "--input", "data.csv=/p", "--env", "MODE=fast",
		"--timeout", "5s", "--network", "--allow-host", "api.example.com", "--secret", "TOKEN", "--lifetime", "30m",
		"--idle-timeout", "2m", "--max-cells", "7", "--workflow-id", "session-x", "--agent", "bot", "--capture-content", "--conversation", "task-7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := cmd.session
	if cmd.sub != sessionOpen || !slices.Equal(r.Languages, []string{"python", "sh"}) || cmd.inputs.Map["data.csv"] != "/p" ||
		r.Env["MODE"] != "fast" || r.Limits.Timeout != 5*time.Second || !r.Network || !slices.Equal(r.Egress, []string{"api.example.com"}) ||
		!slices.Equal(r.Secrets, []string{"TOKEN"}) || r.Lifetime != 30*time.Minute || r.IdleTimeout != 2*time.Minute || r.MaxCells != 7 ||
		cmd.workflowID != "session-x" || r.Metadata.Agent != "bot" || !r.CaptureContent || r.Conversation != "task-7" {
		t.Errorf("session open parsed as %+v (settings %+v)", cmd, r)
	}
	cmd, err = parseArgs([]string{"session", "open", "--language", "sh", "--language", "python"}, io.Discard)
	if err != nil || !slices.Equal(cmd.session.Languages, []string{"sh", "python"}) {
		t.Errorf("repeated --language: %+v, %v", cmd, err)
	}
	if cmd, err := parseArgs([]string{"session", "open"}, io.Discard); err != nil || len(cmd.session.Languages) != 0 || cmd.session.MaxCells != 0 {
		t.Errorf("session open with the policy's defaults: %+v, %v", cmd, err)
	}

	cmd, err = parseArgs([]string{"session", "cell", "ID", "--code", "x = 41", "--language", "python", "--wait", "--tool-call-id", "t1"}, io.Discard)
	if err != nil || cmd.sub != sessionCell || cmd.id != "ID" || cmd.code != "x = 41" || cmd.language != "python" || !cmd.wait || cmd.req.Metadata.ToolCallID != "t1" {
		t.Errorf("session cell --code: %+v, %v", cmd, err)
	}
	for _, file := range []string{"cell.py", "-"} {
		cmd, err = parseArgs([]string{"session", "cell", "ID", file}, io.Discard)
		if err != nil || cmd.file != file || cmd.code != "" || cmd.wait {
			t.Errorf("session cell %s: %+v, %v", file, cmd, err)
		}
	}
	cmd, err = parseArgs([]string{"session", "show", "ID", "--json", "--input-files"}, io.Discard)
	if err != nil || cmd.sub != sessionShow || cmd.id != "ID" || !cmd.json || !cmd.inputFiles {
		t.Errorf("session show: %+v, %v", cmd, err)
	}
	cmd, err = parseArgs([]string{"session", "close", "ID", "--reason", "done"}, io.Discard)
	if err != nil || cmd.sub != sessionClose || cmd.id != "ID" || cmd.reason != "done" {
		t.Errorf("session close: %+v, %v", cmd, err)
	}
	for _, tc := range []struct {
		args []string
		cell int
	}{
		{[]string{"approve", "ID", "--cell", "2", "--key", "k"}, 2},
		{[]string{"approve", "ID", "--cell", "2", "--key", "k", "--digest", "d", "--wait"}, 2},
		{[]string{"approve", "ID", "--key", "k", "--digest", "d"}, 0},
		{[]string{"deny", "ID", "--cell", "3", "--key", "k", "--reason", "no"}, 3},
		{[]string{"deny", "ID", "--key", "k", "--reason", "no"}, 0},
		{[]string{"statement", "ID", "--cell", "1", "--deny"}, 1},
	} {
		cmd, err := parseArgs(tc.args, io.Discard)
		if err != nil || cmd.cell != tc.cell || cmd.id != "ID" {
			t.Errorf("parseArgs(%q) = %+v, %v; want cell %d", tc.args, cmd, err, tc.cell)
		}
	}
}

// A session's cell and settings are checked before any connection, as run's request is.
func TestSessionRefusesBeforeDialling(t *testing.T) {
	code, out := runStarter(t, "\xff\xfe", "session", "cell", "ID", "-")
	if code != 1 || errorType(t, out) != "ToolUsageError" || !strings.Contains(out, "UTF-8") {
		t.Errorf("cell code from stdin: exit %d, %s; want 1 and a ToolUsageError about UTF-8", code, out)
	}
	code, out = runStarter(t, "", "session", "cell", "ID", filepath.Join(t.TempDir(), "missing.py"))
	if code != 2 || errorType(t, out) != client.TypeUsageError {
		t.Errorf("missing cell file: exit %d, %s; want 2 and a UsageError", code, out)
	}
	big := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out = runStarter(t, "", "session", "open", "--input", "big.bin="+big)
	if code != 1 || errorType(t, out) != "ToolUsageError" || !strings.Contains(out, "2097152") {
		t.Errorf("3 MiB input: exit %d, %s; want 1 and a ToolUsageError naming 2097152", code, out)
	}
	code, out = runStarter(t, "", "session", "open", "--env", "A=\xff")
	if code != 1 || errorType(t, out) != "ToolUsageError" {
		t.Errorf("env value: exit %d, %s; want 1 and a ToolUsageError", code, out)
	}
}

// hostileSession is a session whose second cell hides what it does from a terminal: a tab in
// its indentation, a right-to-left override and a carriage return that would overwrite a line;
// its first cell printed an escape sequence, and the third waits.
func hostileSession() client.SessionReview {
	hostile := "if True:\n\tx = 1\n        print('ok') # \u202e }\nimport os\ros.system('rm -rf ~')\n"
	res := &guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("done\x1b[2J\r fake prompt\n"), StateReset: true,
		Files: []guard.File{{Name: "out\x1b]0;t\x07.txt", Size: 3}}}
	cells := []contract.CellStatus{
		{Cell: 1, Language: guard.Python, Code: "print('done')\n", State: contract.StatusSucceeded, Result: res,
			DecisionWait: contract.DecisionWait{Decision: &contract.DecisionRecord{Approve: true, Reviewer: "alice", Time: time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC), Method: "ssh"}}},
		{Cell: 2, Language: guard.Python, Code: hostile, State: contract.StatusDenied,
			DecisionWait: contract.DecisionWait{Decision: &contract.DecisionRecord{Reviewer: "bob", Reason: "no\x1b[8m", Time: time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)}}},
		{Cell: 3, Language: guard.Python, Code: "print(x)", State: contract.StatusAwaitingApproval, DecisionWait: contract.DecisionWait{ApprovalDeadline: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)}},
	}
	r := client.SessionReview{SessionID: "session-1", Waiting: 3, SessionStatus: contract.SessionStatus{
		State: contract.SessionOpen, RunID: "r1", SandboxTaskQueue: "host-1", SandboxID: "c0ffee", Cells: cells,
		Settings: guard.SessionSummary{Languages: []string{"python", "sh"}, Backend: "docker", Digest: "sha256:" + strings.Repeat("ab", 32),
			Limits:   guard.Limits{Timeout: 30 * time.Second, MaxStdoutBytes: 1 << 20, MaxStderrBytes: 1 << 20, MaxFiles: 16, MaxFileBytes: 10 << 20, MaxTotalFileBytes: 50 << 20},
			Files:    []guard.FileSummary{{Name: "sitecustomize.py", Size: 10}},
			Warnings: pysource.StartupWarnings([]string{"sitecustomize.py"}),
			EnvNames: []string{"MODE"}, Lifetime: time.Hour, IdleTimeout: 10 * time.Minute, MaxCells: 100},
	}}
	for _, c := range cells {
		v := client.CellView{Cell: c.Cell, SuspiciousCharacters: pysource.SuspiciousCharacters(c.Code)}
		v.Warning = client.SuspiciousWarning(v.SuspiciousCharacters)
		r.Views = append(r.Views, v)
	}
	return r
}

// TestSessionShowMarksWhatShowMarks: a hostile cell's code shows the same marks as `show` draws
// for a run's (the tab drawn at Python's columns, the override and the carriage return escaped,
// the warning about invisible characters), its output is escaped the same way, the input files
// that may run at start-up are warned of, and the waiting cell is marked.
func TestSessionShowMarksWhatShowMarks(t *testing.T) {
	r := hostileSession()
	var b bytes.Buffer
	if err := printSessionReview(&b, r, time.Date(2026, 1, 1, 0, 15, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for i, c := range []byte(out) {
		if (c < 0x20 && c != '\n') || c == 0x7f {
			t.Fatalf("byte %#x at %d reaches the terminal:\n%s", c, i, out)
		}
	}
	if strings.Contains(out, "\u202e") {
		t.Errorf("the override reaches the terminal:\n%s", out)
	}
	// The run's view of the same code, as `show` prints it.
	var run bytes.Buffer
	if err := printNumbered(&run, "cell 2 code", r.Cells[1].Code, terminalColumns(&run)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		run.String(),
		"2 | " + pysource.ShowTabs(`	x = 1`),
		`3 |         print('ok') # \u202e }`, `4 | import os\ros.system('rm -rf ~')`,
		r.Views[1].Warning,
		"=== cell 3 (python, awaiting_approval)  <<< WAITS FOR YOUR DECISION ===",
		"cell 3 waits for a decision", "2026-01-01T01:00:00Z (45m left)", "code      14 B",
		`1 | done\x1b[2J\r fake prompt`, `out\x1b]0;t\x07.txt`, "started afresh",
		"approved by alice", "denied by bob", `no\x1b[8m`,
		"WARNING: 1 input file(s) may run", "sitecustomize.py",
		"task queue host-1", "settings digest", "sha256:" + strings.Repeat("ab", 32), "3 of at most 100",
		"(" + pysource.TabMarker + " is a tab",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("session show lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(r.Views[1].Warning, "RIGHT-TO-LEFT OVERRIDE at line 3") {
		t.Errorf("the hostile cell's warning %q does not name the override", r.Views[1].Warning)
	}
	// The waiting cell alone, as approve prints it before signing, carries the same marks.
	var waiting bytes.Buffer
	if err := printWaitingCell(&waiting, r); err != nil || !strings.Contains(waiting.String(), "<<< WAITS FOR YOUR DECISION") || !strings.Contains(waiting.String(), "1 | print(x)") {
		t.Errorf("printWaitingCell: %v\n%s", err, waiting.String())
	}
}

// starter pending says which rows are sessions, and how to read a session's waiting cell.
func TestPendingShowsSessions(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := printPending(&b, client.PendingPage{Runs: []client.Pending{
		{Kind: client.PendingSession, WorkflowID: "session-1", StartTime: now.Add(-time.Minute), Language: "python", Backend: "docker"},
		{Kind: client.PendingRun, WorkflowID: "sandbox-1", StartTime: now.Add(-time.Minute), Language: "python", Backend: "docker"},
	}}, nil, defaultPageSize, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[0], "KIND") || !strings.Contains(lines[1], "session-1    session") || !strings.Contains(lines[2], "sandbox-1    run") ||
		!strings.Contains(b.String(), "starter session show ID") {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	if err := printPending(&b, client.PendingPage{Runs: []client.Pending{{Kind: client.PendingRun, WorkflowID: "sandbox-1", StartTime: now}}}, nil, defaultPageSize, now); err != nil ||
		strings.Contains(b.String(), "session show") {
		t.Errorf("runs only: %v\n%s", err, b.String())
	}
}

// What cell 1 left in /work is shown to the reviewer of every later cell: warnings always, its
// contents (escaped) with --input-files, and a hint without.
func TestSessionShowShowsWhatEarlierCellsWrote(t *testing.T) {
	r := hostileSession()
	r.Cells[0].Result.Files = []guard.File{
		{Name: "json.py", Size: 30, Content: []byte("def loads(s):\n    return eval(s) # \x1b[2J\n")},
		{Name: "blob.bin", Size: 3, Content: []byte{0, 1, 2}},
	}
	r.Views[0].WrittenStartup = pysource.StartupWarnings([]string{"json.py", "blob.bin"})
	r.Views[0].WrittenNames = []pysource.ConfusableName{{File: "json.py", Line: 2, Column: 5, Name: "x", Reason: "reads as y"}}
	for _, contents := range []bool{false, true} {
		r.InputFiles = nil
		if contents {
			r.InputFiles = map[string][]byte{}
		}
		var b bytes.Buffer
		if err := printSessionReview(&b, r, time.Date(2026, 1, 1, 0, 15, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, 0) {
			t.Fatalf("a control byte reaches the terminal:\n%s", out)
		}
		for _, want := range []string{"WARNING: cell 1 wrote json.py", "WARNING: cell 1 wrote json.py, line 2 column 5: x reads as y"} {
			if !strings.Contains(out, want) {
				t.Errorf("contents %t: session show lacks %q:\n%s", contents, want, out)
			}
		}
		if contents {
			// approve --cell 3 prints the waiting cell; cell 1's warnings come with it.
			var waiting bytes.Buffer
			if err := printWaitingCell(&waiting, r); err != nil || !strings.Contains(waiting.String(), "WARNING: cell 1 wrote json.py") {
				t.Errorf("printWaitingCell: %v; want cell 1's warnings:\n%s", err, waiting.String())
			}
		}
		shown := strings.Contains(out, `2 |     return eval(s) # \x1b[2J`) && strings.Contains(out, "file cell 1 wrote: blob.bin: binary, 3 B")
		hint := strings.Contains(out, "cell 1's files: --input-files shows their contents")
		if shown != contents || hint == contents {
			t.Errorf("contents %t: the file's contents shown %t, the hint shown %t:\n%s", contents, shown, hint, out)
		}
	}
}

// A cell under a quorum shows how many approvals it has and needs, and whose.
func TestPrintCellShowsItsQuorum(t *testing.T) {
	c := contract.CellStatus{Cell: 2, Language: guard.Python, Code: "print(1)", Digest: "sha256:cell", State: contract.StatusAwaitingApproval,
		DecisionWait: contract.DecisionWait{Quorum: 2, Approvals: []contract.DecisionRecord{{ApprovalID: "a-1", Approve: true, Reviewer: "bob"}}}}
	var buf bytes.Buffer
	if err := printCell(&buf, c, client.CellView{Cell: 2}, true, time.Now(), 100); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "1 of 2 needed, by distinct reviewers with distinct keys: bob") {
		t.Errorf("cell printed as:\n%s\nwant its approvals, 1 of 2 by bob", buf.String())
	}
	c.Quorum, c.Approvals = 0, nil
	buf.Reset()
	if err := printCell(&buf, c, client.CellView{Cell: 2}, true, time.Now(), 100); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "approvals") {
		t.Errorf("a cell checked without a quorum printed approvals:\n%s", buf.String())
	}
}

// session show names the session's conversation and prints what changed in its settings since
// the conversation's previous run (or says it is the first, or why it could not be read), with
// the notice, after the settings and before the first cell; the diff's lines are escaped.
func TestSessionShowPrintsItsConversationDiff(t *testing.T) {
	started := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	show := func(r client.SessionReview) string {
		t.Helper()
		var b bytes.Buffer
		if err := printSessionReview(&b, r, started.Add(15*time.Minute)); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	r := hostileSession()
	r.Settings.Conversation = "task-7"
	r.Changes = &client.Changes{Conversation: "task-7", Notice: client.ConversationNotice, Added: 1, Removed: 1, ChangedFiles: []string{"settings"},
		Previous: &client.PreviousRun{WorkflowID: "run-1", RunID: "r0", Started: started, State: contract.StatusSucceeded, Verified: true,
			Decision: &contract.DecisionRecord{Approve: true, Reviewer: "bob"}},
		Diff: "--- previous/settings\n+++ this/settings\n@@ -1 +1 @@\n-language: python\n+language: python, sh \\x1b[2J\n"}
	out := show(r)
	for _, want := range []string{
		"task-7 (the orchestrator's label; what changed since its previous run or session is shown after the settings)",
		"conversation task-7: what changed since its previous run, run-1 (run id r0, started 2026-01-01T00:00:00Z), approved by bob:\n" +
			"1 line(s) added, 1 removed, in settings\n" + r.Changes.Diff + "NOTE: " + client.ConversationNotice + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("session show lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "NOTE: ") > strings.Index(out, "=== cell 1") {
		t.Errorf("the conversation's diff comes after the cells:\n%s", out)
	}

	r.Changes = &client.Changes{Conversation: "task-7", Notice: client.ConversationNotice,
		Previous: &client.PreviousRun{WorkflowID: "session-0", RunID: "s0", Started: started, Session: true, State: contract.SessionClosed}}
	if out := show(r); !strings.Contains(out, "since its previous session, session-0 (run id s0, started 2026-01-01T00:00:00Z), session closed, unverified (a session's state is its workflow's word):\nnothing: the same files and settings") {
		t.Errorf("session show of a session with nothing changed since the previous session:\n%s", out)
	}
	r.Changes = &client.Changes{Conversation: "task-7", Notice: client.ConversationNotice}
	if out := show(r); !strings.Contains(out, "conversation task-7: this is its first run or session") {
		t.Errorf("session show of the conversation's first:\n%s", out)
	}
	r.Changes, r.ChangesError = nil, "list failed\x1b[2J"
	if out := show(r); !strings.Contains(out, `could not be read: list failed\x1b[2J`) {
		t.Errorf("session show of a diff that could not be read:\n%s", out)
	}
	r.Settings.Conversation, r.ChangesError = "", ""
	if out := show(r); strings.Contains(out, "conversation") {
		t.Errorf("session show of a session in no conversation names one:\n%s", out)
	}
}

// TestStatementWarnsOfWhatEarlierCellsLeft: `starter statement --cell 3` prints, with the
// waiting cell's own warnings, what earlier cells left in /work that a later interpreter may read
// as other code (cell 1's helper.py declaring raw_unicode_escape) and the threads the host
// counted alive after the cell before it: the reviewer who signs cell 3 decides with them in view.
func TestStatementWarnsOfWhatEarlierCellsLeft(t *testing.T) {
	r := hostileSession()
	r.Views[0].WrittenSource = []string{"file helper.py line 1: coding declaration raw_unicode_escape\x1b[2J"}
	r.Views[0].WrittenStartup = pysource.StartupWarnings([]string{"json.py"})
	r.Views[2].ThreadsWarning = "1 thread of the interpreter was alive after cell 2"
	var b bytes.Buffer
	warnSession(&b, r, func(v client.CellView) bool { return v.Cell == 3 })
	out := b.String()
	for _, want := range []string{
		"starter: cell 3: WARNING: cell 1: file helper.py line 1: coding declaration raw_unicode_escape",
		"starter: cell 3: WARNING: cell 1 wrote input file json.py: module json shadows",
		"starter: cell 3: 1 thread of the interpreter was alive after cell 2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("statement warnings lack %q:\n%s", want, out)
		}
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Errorf("a control byte reaches the terminal:\n%s", out)
	}
}

// TestSessionShowShowsWhatEarlierCellsShowed: the next cell's reviewer reads what cell 1 showed:
// its outputs listed with type and size, a table drawn as aligned text and a text output, both
// escaped (a table cell holding a terminal escape and markup), an SVG named but never drawn.
func TestSessionShowShowsWhatEarlierCellsShowed(t *testing.T) {
	r := hostileSession()
	r.Cells[0].Result.Outputs = []guard.Output{
		{Index: 1, Source: guard.OutputValue, MIME: guard.MIMETable, Size: 80,
			Data: []byte(`{"columns":["x","note"],"index":["0","1"],"rows":[["1","<b>bold</b>"],["2","\u001b[2Jcleared"]]}`)},
		{Index: 1, Source: guard.OutputValue, MIME: guard.MIMEText, Size: 20, Data: []byte("   x note\n0  1 <b>")},
		{Index: 2, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Size: 4, Data: []byte("\x89PNG")},
		{Index: 3, Source: guard.OutputDisplay, MIME: guard.MIMESVG, Size: 30, Data: []byte("<svg onload=alert(1)></svg>")},
	}
	var b bytes.Buffer
	if err := printSessionReview(&b, r, time.Date(2026, 1, 1, 0, 15, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"output 1", "table", "output 2", "image/png", "output 3", "never drawn",
		"cell 1 output 1 (" + guard.MIMETable + ")", "<b>bold</b>", `\x1b[2Jcleared`} {
		if !strings.Contains(out, want) {
			t.Errorf("session show lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsRune(out, 0x1b) || strings.Contains(out, "onload") {
		t.Errorf("an escape or the SVG's markup reaches the terminal:\n%s", out)
	}
}

// TestShowPrintsWhereTheTimeWent: show prints a run's status phases, and session show each
// cell's, as every door writes them; a status without them prints no time row.
func TestShowPrintsWhereTheTimeWent(t *testing.T) {
	check, wait := int64(12), int64(4200)
	p := &contract.AuditPhases{CheckMS: &check, WaitMS: &wait}
	want := "check 12 ms, wait for a person 4.2 s"
	r := client.Review{WorkflowID: "sandbox-1", Status: contract.Status{State: contract.StatusRunning, Phases: p, Request: guard.Summary{
		Language: guard.Python, Code: "print(1)", CodeBytes: 8, Backend: "docker", Digest: "sha256:" + strings.Repeat("ab", 32)}}}
	var b bytes.Buffer
	if err := printReview(&b, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^time +` + want + `$`).MatchString(b.String()) {
		t.Errorf("show printed:\n%s\nwant a time row %q", b.String(), want)
	}
	c := contract.CellStatus{Cell: 1, Language: guard.Python, Code: "print(1)", Digest: "sha256:cell", State: contract.StatusRunning}
	b.Reset()
	if err := printCell(&b, c, client.CellView{Cell: 1}, false, time.Now(), 100); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "time") {
		t.Errorf("a cell without phases printed a time:\n%s", b.String())
	}
	c.Phases = p
	b.Reset()
	if err := printCell(&b, c, client.CellView{Cell: 1}, false, time.Now(), 100); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), want) {
		t.Errorf("session show printed the cell as:\n%s\nwant %q", b.String(), want)
	}
}

// TestShowPrintsTheImage: show names the image the check recorded, before the decision.
func TestShowPrintsTheImage(t *testing.T) {
	r := client.Review{WorkflowID: "sandbox-1", Status: contract.Status{State: contract.StatusAwaitingApproval, Request: guard.Summary{
		Language: guard.Python, Code: "print(1)", CodeBytes: 8, Backend: "docker", Image: "sha256:c0ffee", Digest: "sha256:" + strings.Repeat("ab", 32)}}}
	var b bytes.Buffer
	if err := printReview(&b, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^image +sha256:c0ffee `).MatchString(b.String()) {
		t.Errorf("show printed:\n%s\nwant an image row", b.String())
	}
}

// TestSessionShowPrintsTheImage: session show names the image its settings record.
func TestSessionShowPrintsTheImage(t *testing.T) {
	r := hostileSession()
	r.Settings.Image = "sha256:c0ffee"
	var b bytes.Buffer
	if err := printSessionReview(&b, r, time.Date(2026, 1, 1, 0, 15, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^image +sha256:c0ffee `).MatchString(b.String()) {
		t.Errorf("session show printed:\n%s\nwant an image row", b.String())
	}
}
