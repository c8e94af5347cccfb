package guard

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// These tests check that Check and Recheck apply pysource's checks, and report what they refuse
// as a ToolUsageError.

// tabAttack is code (as in pysource's tests) that every view drew with its last line inside `if not dry_run:` (a tab 4
// columns wide in the inbox; the terminal's tab stops moved by starter show's line numbers) while
// Python, whose tab stops are 8 apart, runs it after the if, unconditionally. Python accepts it:
// its indentation compares the same with tabs of 8 and of 1 column.
const tabAttack = "def main(dry_run):\n" +
	" \t   \tif not dry_run:\n" +
	" \t   \t    print('deleting')\n" +
	"    \t\tprint('LAUNCHED')\n" +
	"main(True)\n"

// TestPolicyRefusesSources checks that Check and Recheck apply the source checks, and that
// AllowMixedIndentation turns off the indentation check only.
func TestPolicyRefusesSources(t *testing.T) {
	var p Policy
	for _, req := range []Request{
		{Code: tabAttack},
		{Code: "# coding: unicode_escape\nx = 1\n"},
		{Code: "import helper\n", Settings: Settings{Files: map[string][]byte{"helper.py": []byte("# coding: utf-7\n")}}},
		{Code: "import helper\n", Settings: Settings{Files: map[string][]byte{"helper.py": []byte("if x:\n \ty()\n")}}},
	} {
		_, err := p.Check(req, "docker")
		var tu *ToolUsageError
		if !errors.As(err, &tu) {
			t.Errorf("Check(%q): %v; want a ToolUsageError", req.Code, err)
		}
	}
	c, err := Policy{AllowMixedIndentation: true}.Check(Request{Code: tabAttack}, "docker")
	if err != nil {
		t.Fatalf("AllowMixedIndentation: %v", err)
	}
	if err := p.Recheck(c); err == nil {
		t.Error("Recheck under the default policy accepted mixed indentation checked under a looser one")
	}
	if _, err := (Policy{AllowMixedIndentation: true}).Check(Request{Code: "# coding: unicode_escape\n"}, "docker"); err == nil {
		t.Error("AllowMixedIndentation accepted a coding declaration")
	}
	// A form feed in indentation is refused whatever the setting: no view can draw it where
	// Python puts the line.
	for _, req := range []Request{
		{Code: "if False:\n    x = 1\n    \fprint('out')\n"},
		{Code: "import m\n", Settings: Settings{Files: map[string][]byte{"m.py": []byte("if False:\n\tx = 1\n\t\fprint('out')\n")}}},
	} {
		if _, err := (Policy{AllowMixedIndentation: true}).Check(req, "docker"); err == nil || !strings.Contains(err.Error(), "form feed") {
			t.Errorf("AllowMixedIndentation, form feed: %v; want it refused", err)
		}
	}
	if _, err := (Policy{AllowMixedIndentation: true}).Check(Request{Code: "x = 1\n\f\ny = 2\n"}, "docker"); err != nil {
		t.Errorf("a page break line: %v", err)
	}
}

// TestCheckRefusesLoneCarriageReturns: Check applies pysource.CheckLineEnds to Python code, to
// every text input file and to shell code, which hands Python its lines as they are.
func TestCheckRefusesLoneCarriageReturns(t *testing.T) {
	var p Policy
	if _, err := p.Check(Request{Code: "x = 1\r# \rimport os\n"}, "docker"); err == nil {
		t.Error("Check accepted a lone carriage return in Python code")
	}
	if _, err := p.Check(Request{Code: "import m\n", Settings: Settings{Files: map[string][]byte{"m.py": []byte("ROLE = 'guest'\rROLE = 'admin'\n")}}}, "docker"); err == nil {
		t.Error("Check accepted a lone carriage return in a Python input file")
	}
	// A text file of any name can be run as Python (exec(open(...).read()), runpy.run_path):
	// a lone carriage return ends a line there too, where every view draws one line.
	if _, err := p.Check(Request{Code: "print(1)\n", Settings: Settings{Files: map[string][]byte{"notes.txt": []byte("# a note\rprint('x')\n")}}}, "docker"); err == nil ||
		!strings.Contains(err.Error(), "input file notes.txt line 1: a carriage return") {
		t.Errorf("a lone carriage return in a text file: %v; want it refused, naming the file and line", err)
	}
	if _, err := p.Check(Request{Code: "print(1)\n", Settings: Settings{Files: map[string][]byte{"notes.txt": []byte("if False:\n    x = 1\n    \fprint('x')\n")}}}, "docker"); err == nil ||
		!strings.Contains(err.Error(), "input file notes.txt line 3: a form feed") {
		t.Errorf("a form feed in the indentation of a text file: %v; want it refused, naming the file and line", err)
	}
	if _, err := p.Check(Request{Code: "print(1)\n", Settings: Settings{Files: map[string][]byte{"notes.txt": []byte("a\r\nb\r\n\f\n"), "blob.bin": {'a', '\r', 0, 'b'}}}}, "docker"); err != nil {
		t.Errorf("CRLF text and a binary file with a carriage return: %v; want accepted", err)
	}
	sh := Policy{Languages: []string{Python, Shell}}
	if _, err := sh.Check(Request{Code: "python3 - <<'EOF'\n# coding: raw_unicode_escape\n# \\nimport os\nEOF\n", Language: Shell}, "docker"); err == nil {
		t.Error("shell code that pipes a unicode_escape declaration to python3 was accepted")
	}
	for _, code := range []string{"python3 -c \"# a note\rprint('x')\"\n", "python3 - <<'EOF'\nif False:\n    x = 1\n    \fprint('x')\nEOF\n"} {
		if _, err := sh.Check(Request{Code: code, Language: Shell}, "docker"); err == nil {
			t.Errorf("shell code %q accepted: sh hands Python a lone carriage return or a form feed in indentation as they are", code)
		}
	}
	if _, err := sh.Check(Request{Code: "echo a\r\necho b\r\n\f\n", Language: Shell}, "docker"); err != nil {
		t.Errorf("shell code with CRLF and a page break: %v", err)
	}
	if _, err := sh.Check(Request{Code: "\techo x\n  echo y\n", Language: Shell}, "docker"); err != nil {
		t.Errorf("shell code: %v; indentation is not checked for sh", err)
	}
}

