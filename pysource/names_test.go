package pysource

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

func TestConfusableNames(t *testing.T) {
	code := "p\u0430ypal = 1\n" + // Cyrillic а in a Latin word
		"\uff50\uff52\uff49\uff4e\uff54('fullwidth')\n" + // ｐｒｉｎｔ is print
		"cafe\u0301 = caf\u00e9\n" + // NFD and NFC: one name to Python
		"\u03b1lpha = 2\n" + // Greek α in a Latin word
		"\u5909\u6570\u306eValue = 3\n" + // Han, Hiragana and Latin: allowed together
		"\u0434\u0430\u043d\u043d\u044b\u0435 = 4  # \u043a\u043e\u043c\u043c\u0435\u043d\u0442\u0430\u0440\u0438\u0439\n" + // Cyrillic alone
		"x_1 = 5\n"
	got := ConfusableNames(code)
	want := []struct {
		line, col    int
		name, reason string
	}{
		{1, 1, "p\u0430ypal", "mixes scripts (Cyrillic, Latin)"},
		{2, 1, "\uff50\uff52\uff49\uff4e\uff54", `not in NFKC: Python reads this identifier as "print"`},
		{3, 1, "cafe\u0301", "not in NFKC: Python reads this identifier as \"caf\u00e9\" (written cafe\\u0301)"},
		{4, 1, "\u03b1lpha", "mixes scripts (Greek, Latin)"},
	}
	if len(got) != len(want) {
		t.Fatalf("ConfusableNames: %+v; want %d names", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Line != w.line || g.Column != w.col || g.Name != w.name || !strings.HasPrefix(g.Reason, w.reason) {
			t.Errorf("name %d: %+v; want line %d column %d %q %q", i, g, w.line, w.col, w.name, w.reason)
		}
	}
}

// TestConfusableNamesMatchPython: Python reads the fullwidth name as print and the NFD name as
// the NFC one, as the reasons say.
func TestConfusableNamesMatchPython(t *testing.T) {
	need.Need(t, need.Python3)
	const py = "python3"
	code := "caf\u00e9 = 'same name'\n\uff50\uff52\uff49\uff4e\uff54(cafe\u0301)\n"
	out, err := exec.Command(py, "-c", code).CombinedOutput()
	if err != nil || string(out) != "same name\n" {
		t.Fatalf("python3: %q, %v; want the fullwidth print to print the NFC variable", out, err)
	}
	if n := len(ConfusableNames(code)); n != 2 {
		t.Errorf("ConfusableNames flags %d names; want the fullwidth print and the NFD name", n)
	}
}

func TestInputConfusableNames(t *testing.T) {
	files := []struct {
		name    string
		content string
	}{
		{"data.txt", "p\u0430ypal\n"}, // not source: not listed
		{"m.py", "x = 1\n\uff45\uff58\uff45\uff43('1')\n"},
		{"bin.py", "\xff"},
	}
	var got []ConfusableName
	for _, f := range files {
		got = append(got, FileConfusableNames(f.name, []byte(f.content))...)
	}
	if len(got) != 1 || got[0].File != "m.py" || got[0].Line != 2 || got[0].Where() != "input file m.py line 2 column 1" {
		t.Errorf("FileConfusableNames: %+v; want m.py's fullwidth exec at line 2", got)
	}
}

// TestConfusableNamesWholeScript: a Cyrillic word whose every letter draws like a Latin one
// (ѕсоре) is another name to Python than the Latin word it reads as: code that reads as setting
// scope to "readonly" leaves scope "admin" (python3 runs it). It is flagged, with the Latin word;
// Cyrillic words with a letter that draws like none (данные) are not.
func TestConfusableNamesWholeScript(t *testing.T) {
	need.Need(t, need.Python3)
	code := "scope = 'admin'\n# drop privileges before the job\n\u0455\u0441\u043e\u0440\u0435 = 'readonly'\nprint(scope)\n"
	out, err := exec.Command("python3", "-c", code).CombinedOutput()
	if err != nil || string(out) != "admin\n" {
		t.Fatalf("python3: %q, %v; want admin (the test shows nothing)", out, err)
	}
	got := ConfusableNames(code + "\u0434\u0430\u043d\u043d\u044b\u0435 = 1\n\u03bf\u03bd = 2\n")
	if len(got) != 2 || got[0].Line != 3 || got[0].Column != 1 || !strings.Contains(got[0].Reason, `every letter is Cyrillic and draws like a Latin one: it reads as "scope"`) ||
		got[1].Line != 6 || !strings.Contains(got[1].Reason, `Greek and draws like a Latin one: it reads as "ov"`) {
		t.Errorf("ConfusableNames: %+v; want the Cyrillic scope on line 3 and the Greek ov on line 6", got)
	}
}
