package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// hostileTable is a table whose cells hold a terminal escape and a newline.
const hostileTable = `{"columns":["a","b","c"],"rows":[["1","\u001b[2J","3"],["4","5\n6","7"]]}`

// shownResult is a result whose code printed terminal escapes and showed a figure (PNG, with a
// text representation), a table, an HTML page, a long text and an output over the limits.
func shownResult() guard.Result {
	long := strings.Repeat("line of text\n", 30)
	return guard.Result{
		Outcome: guard.OutcomeSucceeded, OK: true, Duration: 1500 * time.Millisecond,
		Stdout: []byte("hello\x1b[2J\x1b[31mred\rover\n"), Stderr: []byte("warn\x07\n"),
		Files: []guard.File{{Name: "report.csv", Size: 4, Content: []byte("a,b\n")}},
		Usage: &guard.Usage{CPUTime: guard.Duration(2101344843), WallTime: guard.Duration(2412 * time.Millisecond), PeakMemoryBytes: 100 << 20,
			SandboxPeakMemoryBytes: 114 << 20, FilesBytes: 4096, MeasuredBy: guard.UsageByCgroup},
		Outputs: []guard.Output{
			{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Size: 2048, Data: make([]byte, 2048)},
			{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEText, Size: 9, Data: []byte("<Figure>\n")},
			{Index: 2, Source: guard.OutputDisplay, MIME: guard.MIMETable, Size: int64(len(hostileTable)), Data: []byte(hostileTable)},
			{Index: 3, Source: guard.OutputDisplay, MIME: guard.MIMEHTML, Size: 22, Data: []byte("<script>x()</script>\n")},
			{Index: 4, Source: guard.OutputValue, MIME: guard.MIMEText, Size: int64(len(long) + 10), Data: []byte("\x1b]0;title\x07" + long)},
			{Index: 5, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Size: 3 << 20, LeftOut: true},
		},
		OutputsTruncated: true,
		Backend:          "docker", Digest: "sha256:aa",
		Approvals: []guard.Approval{{ApprovalID: "ap-1", Reviewer: "alice\x1b[8m", Fingerprint: "SHA256:key"}},
	}
}

// TestResultViewEscapesAndLists: the summary for a person draws the code's stdout, stderr and
// text outputs with every escape sequence and carriage return escaped (none reaches the
// terminal), lists each file and output with its size and type (a table as rows × columns, markup
// named as such, a left-out output said so), and names who approved and which host's receipt
// verified against what.
func TestResultViewEscapesAndLists(t *testing.T) {
	var b bytes.Buffer
	v := resultView{Label: "run sandbox-1", Result: shownResult(),
		Receipt: receiptCheck{Host: receipt.Host{Name: "host-a", Fingerprint: "SHA256:hostkey"}, Against: "the hosts file hosts"}}
	if err := printResultView(&b, v); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\r\x07") {
		t.Errorf("the summary holds a raw escape, carriage return or bell:\n%q", out)
	}
	for _, want := range []string{
		"outcome    succeeded, exit code 0 (measured by the sandbox host), took 1.5s",
		`1 | hello\x1b[2J\x1b[31mred\rover`,
		`1 | warn\x07`,
		"approved   by alice\\x1b[8m (key SHA256:key, approval ap-1)",
		"receipt    signed by host host-a (SHA256:hostkey), verified against the hosts file hosts",
		"file       report.csv, 4 B",
		"cost       2.101s CPU in 2.412s, 100 MiB peak memory (the sandbox's 114 MiB), 4 KiB in files",
		"output 1   figure, image/png, 2 KiB",
		"           also figure, text/plain, 9 B",
		"output 2   display, table, 2 rows × 3 columns, 73 B",
		"output 3   display, text/html, 22 B (markup: never drawn here; --out writes it)",
		"output 5   figure, image/png, 3 MiB, left out (over the output limits)",
		"some outputs were dropped or left out",
		"output 4 (text/plain), the first 20 lines (",
		`1 | \x1b]0;title\x07line of text`,
	} {
		if !strings.Contains(columns(out), columns(want)) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "<script>") || strings.Contains(out, "<Figure>") {
		t.Errorf("the summary draws markup, or a second representation of a figure:\n%s", out)
	}
	if n := strings.Count(out, "line of text"); n != textOutputLines {
		t.Errorf("the long text output shows %d lines; want it clipped to %d", n, textOutputLines)
	}
}

// columns makes the rows of a table drawn by tabwriter comparable whatever their width: every
// run of two or more spaces becomes two.
func columns(s string) string { return manySpaces.ReplaceAllString(s, "  ") }

var manySpaces = regexp.MustCompile(`  +`)

// A result without a receipt, or one that no host could be checked for, says so where the host
// would be named.
func TestResultViewSaysWhenNoReceiptWasChecked(t *testing.T) {
	var b bytes.Buffer
	v := resultView{Label: "run sandbox-1", Result: guard.Result{Outcome: guard.OutcomeFailed, ExitCode: 3, ExitReportedBy: guard.ReportedByInterpreter},
		Receipt: receiptCheck{Unchecked: "not checked: the run's check recorded no sandbox host key (give --hosts FILE)"}}
	if err := printResultView(&b, v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"exit code 3 (reported by the session's interpreter", "receipt    not checked: the run's check recorded no sandbox host key", "stdout: empty"} {
		if !strings.Contains(columns(b.String()), columns(want)) {
			t.Errorf("the summary lacks %q:\n%s", want, b.String())
		}
	}
}

// Only a terminal gets the summary: a buffer, a pipe or a file gets JSON, and so does a terminal
// with --json.
func TestForPersonOnlyOnATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, out := range map[string]any{"buffer": &bytes.Buffer{}, "pipe": w, "file": f} {
		if forPerson(out.(interface{ Write([]byte) (int, error) }), false) {
			t.Errorf("%s: printed for a person; want JSON", name)
		}
	}
}

func TestClipText(t *testing.T) {
	for _, tc := range []struct {
		in        string
		want      string
		leftBytes int
	}{
		{"a\nb\n", "a\nb\n", 0},
		{strings.Repeat("x\n", 25), strings.Repeat("x\n", textOutputLines), 10},
		{strings.Repeat("é", 2000), strings.Repeat("é", textOutputBytes/2), 2000*2 - textOutputBytes},
	} {
		got, left := clipText(tc.in)
		if got != tc.want || left != tc.leftBytes {
			t.Errorf("clipText(%.20q...) = %.20q..., %d; want %.20q..., %d", tc.in, got, left, tc.want, tc.leftBytes)
		}
	}
}
