package pysource

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ConfusableName is a name in code that can read as another: letters of more than one script in
// one word (Latin "a" and Cyrillic "а" draw the same), a word of one other script whose every
// letter draws like a Latin one (a Cyrillic "ѕсоре" reads as scope), or a word that is not in
// NFKC, the form in
// which Python reads identifiers (a fullwidth "ｅｘｅｃ" is exec, "ﬁle" is file). Code may hold
// them; a reviewer must be told, as of the characters IsSuspicious names.
type ConfusableName struct {
	// File is the input file the name is in (FileConfusableNames); empty for the code.
	File string `json:"file,omitempty"`
	// Line and Column (1-based, in characters) are where the word starts.
	Line   int `json:"line"`
	Column int `json:"column"`
	// Name is the word as written, escaped with VisibleText.
	Name string `json:"name"`
	// Length is the word's length in characters, as written.
	Length int `json:"length"`
	// Reason says why it can read as another name.
	Reason string `json:"reason"`
}

// scriptNames are the Unicode scripts, sorted, so that a letter's script is found the same way
// every time.
var scriptNames = slices.Sorted(maps.Keys(unicode.Scripts))

// scriptOf names the script of a letter, or "" for Common and Inherited characters (digits,
// underscore, combining marks), which go with any script.
func scriptOf(r rune) string {
	if !unicode.IsLetter(r) || unicode.In(r, unicode.Common, unicode.Inherited) {
		return ""
	}
	for _, name := range scriptNames {
		if unicode.Is(unicode.Scripts[name], r) {
			return name
		}
	}
	return "Unknown"
}

// mixesAllowed are the sets of scripts that may share a word, as in Unicode's "highly
// restrictive" profile (UTS #39): Japanese, Chinese and Korean writing mixes them with Latin.
var mixesAllowed = [][]string{
	{"Han", "Hiragana", "Katakana", "Latin"},
	{"Bopomofo", "Han", "Latin"},
	{"Hangul", "Han", "Latin"},
}

func mixedScripts(scripts []string) bool {
	if len(scripts) < 2 {
		return false
	}
	for _, allowed := range mixesAllowed {
		if !slices.ContainsFunc(scripts, func(s string) bool { return !slices.Contains(allowed, s) }) {
			return false
		}
	}
	return true
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || unicode.Is(unicode.Pc, r)
}

// ConfusableNames lists the words of code that mix scripts or are not in NFKC, in order. Every
// word counts, in strings and comments too: a checker that guessed which words are identifiers
// could be misled by the code it checks.
func ConfusableNames(code string) []ConfusableName {
	var out []ConfusableName
	line, col := 1, 0
	wordStart, wordLine, wordCol := -1, 0, 0
	flush := func(end int) {
		if wordStart < 0 {
			return
		}
		w := code[wordStart:end]
		wordStart = -1
		if isASCII(w) {
			return
		}
		var scripts []string
		for _, r := range w {
			if s := scriptOf(r); s != "" && !slices.Contains(scripts, s) {
				scripts = append(scripts, s)
			}
		}
		slices.Sort(scripts)
		switch nfkc := norm.NFKC.String(w); {
		case mixedScripts(scripts):
			out = append(out, ConfusableName{Line: wordLine, Column: wordCol, Name: VisibleText(w), Length: utf8.RuneCountInString(w),
				Reason: "mixes scripts (" + strings.Join(scripts, ", ") + "): letters of one can draw like another's (written " + codePoints(w) + ")"})
		case len(scripts) == 1 && scripts[0] != "Latin" && latinLookalike(w) != "":
			out = append(out, ConfusableName{Line: wordLine, Column: wordCol, Name: VisibleText(w), Length: utf8.RuneCountInString(w),
				Reason: fmt.Sprintf("every letter is %s and draws like a Latin one: it reads as %q, another name (written %s)", scripts[0], latinLookalike(w), codePoints(w))})
		case nfkc != w:
			out = append(out, ConfusableName{Line: wordLine, Column: wordCol, Name: VisibleText(w), Length: utf8.RuneCountInString(w),
				Reason: fmt.Sprintf("not in NFKC: Python reads this identifier as %q (written %s)", VisibleText(nfkc), codePoints(w))})
		}
	}
	for i, r := range code {
		col++
		if isWordRune(r) {
			if wordStart < 0 {
				wordStart, wordLine, wordCol = i, line, col
			}
		} else {
			flush(i)
		}
		if r == '\n' {
			line, col = line+1, 0
		}
	}
	flush(len(code))
	return out
}

// latinLookalikes are letters of other scripts that draw like a Latin letter in common fonts
// (from Unicode's confusables, UTS #39), with the letter they draw like.
var latinLookalikes = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'B', 'е': 'e', 'о': 'o', 'р': 'p', 'с': 'c', 'у': 'y', 'х': 'x', 'ѕ': 's', 'і': 'i',
	'ј': 'j', 'һ': 'h', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'ӏ': 'l', 'ү': 'y',
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P', 'С': 'C', 'Т': 'T',
	'Х': 'X', 'Ѕ': 'S', 'І': 'I', 'Ј': 'J', 'Ү': 'Y', 'Ԛ': 'Q', 'Ԝ': 'W', 'Ӏ': 'I',
	// Greek
	'α': 'a', 'ο': 'o', 'ν': 'v', 'ι': 'i', 'κ': 'k', 'ρ': 'p', 'υ': 'u', 'χ': 'x', 'γ': 'y',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O',
	'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
	// Armenian
	'օ': 'o', 'ս': 'u', 'հ': 'h', 'ո': 'n', 'ց': 'g', 'զ': 'q', 'ռ': 'n',
}

// latinLookalike returns the Latin word w draws like when every letter of it has a Latin
// lookalike (digits, underscores and marks kept), or "" when one does not.
func latinLookalike(w string) string {
	var b strings.Builder
	for _, r := range w {
		switch l, ok := latinLookalikes[r]; {
		case ok:
			b.WriteRune(l)
		case r < utf8.RuneSelf && !unicode.IsLetter(r):
			b.WriteRune(r)
		default:
			return ""
		}
	}
	return b.String()
}

// codePoints writes s with every character that is not ASCII as its \u escape, so that two
// spellings that draw alike read differently.
func codePoints(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// FileConfusableNames lists the confusable names of an input file, with File set to name, when
// Python may read it as source (IsSourceFile) and it is valid UTF-8; otherwise none.
func FileConfusableNames(name string, content []byte) []ConfusableName {
	if !IsSourceFile(name, content) || !utf8.Valid(content) {
		return nil
	}
	out := ConfusableNames(string(content))
	for i := range out {
		out[i].File = name
	}
	return out
}

// Where says where the name is: "line L column C", after "input file F " for an input file.
func (c ConfusableName) Where() string {
	w := fmt.Sprintf("line %d column %d", c.Line, c.Column)
	if c.File != "" {
		w = "input file " + VisibleText(c.File) + " " + w
	}
	return w
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
