package pysource

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Suspicious is a character in code that a reviewer could not see, or that makes the code read
// differently from how it runs: a bidirectional control (Trojan Source, CVE-2021-42574), a
// zero-width or other format character, a Unicode tag, a variation selector, a space other than
// U+0020, or a control character other than tab, newline and carriage return.
type Suspicious struct {
	// Line is the 1-based line of the character.
	Line int `json:"line"`
	// Column is the 1-based column of the character, counted in characters (runes).
	Column int `json:"column"`
	// Rune is the code point as "U+202E".
	Rune string `json:"rune"`
	// Name says what the character is, such as "RIGHT-TO-LEFT OVERRIDE".
	Name string `json:"name"`
}

// runeNames names the characters a reviewer is most likely to meet.
var runeNames = map[rune]string{
	0x00A0: "NO-BREAK SPACE",
	0x00AD: "SOFT HYPHEN",
	0x034F: "COMBINING GRAPHEME JOINER",
	0x061C: "ARABIC LETTER MARK",
	0x115F: "HANGUL CHOSEONG FILLER",
	0x1160: "HANGUL JUNGSEONG FILLER",
	0x180E: "MONGOLIAN VOWEL SEPARATOR",
	0x200B: "ZERO WIDTH SPACE",
	0x200C: "ZERO WIDTH NON-JOINER",
	0x200D: "ZERO WIDTH JOINER",
	0x200E: "LEFT-TO-RIGHT MARK",
	0x200F: "RIGHT-TO-LEFT MARK",
	0x2028: "LINE SEPARATOR",
	0x2029: "PARAGRAPH SEPARATOR",
	0x202A: "LEFT-TO-RIGHT EMBEDDING",
	0x202B: "RIGHT-TO-LEFT EMBEDDING",
	0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE",
	0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x2060: "WORD JOINER",
	0x2066: "LEFT-TO-RIGHT ISOLATE",
	0x2067: "RIGHT-TO-LEFT ISOLATE",
	0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE",
	0x3164: "HANGUL FILLER",
	0xFEFF: "ZERO WIDTH NO-BREAK SPACE (BYTE ORDER MARK)",
	0xFFA0: "HALFWIDTH HANGUL FILLER",
}

// IsSuspicious reports whether r is a character a reviewer cannot see or that changes how the
// text around it reads: see Suspicious. Tab, newline and carriage return are not suspicious.
func IsSuspicious(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return false
	case r < 0x20 || r == 0x7F || (r >= 0x80 && r < 0xA0):
		return true
	case r < 0x80:
		return false
	case runeNames[r] != "":
		return true
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF: // variation selectors
		return true
	case r >= 0xE0000 && r <= 0xE007F: // tags
		return true
	}
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Zs, unicode.Co) || r == utf8.RuneError
}

// RuneName names a suspicious rune for a reviewer.
func RuneName(r rune) string {
	if n := runeNames[r]; n != "" {
		return n
	}
	switch {
	case r < 0x20 || r == 0x7F || (r >= 0x80 && r < 0xA0):
		return "CONTROL CHARACTER"
	case r >= 0xE0020 && r <= 0xE007E:
		return fmt.Sprintf("TAG %q", rune(r-0xE0000))
	case r >= 0xE0000 && r <= 0xE007F:
		return "TAG CHARACTER"
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
		return "VARIATION SELECTOR"
	case r == utf8.RuneError:
		return "REPLACEMENT CHARACTER"
	case unicode.Is(unicode.Zs, r):
		return "SPACE CHARACTER"
	case unicode.Is(unicode.Co, r):
		return "PRIVATE USE CHARACTER"
	case unicode.In(r, unicode.Zl, unicode.Zp):
		return "LINE OR PARAGRAPH SEPARATOR"
	}
	return "FORMAT CHARACTER"
}

// runeCode formats r as "U+202E".
func runeCode(r rune) string { return fmt.Sprintf("U+%04X", r) }

// SuspiciousCharacters lists every suspicious character of code with its line and column, in
// order. Code may hold them (a string literal in Arabic needs its marks); a reviewer must see them,
// so show, the statement a reviewer signs and the inbox render code with VisibleText and list
// these.
func SuspiciousCharacters(code string) []Suspicious {
	var out []Suspicious
	line, col := 1, 0
	for _, r := range code {
		col++
		if IsSuspicious(r) {
			out = append(out, Suspicious{Line: line, Column: col, Rune: runeCode(r), Name: RuneName(r)})
		}
		if r == '\n' {
			line, col = line+1, 0
		}
	}
	return out
}

// VisibleText returns s with every suspicious character written as a Go-style escape (\u202e,
// \U000e0041, \x1b) and every byte that is not valid UTF-8 as \xff, so that what a reviewer reads
// is what runs. Tab, newline and carriage return are kept. Text without suspicious characters is
// returned unchanged.
func VisibleText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, IsSuspicious) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !IsSuspicious(r):
			b.WriteString(s[i : i+size])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// CheckName reports an *Error for a name (kind says what it names: "file name", "env name") that
// holds a suspicious character: a reviewer would read a different name from the one that is used.
func CheckName(kind, name string) error {
	for i, r := range name {
		if IsSuspicious(r) {
			return errorf("%s %q contains %s %s at byte %d, which a reviewer cannot see", kind, VisibleText(name), runeCode(r), RuneName(r), i)
		}
	}
	return nil
}