// TestCheckRefusesShadowedModules: Check applies pysource.CheckModuleNames before approval.
func TestCheckRefusesShadowedModules(t *testing.T) {
	_, err := Policy{}.Check(Request{Code: "import helper", Settings: Settings{
		Files: map[string][]byte{
			"helper.py": []byte("VALUE = 1\n"), "helper/__init__.py": []byte("VALUE = 2\n")},
	}}, "test")
	var te *ToolUsageError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "helper/__init__.py") {
		t.Errorf("Check: got %v; want a ToolUsageError naming helper/__init__.py", err)
	}
}

func TestCheckHereDocs(t *testing.T) {
	sh := Policy{Languages: []string{Python, Shell}}
	refused := []struct {
		name, code string
		line       int
	}{
		{"python3 - <<-EOF", "python3 - <<-EOF\nif False:\n        pass\n\tprint('out')\nEOF\n", 4},
		{"a quoted delimiter", "cat > m.py <<-'EOF'\n\tx = 1\nEOF\n", 2},
		{"the tab on the delimiter line only", "x=1\ncat <<-END\nhello\n\tEND\n", 4},
		{"a tab after a carriage return", "cat <<-E\n\tx\rE\n", 2},
		{"a body past a delimiter line with a carriage return", "python3 - <<EOF\nx = 1\nEOF\r\ns = \"\\\\\\\"\"\nEOF\n", 4},
		// An unquoted delimiter: sh reads the backslashes of the body.
		{"a comment ending in a backslash", "python3 - <<EOF\ndry = False\n# force a dry run \\\ndry = True\nEOF\n", 3},
		{"an escaped backslash before a quote", "python3 - <<EOF\ns = \"C:\\\\\\\"; print('x') #\"\nEOF\n", 2},
		{"a backslash before a dollar", "cat <<E >m.py\nprint('\\$HOME')\nE\n", 2},
		{"a backslash before a backquote", "cat <<E\n\\`x\\`\nE\n", 2},
		{"<<- and a backslash", "cat <<-E\na\\\n\tE\n", 2},
		{"the second here-document of a line", "cat <<'A' <<B\nA\nx\\\nB\n", 3},
		{"an unquoted delimiter on the next line", "python3 - <<\\\nEOF\ndry_run = False\n# a dry run \\\ndry_run = True\nEOF\n", 4},
		{"an operator broken across lines", "python3 - <\\\n<EOF\nx\nEOF\n", 1},
		{"an operator broken across three lines", "echo a\npython3 - <\\\n\\\n<EOF\nx\nEOF\n", 2},
		{"<<- broken after <<", "python3 - <<\\\n-EOF\n\tprint(1)\nEOF\n", 3},
		{"a delimiter broken across lines", "cat <<E\\\nOF\nx\\\nEOF\n", 3},
		{"a delimiter that looks quoted elsewhere", "echo \"<<'X'\" ; cat <<X\n\\\\\nX\n", 2},
	}
	for _, tt := range refused {
		_, err := sh.Check(Request{Code: tt.code, Language: Shell}, "docker")
		var tu *ToolUsageError
		if !errors.As(err, &tu) || !strings.Contains(err.Error(), "code line "+strconv.Itoa(tt.line)+":") {
			t.Errorf("%s: got %v; want a ToolUsageError naming code line %d", tt.name, err, tt.line)
		}
	}
	// An input file of any name can be run by sh.
	_, err := sh.Check(Request{Code: "sh run.txt\n", Language: Shell,
		Settings: Settings{
			Files: map[string][]byte{"run.txt": []byte("python3 - <<-EOF\n\tprint(1)\nEOF\n")},
		}}, "docker")
	if err == nil || !strings.Contains(err.Error(), "input file run.txt line 2:") {
		t.Errorf("an input file with <<- and a tab: %v; want it refused, naming the file and line", err)
	}
	for _, code := range []string{
		"\techo x\npython3 - <<EOF\n\tprint(1)\nEOF\n",     // << keeps the tabs: Python reads them as drawn
		"\tcat <<-EOF\n    x\nEOF\n",                       // a tab before the <<- line, none after
		"python3 - <<'EOF'\ns = 'a\\\\b' \\\nEOF\n",        // a quoted delimiter: the body is handed on as it is
		"cat <<\\E\n\\\\\nE\n",                             // quoted with a backslash
		"cat <<E\\\\\nx\nE\\\n",                            // an escaped backslash ends the word: quoted, the line does not go on
		"cat <<EOF\nprint('a\\nb')\nEOF\necho a \\\n  b\n", // \n is kept; after the delimiter, sh's own continuation
	} {
		if _, err := sh.Check(Request{Code: code, Language: Shell}, "docker"); err != nil {
			t.Errorf("%q: %v; want accepted", code, err)
		}
	}
	// Binary input files are not text sh reads; their bytes may hold anything.
	if _, err := sh.Check(Request{Code: "echo\n", Language: Shell,
		Settings: Settings{
			Files: map[string][]byte{"blob.bin": []byte("<<-\n\t\x00\xff")},
		}}, "docker"); err != nil {
		t.Errorf("a binary input file: %v; want accepted", err)
	}
}
