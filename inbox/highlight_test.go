package inbox

import (
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
)

func classes(lines []codeLine) map[string][]string {
	m := map[string][]string{}
	for _, l := range lines {
		for _, t := range l.Tokens {
			m[t.Class] = append(m[t.Class], t.Text)
		}
	}
	return m
}

func TestHighlightPython(t *testing.T) {
	code := "import os\n# note\ndef f(x):\n    return print(\"hi\", 42)  # done\ns = '''a\nb'''\n"
	lines, inv := highlight(code, "python")
	if inv != 0 {
		t.Errorf("invisible = %d; want 0", inv)
	}
	if len(lines) != 6 || lines[5].N != 6 {
		t.Fatalf("got %d lines; want 6", len(lines))
	}
	c := classes(lines)
	for class, want := range map[string]string{tokKeyword: "import def return", tokBuiltin: "print", tokNumber: "42", tokComment: "# note", tokString: "\"hi\""} {
		for _, w := range strings.Fields(want) {
			if !strings.Contains(strings.Join(c[class], " "), w) {
				t.Errorf("class %s: %q lacks %q", class, c[class], w)
			}
		}
	}
	if !strings.Contains(strings.Join(c[tokString], "|"), "b'''") {
		t.Errorf("the triple-quoted string does not run over two lines: %q", c[tokString])
	}
}

func TestHighlightShell(t *testing.T) {
	lines, _ := highlight("if [ -n \"$HOME\" ]; then echo ${X} # c\nfi\n", "sh")
	c := classes(lines)
	if strings.Join(c[tokKeyword], " ") != "if then fi" || len(c[tokVar]) != 1 || c[tokComment][0] != "# c" {
		t.Errorf("classes %q", c)
	}
}

func TestInvisibleShown(t *testing.T) {
	code := "access = 'user'\u202e # admin\u2066\nx\u200b = 1\ufeff\n"
	lines, inv := highlight(code, "python")
	if inv != 4 {
		t.Errorf("invisible = %d; want 4", inv)
	}
	got := strings.Join(classes(lines)[tokInvisible], " ")
	if got != `\u202e \u2066 \u200b \ufeff` {
		t.Errorf("escapes %q", got)
	}
	for _, l := range lines {
		for _, tk := range l.Tokens {
			if strings.ContainsAny(tk.Text, "\u202e\u2066\u200b\ufeff") {
				t.Errorf("token %q still holds an invisible character", tk.Text)
			}
		}
	}
	if v := visible("a\u202eb\x1b"); v != `a\u202eb\u001b` {
		t.Errorf("visible = %q", v)
	}
}

// TestInvisibleShownAsGuardListsThem: the inbox escapes and counts every character the
// statement and `starter show` list (pysource.SuspiciousCharacters), among them those that hide a
// payload in plain sight: variation selectors after an emoji ("emoji smuggling"), tag
// characters, private use, a lone U+FFFD.
func TestInvisibleShownAsGuardListsThem(t *testing.T) {
	code := "greeting = '\U0001F600\U000E0100\U000E0142\uFE0F'\nflag = '\U000E0061\U000E0064'\nx = '\uE000\uFFFD'\n"
	lines, inv := highlight(code, "python")
	if want := len(pysource.SuspiciousCharacters(code)); inv != want || want != 7 {
		t.Errorf("invisible = %d; guard lists %d (want 7)", inv, want)
	}
	got := strings.Join(classes(lines)[tokInvisible], " ")
	if got != `\U000e0100 \U000e0142 \ufe0f \U000e0061 \U000e0064 \ue000 \ufffd` {
		t.Errorf("escapes %q", got)
	}
	for _, l := range lines {
		for _, tk := range l.Tokens {
			if tk.Class != tokInvisible && strings.ContainsFunc(tk.Text, pysource.IsSuspicious) {
				t.Errorf("token %q still holds a character guard lists", tk.Text)
			}
		}
	}
	if v := visible("a\rb\xffc"); v != `a\u000db\xffc` {
		t.Errorf("visible = %q", v)
	}
}

// A name that mixes scripts is marked where it stands, with the reason as its title; the text
// around it keeps its class.
func TestConfusableNamesMarked(t *testing.T) {
	lines, _ := highlight("x = 1\nif p\u0430ypal: print('\u200b', p\u0430ypal)\n", "python")
	var marked []string
	for _, tok := range lines[1].Tokens {
		if tok.Class == tokConfusable {
			marked = append(marked, tok.Text)
			if !strings.Contains(tok.Title, "mixes scripts (Cyrillic, Latin)") {
				t.Errorf("title %q", tok.Title)
			}
		}
	}
	if strings.Join(marked, "|") != "p\u0430ypal|p\u0430ypal" {
		t.Errorf("marked %q; want both p\u0430ypal (after an escaped invisible character too)", marked)
	}
}

// Tabs become tab tokens that end at Python's next tab stop, counted from the line's start.
func TestTabsDrawnAtPythonsColumns(t *testing.T) {
	lines, _ := highlight("if x:\n  \ty = '\t'\n", "python")
	var text string
	for _, tok := range lines[1].Tokens {
		text += tok.Text
	}
	if want := "  ⇥     y = '⇥  '"; text != want {
		t.Errorf("line drawn as %q; want %q", text, want)
	}
}

// An input module that the policy accepts and Python imports, with a form feed between its
// sections and an escape sequence in a string, is drawn with those characters escaped, as starter
// show draws it: the page called it "binary (not shown)", so the reviewer read none of its code.
// Only what is not UTF-8 or holds NUL is binary, at both doors.
func TestInputFilesShowControlCharacters(t *testing.T) {
	module := "def f():\n    return 1\n\f\nBANNER = '\x1b[2J'\nimport os; os.system('x')\n"
	req := guard.Request{Code: "import helper\n", Language: guard.Python, Settings: guard.Settings{
		Files: map[string][]byte{
			"helper.py": []byte(module), "blob.bin": {0, 1, 2}, "latin.txt": {0xe9},
		},
	}}
	if _, err := (guard.Policy{}).Check(req, "docker"); err != nil {
		t.Fatalf("the policy refuses the module: %v (the test shows nothing)", err)
	}
	files := inputFiles(req)
	byName := map[string]inputFile{}
	for _, f := range files {
		byName[f.Name] = f
	}
	h := byName["helper.py"]
	if h.Binary || !strings.Contains(h.Preview, `\u000c`) || !strings.Contains(h.Preview, `BANNER = '\u001b[2J'`) || !strings.Contains(h.Preview, "os.system('x')") {
		t.Errorf("helper.py drawn as binary=%t %q; want its text with \\u000c and \\u001b escaped", h.Binary, h.Preview)
	}
	if strings.ContainsAny(h.Preview, "\f\x1b") {
		t.Errorf("a control character reaches the page: %q", h.Preview)
	}
	if !byName["blob.bin"].Binary || !byName["latin.txt"].Binary {
		t.Errorf("NUL or bytes that are not UTF-8 drawn as text: %+v", files)
	}
}
