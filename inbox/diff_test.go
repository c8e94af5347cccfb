package inbox

import (
	"strings"
	"testing"
)

// diffText writes a diff as one line per line: its mark, its old and new numbers and its text.
func diffText(lines []diffLine) string {
	var b strings.Builder
	for _, l := range lines {
		mark := map[string]string{diffSame: " ", diffAdded: "+", diffRemoved: "-"}[l.Kind]
		b.WriteString(mark)
		for _, t := range l.Tokens {
			b.WriteString(t.Text)
		}
		b.WriteString("|")
		for _, n := range []int{l.Old, l.New} {
			if n > 0 {
				b.WriteByte(byte('0' + n%10))
			} else {
				b.WriteByte('.')
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestLineDiff(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"same", "a\nb\n", "a\nb\n", " a|11\n b|22\n"},
		{"one line changed", "a\nb\nc\n", "a\nB\nc\n", " a|11\n-b|2.\n+B|.2\n c|33\n"},
		{"a line added at the end", "a\n", "a\nb\n", " a|11\n+b|.2\n"},
		{"a line removed at the start", "a\nb\n", "b\n", "-a|1.\n b|21\n"},
		{"from nothing", "", "x = 1\n", "+x = 1|.1\n"},
		{"to nothing", "x = 1\n", "", "-x = 1|1.\n"},
		{"moved line", "a\nb\nc\n", "b\nc\na\n", "-a|1.\n b|21\n c|32\n+a|.3\n"},
		{"interleaved", "a\nx\nb\ny\nc\n", "a\nb\nc\nz\n", " a|11\n-x|2.\n b|32\n-y|4.\n c|53\n+z|.4\n"},
		// What the eye cannot tell apart, the diff marks: a trailing space, an invisible
		// character and a tab against spaces.
		{"trailing space", "print(1)\n", "print(1) \n", "-print(1)|1.\n+print(1) |.1\n"},
		{"zero-width space", "rm = False\n", "rm\u200b = False\n", "-rm = False|1.\n+rm\\u200b = False|.1\n"},
		{"tab for spaces", "if x:\n        go()\n", "if x:\n\tgo()\n", " if x:|11\n-        go()|2.\n+⇥       go()|.2\n"},
	} {
		if got := diffText(lineDiff(tc.old, tc.new)); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// TestLineDiffLarge: past the table's bound, the changed middle is shown removed and added
// whole, and the lines the texts share at either end stay kept.
func TestLineDiffLarge(t *testing.T) {
	var a, b strings.Builder
	a.WriteString("head\n")
	b.WriteString("head\n")
	for i := 0; i < 3000; i++ {
		a.WriteString("a\n")
		b.WriteString("b\n")
	}
	a.WriteString("tail\n")
	b.WriteString("tail\n")
	d := lineDiff(a.String(), b.String())
	if len(d) != 6002 || d[0].Kind != diffSame || d[1].Kind != diffRemoved || d[3000].Kind != diffRemoved || d[3001].Kind != diffAdded || d[6001].Kind != diffSame {
		t.Fatalf("%d lines, first kinds %s %s; want head, 3000 removed, 3000 added, tail", len(d), d[0].Kind, d[1].Kind)
	}
}
