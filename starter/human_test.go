package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// hostileReview is a run whose code, file names, env and metadata try to rewrite what the
// reviewer's terminal shows: an escape sequence that erases the line above, a carriage return
// that overwrites a line, a right-to-left override and bytes that are not UTF-8.
func hostileReview(envValues bool) client.Review {
	code := "print('safe')\x1b[1A\x1b[2K\nimport os\ros.system('rm -rf ~') # \u202e }\n\xff"
	r := client.Review{WorkflowID: "sandbox-1", Status: contract.Status{
		State: contract.StatusAwaitingApproval, RunID: "r1", SandboxTaskQueue: "sandboxes",
		DecisionWait: contract.DecisionWait{ApprovalDeadline: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)},
		Request: guard.Summary{
			Language: guard.Python, Code: code, CodeBytes: len(code), Backend: "docker",
			Files:    []guard.FileSummary{{Name: "a\x1b]0;title\x07.txt", Size: 1536}},
			EnvNames: []string{"TOKEN"},
			Limits:   guard.Limits{Timeout: 30 * time.Second, MaxStdoutBytes: 1 << 20, MaxStderrBytes: 1 << 20, MaxFiles: 16, MaxFileBytes: 10 << 20, MaxTotalFileBytes: 50 << 20},
			Egress:   []string{"api.example.com"},
			Digest:   "sha256:" + strings.Repeat("ab", 32),
			Metadata: guard.Metadata{Agent: "bot\x1b[31m", RequestedBy: "alice"},
		},
	}}
	r.SuspiciousCharacters = pysource.SuspiciousCharacters(code)
	r.Warning = client.SuspiciousWarning(r.SuspiciousCharacters)
	if envValues {
		r.Env = map[string]string{"TOKEN": "x\x1b[8m"}
		r.InputFiles = map[string][]byte{"a\x1b]0;title\x07.txt": []byte("ok\x1b[2J\rpayload\u202e\n"), "blob.bin": {0, 1, 2}}
	}
	return r
}

