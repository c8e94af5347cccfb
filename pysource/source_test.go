package pysource

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// tabAttack is code that every view drew with its last line inside `if not dry_run:` (a tab 4
// columns wide in the inbox; the terminal's tab stops moved by starter show's line numbers) while
// Python, whose tab stops are 8 apart, runs it after the if, unconditionally. Python accepts it:
// its indentation compares the same with tabs of 8 and of 1 column.
const tabAttack = "def main(dry_run):\n" +
	" \t   \tif not dry_run:\n" +
	" \t   \t    print('deleting')\n" +
	"    \t\tprint('LAUNCHED')\n" +
	"main(True)\n"

func TestShowTabs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"\tx", "⇥       x"},
		{"    \tx", "    ⇥   x"},
		{"       \tx", "       ⇥x"},
		{"\t\tx", "⇥       ⇥       x"},
		{"a\tb", "a⇥      b"},
		{"no tabs", "no tabs"},
		{"literal ⇥ marker", `literal \u21e5 marker`},
	}
	for _, tt := range tests {
		if got := ShowTabs(tt.in); got != tt.want {
			t.Errorf("ShowTabs(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// indentOf returns the column where ShowTabs draws a line's first non-blank character.
func indentOf(line string) int {
	shown := []rune(ShowTabs(line))
	for i, r := range shown {
		if r != ' ' && string(r) != TabMarker {
			return i
		}
	}
	return len(shown)
}

// TestShowTabsDrawsWhatPythonParses draws the tab attack with ShowTabs and checks that the
// launching line is drawn at the if's column, not inside its body, and (with python3) that
// Python indeed runs it after the if.
func TestShowTabsDrawsWhatPythonParses(t *testing.T) {
	lines := strings.Split(tabAttack, "\n")
	ifCol, bodyCol, launchCol := indentOf(lines[1]), indentOf(lines[2]), indentOf(lines[3])
	if launchCol != ifCol || bodyCol <= ifCol {
		t.Fatalf("drawn columns: if %d, body %d, launch %d; want launch at the if's column, left of the body", ifCol, bodyCol, launchCol)
	}
	need.Need(t, need.Python3)
	out, err := exec.Command("python3", "-c", "import sys; exec(sys.argv[1])", tabAttack).CombinedOutput()
	if err != nil {
		t.Fatalf("python3 refused the attack: %v\n%s", err, out)
	}
	if string(out) != "LAUNCHED\n" {
		t.Fatalf("python3 printed %q; want only LAUNCHED (the line runs outside the if)", out)
	}
}

func TestCheckIndentation(t *testing.T) {
	tests := []struct {
		name, src string
		line      int // 0: accepted
	}{
		{"spaces", "if x:\n    y()\n", 0},
		{"tabs", "if x:\n\ty()\n\tif z:\n\t\tw()\n", 0},
		{"the tab attack", tabAttack, 2},
		{"tab after spaces", "if x:\n    \ty()\n", 2},
		{"space after tab", "if x:\n\t y()\n", 2},
		{"tabs on one line, spaces on another", "if x:\n\ty()\nif z:\n    w()\n", 4},
		{"spaces first, then tabs", "if x:\n    y()\nif z:\n\tw()\n", 4},
		{"form feed after spaces", "if x:\n    y()\n    \fz()\n", 3},
		{"form feed at the start", "if x:\n    y()\n\f    z()\n", 3},
		{"form feed on a blank line", "x = 1\n\f\ny = 2\n", 0},
		{"continuation line with a tab", "x = (1,\n\t2)\nif y:\n    z()\n", 4},
		{"inside a string", "s = '''\n\tkeep\n'''\nif y:\n    z()\n", 5},
		{"carriage returns end lines", "if x:\r    y()\r\tz()\r", 3},
		{"blank lines of white space", "if x:\n    y()\n\t\n    z()\n", 0},
	}
	for _, tt := range tests {
		err := CheckIndentation("code", tt.src)
		if tt.line == 0 {
			if err != nil {
				t.Errorf("%s: %v; want accepted", tt.name, err)
			}
			continue
		}
		var tu *Error
		if !errors.As(err, &tu) {
			t.Errorf("%s: got %v; want an *Error", tt.name, err)
			continue
		}
		if want := "code line " + strconv.Itoa(tt.line) + ":"; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want it to name %q", tt.name, err, want)
		}
	}
}

func TestCheckCoding(t *testing.T) {
	refused := []struct {
		name, src string
		line      int
	}{
		{"unicode_escape", "# -*- coding: unicode_escape -*-\n# \\u0027\\nprint('x')\n", 1},
		{"raw_unicode_escape on line 2", "#!/usr/bin/env python3\n# coding=raw_unicode_escape\nx = 1\n", 2},
		{"utf-7", "# coding: utf-7\nx = 1\n", 1},
		{"UTF-7 upper case", "# coding: UTF-7\nx = 1\n", 1},
		{"rot13", "# vim: set fileencoding=rot13 :\nx = 1\n", 1},
		{"punycode", "# coding:punycode\n", 1},
		{"latin-1", "# coding: latin-1\n", 1},
		{"utf-16", "# coding: utf-16\n", 1},
		{"utf8 with a suffix", "# coding: utf8-evil\n", 1},
		{"form feed before the hash", "\f# coding: unicode_escape\n", 1},
		{"line 2 after code on line 1", "x = 1\n# coding: unicode_escape\n", 2},
		{"line 2 after a lone carriage return", "x = 1\r# coding: unicode_escape\n", 2},
		{"after text in the comment", "# this file's coding: unicode-escape\n", 1},
		{"after a UTF-8 byte order mark", "\ufeff# coding: latin-1\n", 1},
		{"an escaping codec on a later line", "x = 1\ny = 2\n# -*- coding: unicode_escape -*-\n", 3},
		{"a here-document to python3", "echo start\npython3 - <<'EOF'\n# coding: utf_7\nprint(1)\nEOF\n", 3},
		// Codecs that decode no escapes still change what Python reads once the line is first.
		{"latin-1 on a later line", "x = 1\ny = 2\n# coding: latin-1\n", 3},
		{"shift_jis on a later line", "echo start\ncat > m.py <<'EOF'\n# coding: shift_jis\nEOF\n", 3},
		{"hz on a later line", "a\nb\nc\n# vim: set fileencoding=hz :\n", 4},
		{"gbk after a lone carriage return", "a\nb\rc\r# coding: gbk\n", 4},
	}
	for _, tt := range refused {
		err := CheckCoding("code", []byte(tt.src))
		var tu *Error
		if !errors.As(err, &tu) || !strings.Contains(err.Error(), "code line "+strconv.Itoa(tt.line)+":") {
			t.Errorf("%s: got %v; want an *Error naming code line %d", tt.name, err, tt.line)
		}
	}
	accepted := []string{
		"# coding: utf-8\nx = 1\n",
		"# -*- coding: UTF-8 -*-\n",
		"# coding=utf8\n",
		"# coding: utf_8\n",
		"# coding: Utf_8\n",
		"# coding: utf-8-unix\n",         // Python reads utf-8-* as UTF-8
		"s = 'coding: unicode_escape'\n", // not a comment
		"print('no declaration')\n",
	}
	for _, src := range accepted {
		if err := CheckCoding("code", []byte(src)); err != nil {
			t.Errorf("%q: %v; want accepted", src, err)
		}
	}
}

// TestCheckCodingMatchesPython asks python3 which codec each refused declaration selects: none
// of them may be UTF-8, and each accepted one must be. One python3 reads them all.
func TestCheckCodingMatchesPython(t *testing.T) {
	need.Need(t, need.Python3)
	tests := []struct {
		decl string
		utf8 bool
	}{
		{"utf-8", true}, {"UTF8", true}, {"utf_8", true}, {"utf-8-unix", true},
		{"unicode_escape", false}, {"raw-unicode-escape", false}, {"utf-7", false}, {"latin-1", false}, {"cp1252", false},
	}
	var srcs []string
	for _, tt := range tests {
		srcs = append(srcs, "# coding: "+tt.decl+"\n")
	}
	in, err := json.Marshal(srcs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-c", `import sys, io, json, tokenize, codecs
for src in json.load(sys.stdin):
    enc, _ = tokenize.detect_encoding(io.BytesIO(src.encode()).readline)
    print(codecs.lookup(enc).name)`)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	names := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(names) != len(tests) {
		t.Fatalf("python3 named %d codecs for %d declarations: %q", len(names), len(tests), out)
	}
	for i, tt := range tests {
		isUTF8 := names[i] == "utf-8"
		if isUTF8 != tt.utf8 {
			t.Fatalf("python3 reads %q as %s; the test expects utf8=%t", tt.decl, names[i], tt.utf8)
		}
		if got := CheckCoding("code", []byte(srcs[i])) == nil; got != tt.utf8 {
			t.Errorf("CheckCoding(%q) accepted=%t; Python reads it as %s", tt.decl, got, names[i])
		}
	}
}

func TestCheckInputSource(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // "" accepted; else a part of the error
	}{
		{"helper.py", "# coding: unicode_escape\n", "input file helper.py line 1: coding declaration"},
		{"data.txt", "# coding: unicode_escape\n", "input file data.txt line 1"},
		{"site.pth", "\xff\xfeimport os\n", "UTF-16 (little-endian) byte order mark"},
		{"script", "#!/usr/bin/env python3\nx = '\xff'\n", "input file script line 2: not valid UTF-8"},
		{"tool.pyw", "\xfe\xff\x00x", "UTF-16 (big-endian)"},
		{"mod.py", "\xef\xbb\xbfx = 1\n", ""}, // the UTF-8 byte order mark is fine
		{"mod.py", "if x:\n    \ty()\n", "input file mod.py line 2: the indentation mixes"},
		{"run", "#!/usr/bin/python3\nif x:\n\ty()\n        z()\n", "input file run line 4"},
		{"Makefile", "all:\n\tcc x.c\n  # spaces\n", ""}, // not Python: indentation is not checked
		{"data.bin", "\xff\xfe\x00binary", ""},           // not source: binary is fine
		{"notes.md", "# coding\n", ""},
	}
	for _, tt := range tests {
		err := CheckInputSource(tt.name, []byte(tt.content), true)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v; want accepted", tt.name, err)
			}
			continue
		}
		var tu *Error
		if !errors.As(err, &tu) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v; want an *Error with %q", tt.name, err, tt.want)
		}
	}
	if err := CheckInputSource("mod.py", []byte("if x:\n    \ty()\n"), false); err != nil {
		t.Errorf("mixed indentation with the check off: %v", err)
	}
}

func TestCheckLineEnds(t *testing.T) {
	for _, tt := range []struct {
		src  string
		line int
	}{
		{"x = 1\r\ny = 2\r\n", 0},
		{"x = 1\n", 0},
		{"if not dry_run:\r    delete()\rlaunch()\n", 1},
		{"a = 1\r\nb = 2\n# c\rd()\n", 3},
		{"end\r", 1},
	} {
		err := CheckLineEnds("code", tt.src)
		if tt.line == 0 {
			if err != nil {
				t.Errorf("%q: %v", tt.src, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "code line "+strconv.Itoa(tt.line)+": a carriage return") {
			t.Errorf("%q: %v; want it refused at line %d", tt.src, err, tt.line)
		}
	}
}

// indentations returns every string of spaces and tabs of length 1 to n.
func indentations(n int) []string {
	out := []string{}
	prev := []string{""}
	for l := 1; l <= n; l++ {
		var next []string
		for _, p := range prev {
			next = append(next, p+" ", p+"\t")
		}
		out = append(out, next...)
		prev = next
	}
	return out
}

// TestShowTabsAgreesWithPythonOnEveryIndentation asks python3 where it puts the last line of
//
//	if True:
//	<A>if True:
//	<A><B>x = 1
//	<C>y = 2
//
// for every A and C of up to 6 spaces and tabs and B a tab, a space or 4 spaces (the shortest
// layouts that a view with tabs 4 wide, or with the terminal's stops moved by line numbers,
// draws in the wrong block need 6), and checks that whenever Python accepts the code,
// the line is drawn (ShowTabs) at the column of the block Python puts it in: the inner if's body,
// the outer if's body, or neither.
func TestShowTabsAgreesWithPythonOnEveryIndentation(t *testing.T) {
	need.Need(t, need.Python3)
	const py = "python3"
	ind, body := indentations(6), []string{"\t", " ", "    "}
	script := `import ast, json, sys
ind, body = json.loads(sys.stdin.read())
out = []
for a in ind:
    for b in body:
        for c in ind:
            try:
                t = ast.parse("if True:\n" + a + "if True:\n" + a + b + "x = 1\n" + c + "y = 2\n")
            except SyntaxError:
                out.append("e")
                continue
            inner = t.body[0].body[0]
            out.append("i" if len(inner.body) == 2 else "o")
print("".join(out))`
	in, _ := json.Marshal([][]string{ind, body})
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	got := strings.TrimSpace(string(out))
	if len(got) != len(ind)*len(body)*len(ind) {
		t.Fatalf("python3 gave %d answers; want %d", len(got), len(ind)*len(body)*len(ind))
	}
	drawn := func(s string) int { return indentOf(s + "x") }
	k, accepted := 0, 0
	for _, a := range ind {
		for _, b := range body {
			for _, c := range ind {
				where := got[k]
				k++
				if where == 'e' {
					continue
				}
				accepted++
				inner, outer, line := drawn(a+b), drawn(a), drawn(c)
				if (where == 'i') != (line == inner) || (where == 'o') != (line == outer) {
					t.Fatalf("A=%q B=%q C=%q: Python puts the line in the %c block, drawn at %d (inner body %d, outer body %d)", a, b, c, where, line, inner, outer)
				}
			}
		}
	}
	t.Logf("%d layouts Python accepts, each drawn where Python puts it", accepted)
}

// TestCheckWrittenCode: what a cell writes is refused when no view can draw it as Python reads it,
// and only warned of otherwise.
func TestCheckWrittenCode(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		refused       bool
	}{
		{"helper.py", "# coding: raw_unicode_escape\n# \\u000aimport os\n", true},
		{"pkg/__init__.py", "# -*- coding: utf-7 -*-\n", true},
		{"data.csv", "a,b\n# coding: cp037\n", true},
		{"mod.pyc", "\x6f\x0d\x0d\x0a", true},
		{"mod.PYO", "", true},
		{"m.py", "if 1:\n\tx = 1\nif 2:\n    y = 2\n", true},
		{"run", "#!/usr/bin/python3\nprint(1)\rprint(2)\n", true},
		{"m.py", "\xff\xfeprint(1)\n", true},
		{"json.py", "x = 1\n", false},
		{"sitecustomize.py", "x = 1\n", false},
		{"log.txt", "10%\r20%\r", false},
		{"data.bin", "\xff\x00\x01", false},
		{"m.py", "# coding: utf-8\nx = 1\n", false},
	} {
		err := CheckWrittenCode(tc.name, []byte(tc.content))
		if (err != nil) != tc.refused || err != nil && !strings.Contains(err.Error(), "written file "+tc.name) {
			t.Errorf("CheckWrittenCode(%q, %q) = %v; want refused %v, naming the file", tc.name, tc.content, err, tc.refused)
		}
	}
}
