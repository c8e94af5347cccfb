package pysource

import (
	"slices"
	"testing"
)

func TestSuspiciousCharacters(t *testing.T) {
	// Trojan Source: the override makes the comment appear to end the line.
	code := "x = 1\nif ok: # \u202e } \u2066\n  y = \"a\u200bb\"\t\U000E0041\n"
	got := SuspiciousCharacters(code)
	want := []Suspicious{
		{Line: 2, Column: 10, Rune: "U+202E", Name: "RIGHT-TO-LEFT OVERRIDE"},
		{Line: 2, Column: 14, Rune: "U+2066", Name: "LEFT-TO-RIGHT ISOLATE"},
		{Line: 3, Column: 9, Rune: "U+200B", Name: "ZERO WIDTH SPACE"},
		{Line: 3, Column: 13, Rune: "U+E0041", Name: `TAG 'A'`},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("SuspiciousCharacters = %+v; want %+v", got, want)
	}
	if got := SuspiciousCharacters("print('héllo, 世界')\n\tpass\r\n"); len(got) != 0 {
		t.Errorf("plain text: got %+v; want none", got)
	}
}

func TestIsSuspicious(t *testing.T) {
	for _, r := range []rune{
		0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x200E, 0x200F, 0x061C,
		0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD, 0xE0001, 0xE007F, 0xFE0F, 0x2028, 0x00A0, 0x3164,
		0x1B, 0x7F, 0x85, 0x00,
	} {
		if !IsSuspicious(r) {
			t.Errorf("IsSuspicious(%U) = false; want true", r)
		}
	}
	for _, r := range "azAZ09 \t\n\r_-.é世ß→" {
		if IsSuspicious(r) {
			t.Errorf("IsSuspicious(%U) = true; want false", r)
		}
	}
}

func TestVisibleText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"print(1)\n", "print(1)\n"},
		{"a\u202eb", `a\u202eb`},
		{"tag\U000E0041", `tag\U000e0041`},
		{"esc\x1b[2J", `esc\x1b[2J`},
		{"bad\xff\xfe", `bad\xff\xfe`},
		{"é\t世\n", "é\t世\n"},
	}
	for _, tt := range tests {
		if got := VisibleText(tt.in); got != tt.want {
			t.Errorf("VisibleText(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