// Nothing from the run reaches the terminal as a control character, and the code is numbered.
func TestShowForPeopleEscapesWhatCouldRewriteTheTerminal(t *testing.T) {
	for _, envValues := range []bool{false, true} {
		var b bytes.Buffer
		if err := printReview(&b, hostileReview(envValues), time.Date(2026, 1, 1, 0, 15, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for i, c := range []byte(out) {
			if (c < 0x20 && c != '\n') || c == 0x7f || c == 0xff {
				t.Fatalf("byte %#x at %d reaches the terminal:\n%s", c, i, out)
			}
		}
		if strings.ContainsAny(out, "\u202e") {
			t.Errorf("the override reaches the terminal:\n%s", out)
		}
		for _, want := range []string{
			`1 | print('safe')\x1b[1A\x1b[2K`, `2 | import os\ros.system('rm -rf ~') # \u202e }`, `3 | \xff`,
			"(no newline at the end)", `a\x1b]0;title\x07.txt, 1.5 KiB`, `bot\x1b[31m`,
			"timeout", "30s", "output files", "16, 10 MiB each, 50 MiB in all",
			"egress: 1 host patterns", "may reach api.example.com", "sha256:" + strings.Repeat("ab", 32),
			"2026-01-01T01:00:00Z (45m left)", "WARNING",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("env values %t: output lacks %q:\n%s", envValues, want, out)
			}
		}
		if envValues != strings.Contains(out, `TOKEN = "x\x1b[8m"`) || envValues == strings.Contains(out, "TOKEN (value not read)") {
			t.Errorf("env values %t: the values are shown, quoted and escaped, once read:\n%s", envValues, out)
		}
		// Input files, when asked for, are numbered and escaped like the code; binary ones give
		// their size.
		shown := strings.Contains(out, "input file a\\x1b]0;title\\x07.txt:\n1 | ok\\x1b[2J\\rpayload\\u202e\n") &&
			strings.Contains(out, "input file blob.bin: binary, 3 B")
		if envValues != shown || envValues == strings.Contains(out, "--input-files shows them") {
			t.Errorf("input files asked for %t: contents shown %t:\n%s", envValues, shown, out)
		}
	}
}

func TestPendingForPeople(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := printPending(&b, client.PendingPage{Runs: []client.Pending{
		{WorkflowID: "sandbox-new\x1b[2J", StartTime: now.Add(-90 * time.Second), Language: "python", Backend: "docker", Digest: "sha256:" + strings.Repeat("cd", 32)},
		{WorkflowID: "sandbox-old", StartTime: now.Add(-3 * time.Hour), Language: "sh", Backend: "local", Digest: "sha256:" + strings.Repeat("ef", 32)},
	}}, []pendingDetail{
		{Kind: "run", Agent: "coder\x1b]0;x\a", CodeBytes: 2048, FirstLine: "import os\x1b[2J", More: true, Deadline: now.Add(time.Hour)},
		{},
	}, defaultPageSize, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], `coder\x1b]0;x\x07`) || !strings.Contains(lines[1], `2 KiB: import os\x1b[2J …`) ||
		!strings.Contains(lines[1], "1h 0m left") || !strings.Contains(lines[2], "?") || !strings.Contains(lines[3], "starter show ID") || !strings.HasPrefix(lines[0], "WORKFLOW ID") ||
		!strings.Contains(lines[1], `sandbox-new\x1b[2J`) || !strings.Contains(lines[1], "1m") || !strings.Contains(lines[1], "sha256:cdcdcdcdcdcd…") ||
		!strings.Contains(lines[2], "sandbox-old") || !strings.Contains(lines[2], "3h 0m") {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	if err := printPending(&b, client.PendingPage{}, nil, defaultPageSize, now); err != nil || !strings.Contains(b.String(), "No run waits") {
		t.Errorf("empty: %q %v", b.String(), err)
	}
	// A page with more after it says how to get the next one, with the page size if not the default.
	b.Reset()
	page := client.PendingPage{Runs: []client.Pending{{WorkflowID: "sandbox-a", StartTime: now}}, NextPageToken: "dG9rZW4"}
	if err := printPending(&b, page, nil, 7, now); err != nil || !strings.Contains(b.String(), "starter pending --page-size 7 --next-page dG9rZW4\n") {
		t.Errorf("next page: %q %v", b.String(), err)
	}
}

// columnOf returns the column at which text starts on the numbered line of out that holds it
// (after the "N | " prefix), or -1.
func columnOf(out, text string) int {
	for _, l := range strings.Split(out, "\n") {
		_, code, ok := strings.Cut(l, " | ")
		if !ok || !strings.Contains(code, text) {
			continue
		}
		return len([]rune(code[:strings.Index(code, text)]))
	}
	return -1
}

// The tab attack of guard's tests (Python runs its last line after the if) is drawn with that line
// at the if's column, left of the if's body, whatever the terminal's tab stops: no tab reaches
// the terminal.
func TestShowDrawsTabsAtPythonsColumns(t *testing.T) {
	code := "def main(dry_run):\n" +
		" \t   \tif not dry_run:\n" +
		" \t   \t    print('deleting')\n" +
		"    \t\tprint('LAUNCHED')\n" +
		"main(True)\n"
	r := client.Review{WorkflowID: "sandbox-1", Status: contract.Status{Request: guard.Summary{
		Language: guard.Python, Code: code, CodeBytes: len(code), Backend: "docker", Digest: "sha256:" + strings.Repeat("ab", 32),
	}}}
	var b bytes.Buffer
	if err := printReview(&b, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "\t") {
		t.Fatalf("a tab reaches the terminal, where its width depends on the line number:\n%s", out)
	}
	ifCol, bodyCol, launchCol := columnOf(out, "if not"), columnOf(out, "print('deleting')"), columnOf(out, "print('LAUNCHED')")
	if launchCol != ifCol || bodyCol <= ifCol {
		t.Errorf("columns: if %d, body %d, launch %d; want the launch at the if's, left of the body:\n%s", ifCol, bodyCol, launchCol, out)
	}
	if !strings.Contains(out, pysource.TabMarker+" is a tab") {
		t.Errorf("the view does not say what %s is:\n%s", pysource.TabMarker, out)
	}
}

// Start-up warnings and env values: every warning is a line of its own, escaped; a sensitive
// value shows as its length, never its text, and a value with spaces and a newline is quoted.
func TestShowWarningsAndEnv(t *testing.T) {
	r := client.Review{WorkflowID: "sandbox-1", Status: contract.Status{Request: guard.Summary{
		Language: guard.Python, Code: "import json\n", Backend: "docker", Digest: "sha256:" + strings.Repeat("ab", 32),
		EnvNames: []string{"MODE", "TOKEN"}, SensitiveEnv: []string{"TOKEN"},
		Warnings: pysource.StartupWarnings([]string{"json.py", "x\u202e.pth"}),
	}}, Extras: client.Extras{Env: map[string]string{"MODE": " dry\nrun "}, SensitiveEnvBytes: map[string]int{"TOKEN": 32}}}
	var b bytes.Buffer
	if err := printReview(&b, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"WARNING: 2 input file(s) may run without the code calling them",
		"  input file json.py: module json shadows the standard module",
		`  input file x\u202e.pth: a .pth file`,
		`MODE = " dry\nrun "`,
		"TOKEN = ‹sensitive, 32 bytes›",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
