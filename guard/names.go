package guard

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
// one word (Latin "a" and Cyrillic "а" draw the same), or a word that is not in NFKC, the form in
// which Python reads identifiers (a fullwidth "ｅｘｅｃ" is exec, "ﬁle" is file). Code may hold
// them; a reviewer must be told, as of the characters IsSuspicious names.
type ConfusableName struct {
	// File is the input file the name is in (InputConfusableNames); empty for the code.
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

// InputConfusableNames lists the confusable names of the input files Python may read as source
// (IsSourceFile) that are valid UTF-8, with File set, in the order of files given.
func InputConfusableNames(files []InputFile) []ConfusableName {
	var out []ConfusableName
	for _, f := range files {
		if !IsSourceFile(f.Name, f.Content) || !utf8.Valid(f.Content) {
			continue
		}
		for _, c := range ConfusableNames(string(f.Content)) {
			c.File = f.Name
			out = append(out, c)
		}
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
