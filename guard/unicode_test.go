package guard

import (
	"errors"
	"slices"
	"strings"
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

// Finding 6 of issue 17: a file name with a right-to-left override was accepted, so a reviewer
// could read a different name from the one written.
func TestCheckFileNameRefusesInvisibleCharacters(t *testing.T) {
	for _, name := range []string{
		"report\u202etxt.exe", "a\u200bb.txt", "\u2066x\u2069.py", "x\u200e.py", "x\u061c.py",
		"bom\ufeff.txt", "tag\U000E0041.txt", "wj\u2060.txt", "soft\u00adhyphen.txt", "nb\u00a0sp.txt",
	} {
		err := CheckFileName(name)
		var tu *ToolUsageError
		if !errors.As(err, &tu) {
			t.Errorf("CheckFileName(%q) = %v; want a ToolUsageError", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "U+") {
			t.Errorf("CheckFileName(%q) = %v; want the code point named", name, err)
		}
	}
	if err := CheckFileName("données/été.csv"); err != nil {
		t.Errorf("CheckFileName of accented letters: %v; want nil", err)
	}
}

func TestCheckEnvNameRefusesInvisibleCharacters(t *testing.T) {
	var p Policy
	for _, name := range []string{"PATH\u200b", "A\u202eB", "\ufeffHOME", "X\U000E0041", "A\xffB"} {
		var tu *ToolUsageError
		if err := p.CheckEnvName(name); !errors.As(err, &tu) {
			t.Errorf("CheckEnvName(%q) = %v; want a ToolUsageError", name, err)
		}
	}
}

// Finding 6: code may hold such characters, and the check keeps them, byte for byte.
func TestCheckKeepsSuspiciousCode(t *testing.T) {
	code := "s = 'abc' # \u202e\nprint(s)\n"
	c, err := Policy{}.Check(Request{Code: code}, "docker")
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if c.Code != code {
		t.Fatalf("code changed: %q; want %q", c.Code, code)
	}
}

// Finding 2 of issue 17: bytes that are not UTF-8 were replaced with U+FFFD by JSON before any
// check could see them.
func TestCheckEncodable(t *testing.T) {
	good := Request{Code: "print(1)", Files: map[string][]byte{"in.bin": {0xff, 0x00}}, Env: map[string]string{"A": "é"}}
	if err := CheckEncodable(good); err != nil {
		t.Fatalf("CheckEncodable(good) = %v; want nil (file contents are bytes)", err)
	}
	tests := map[string]Request{
		"code":      {Code: "print(1)\xff\xfe"},
		"env value": {Code: "x", Env: map[string]string{"A": "\xff"}},
		"env name":  {Code: "x", Env: map[string]string{"A\xff": "v"}},
		"file name": {Code: "x", Files: map[string][]byte{"a\xff.txt": nil}},
		"language":  {Code: "x", Language: "py\xff"},
		"metadata":  {Code: "x", Metadata: Metadata{Agent: "\xc3"}},
	}
	for name, req := range tests {
		var tu *ToolUsageError
		if err := CheckEncodable(req); !errors.As(err, &tu) {
			t.Errorf("%s: CheckEncodable = %v; want a ToolUsageError", name, err)
		}
	}
	if err := CheckEncodable(tests["code"]); !strings.Contains(err.Error(), "offset 8") {
		t.Errorf("code error %q; want the offset of the bad byte", err)
	}
}

// The check refuses raw bytes that are not UTF-8 in every field that reaches the sandbox.
func TestCheckRefusesRawInvalidUTF8(t *testing.T) {
	tests := map[string]Request{
		"code":      {Code: "print(1)\xff"},
		"env value": {Code: "x", Env: map[string]string{"A": "\xff"}},
		"env name":  {Code: "x", Env: map[string]string{"A\xff": "v"}},
		"file name": {Code: "x", Files: map[string][]byte{"a\xff.txt": nil}},
	}
	for name, req := range tests {
		var tu *ToolUsageError
		if _, err := (Policy{}).Check(req, "docker"); !errors.As(err, &tu) {
			t.Errorf("%s: Check = %v; want a ToolUsageError", name, err)
		}
	}
}
