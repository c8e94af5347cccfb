package inbox

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/pysource"
)

// Token classes, used as CSS classes (prefix "t-").
const (
	tokPlain   = ""
	tokKeyword = "kw"
	tokString  = "str"
	tokComment = "com"
	tokNumber  = "num"
	tokBuiltin = "bi"
	tokVar     = "var"
	tokDeco    = "deco"
	// tokInvisible is a character that would be invisible or reorder the text (bidi controls,
	// zero-width characters, other controls), shown as its \u escape.
	tokInvisible = "inv"
	// tokConfusable is a name that can read as another (pysource.ConfusableNames).
	tokConfusable = "conf"
	// tokTab is a tab, drawn as pysource.TabMarker and spaces up to Python's next tab stop.
	tokTab = "tab"
)

// token is a run of text with one class. The template escapes Text; nothing here is HTML.
type token struct {
	Class string
	Text  string
	// Title describes an invisible character.
	Title string
}

// codeLine is one numbered line of highlighted code.
type codeLine struct {
	N      int
	Tokens []token
}

var pythonKeywords = words(`False None True and as assert async await break class continue def del elif else except
	finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case`)

var pythonBuiltins = words(`print len range open str int float bool list dict set tuple type isinstance input
	enumerate zip map filter sorted sum min max abs any all repr object super exec eval compile getattr setattr
	hasattr __import__ bytes bytearray iter next format round chr ord hex id globals locals vars dir help`)

var shKeywords = words(`if then else elif fi for while until do done case esac in function return export local
	readonly select time break continue exit set unset shift trap eval exec source`)

var shBuiltins = words(`echo printf cd pwd test read cat ls rm cp mv mkdir chmod chown grep sed awk curl wget sh
	bash env kill sleep true false head tail wc sort uniq tr cut xargs find tee nc`)

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// highlight splits code into numbered lines of classed tokens for language ("python" or "sh";
// anything else is plain). Invisible characters become their own tokens, shown escaped. It
// returns how many invisible characters it found.
func highlight(code, language string) ([]codeLine, int) {
	var toks []token
	switch language {
	case "python":
		toks = lex(code, pythonRules)
	case "sh":
		toks = lex(code, shRules)
	default:
		toks = []token{{Text: code}}
	}
	var (
		lines     []codeLine
		cur       = codeLine{N: 1}
		invisible int
	)
	for _, t := range toks {
		parts := strings.Split(t.Text, "\n")
		for i, p := range parts {
			if i > 0 {
				lines = append(lines, cur)
				cur = codeLine{N: cur.N + 1}
			}
			for _, seg := range splitInvisible(p, t.Class) {
				if seg.Class == tokInvisible {
					invisible++
				}
				cur.Tokens = append(cur.Tokens, seg)
			}
		}
	}
	if len(cur.Tokens) > 0 || len(lines) == 0 {
		lines = append(lines, cur)
	}
	names := pysource.ConfusableNames(code)
	for i := range lines {
		lines[i].Tokens = showTabs(markNames(lines[i].Tokens, lines[i].N, names))
	}
	return lines, invisible
}

// markNames gives the characters of the confusable names on line n a class of their own, with
// the reason as the title. Columns count the characters as written (an escaped invisible
// character is one).
func markNames(toks []token, n int, names []pysource.ConfusableName) []token {
	var onLine []pysource.ConfusableName
	for _, c := range names {
		if c.Line == n {
			onLine = append(onLine, c)
		}
	}
	if len(onLine) == 0 {
		return toks
	}
	in := func(col int) *pysource.ConfusableName {
		for i := range onLine {
			if col >= onLine[i].Column && col < onLine[i].Column+onLine[i].Length {
				return &onLine[i]
			}
		}
		return nil
	}
	var out []token
	col := 1
	for _, t := range toks {
		if t.Class == tokInvisible {
			out = append(out, t)
			col++
			continue
		}
		start, cur := 0, in(col)
		for i := range t.Text {
			if c := in(col); c != cur {
				out = append(out, nameToken(t, t.Text[start:i], cur))
				start, cur = i, c
			}
			col++
		}
		out = append(out, nameToken(t, t.Text[start:], cur))
	}
	return out
}

func nameToken(t token, text string, c *pysource.ConfusableName) token {
	if c == nil {
		return token{Class: t.Class, Text: text, Title: t.Title}
	}
	return token{Class: tokConfusable, Text: text, Title: "this name " + c.Reason}
}

// showTabs draws each tab of a line's tokens as a token of its own: pysource.TabMarker and spaces
// up to the next multiple of pysource.TabSize, counted in drawn characters from the start of
// the line, so that indentation sits at the columns Python gives it, whatever the browser's tab
// stops.
func showTabs(toks []token) []token {
	var out []token
	col := 0
	for _, t := range toks {
		if t.Class == tokInvisible || !strings.Contains(t.Text, "\t") {
			out = append(out, t)
			col += utf8.RuneCountInString(t.Text)
			continue
		}
		start := 0
		for i, r := range t.Text {
			if r != '\t' {
				col++
				continue
			}
			if i > start {
				out = append(out, token{Class: t.Class, Text: t.Text[start:i]})
			}
			n := pysource.TabSize - col%pysource.TabSize
			out = append(out, token{Class: tokTab, Text: pysource.TabMarker + strings.Repeat(" ", n-1), Title: "tab (Python's tab stops are 8 columns apart)"})
			col += n
			start = i + 1
		}
		if start < len(t.Text) {
			out = append(out, token{Class: t.Class, Text: t.Text[start:]})
		}
	}
	return out
}

// isInvisible reports characters a reader would not see, or that reorder what they see: every
// character pysource.IsSuspicious names (bidi controls, zero-width and other format characters,
// controls, separators, spaces other than U+0020, fillers, variation selectors, tags, private
// use, U+FFFD), so that the page warns of what the statement and `starter show` list,
// carriage return, which a browser would show as a line break, and a literal pysource.TabMarker,
// which would read as a tab.
func isInvisible(r rune) bool {
	return r == '\r' || pysource.IsSuspicious(r) || string(r) == pysource.TabMarker
}

// splitInvisible splits s into tokens of class, with each invisible character (and each byte
// that is not UTF-8) as a token of its own whose text is its escape (\u202e).
func splitInvisible(s, class string) []token {
	var out []token
	start := 0
	for i, r := range s {
		if !isInvisible(r) {
			continue
		}
		if i > start {
			out = append(out, token{Class: class, Text: s[start:i]})
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		if size == 1 && r == utf8.RuneError {
			out = append(out, token{Class: tokInvisible, Text: fmt.Sprintf(`\x%02x`, s[i]), Title: "a byte that is not UTF-8"})
		} else if string(r) == pysource.TabMarker {
			out = append(out, token{Class: tokInvisible, Text: escapeRune(r), Title: "a literal " + pysource.TabMarker + ", the character this page draws for a tab"})
		} else {
			out = append(out, token{Class: tokInvisible, Text: escapeRune(r), Title: fmt.Sprintf("invisible character U+%04X %s", r, pysource.RuneName(r))})
		}
		start = i + size
	}
	if start < len(s) {
		out = append(out, token{Class: class, Text: s[start:]})
	}
	return out
}

func escapeRune(r rune) string {
	if r > 0xFFFF {
		return fmt.Sprintf(`\U%08x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// visible returns s with every invisible character replaced by its escape, for names and
// metadata shown as plain text.
func visible(s string) string {
	var b strings.Builder
	for _, t := range splitInvisible(s, "") {
		b.WriteString(t.Text)
	}
	return b.String()
}

// lexRules says how one language's tokens start.
type lexRules struct {
	keywords, builtins map[string]bool
	// comment starts a comment to the end of the line; at word start only for sh.
	commentAtWordStart bool
	tripleQuotes       bool
	stringPrefixes     string // letters allowed before a quote (Python r, b, f, u)
	variables          bool   // sh $NAME, ${...}
	decorators         bool   // python @name
	singleQuoteRaw     bool   // sh: no escapes inside '...'
}

var pythonRules = lexRules{keywords: pythonKeywords, builtins: pythonBuiltins, tripleQuotes: true, stringPrefixes: "rRbBfFuU", decorators: true}
var shRules = lexRules{keywords: shKeywords, builtins: shBuiltins, commentAtWordStart: true, variables: true, singleQuoteRaw: true}

// lex is a small hand-written tokenizer: comments, strings, numbers, names (keywords and
// builtins), variables and decorators. It never fails: what it does not know is plain text.
func lex(code string, ru lexRules) []token {
	var out []token
	emit := func(class, text string) {
		if text == "" {
			return
		}
		if n := len(out); n > 0 && out[n-1].Class == class {
			out[n-1].Text += text
			return
		}
		out = append(out, token{Class: class, Text: text})
	}
	i := 0
	for i < len(code) {
		c := code[i]
		prevWord := i > 0 && isWordByte(code[i-1])
		switch {
		case c == '#' && (!ru.commentAtWordStart || i == 0 || code[i-1] == ' ' || code[i-1] == '\t' || code[i-1] == '\n' || code[i-1] == ';'):
			end := strings.IndexByte(code[i:], '\n')
			if end < 0 {
				end = len(code) - i
			}
			emit(tokComment, code[i:i+end])
			i += end
		case c == '"' || c == '\'':
			n := stringEnd(code, i, ru)
			emit(tokString, code[i:n])
			i = n
		case ru.variables && c == '$':
			n := varEnd(code, i)
			emit(tokVar, code[i:n])
			i = n
		case ru.decorators && c == '@' && (i == 0 || code[i-1] == '\n' || code[i-1] == ' '):
			n := i + 1
			for n < len(code) && (isWordByte(code[n]) || code[n] == '.') {
				n++
			}
			emit(tokDeco, code[i:n])
			i = n
		case c >= '0' && c <= '9' && !prevWord:
			n := i
			for n < len(code) && (isWordByte(code[n]) || code[n] == '.') {
				n++
			}
			emit(tokNumber, code[i:n])
			i = n
		case isWordByte(c) && !prevWord:
			n := i
			for n < len(code) && isWordByte(code[n]) {
				n++
			}
			if n < len(code) && (code[n] == '"' || code[n] == '\'') && n-i <= 2 && strings.Trim(code[i:n], ru.stringPrefixes) == "" && ru.stringPrefixes != "" {
				end := stringEnd(code, n, ru)
				emit(tokString, code[i:end])
				i = end
				continue
			}
			w := code[i:n]
			switch {
			case ru.keywords[w]:
				emit(tokKeyword, w)
			case ru.builtins[w]:
				emit(tokBuiltin, w)
			default:
				emit(tokPlain, w)
			}
			i = n
		default:
			_, size := utf8.DecodeRuneInString(code[i:])
			emit(tokPlain, code[i:i+size])
			i += size
		}
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// stringEnd returns the index after the string literal that starts with the quote at i.
func stringEnd(code string, i int, ru lexRules) int {
	q := code[i]
	if ru.tripleQuotes && strings.HasPrefix(code[i:], strings.Repeat(string(q), 3)) {
		end := strings.Index(code[i+3:], strings.Repeat(string(q), 3))
		if end < 0 {
			return len(code)
		}
		return i + 3 + end + 3
	}
	n := i + 1
	for n < len(code) {
		switch {
		case code[n] == '\\' && !(ru.singleQuoteRaw && q == '\''):
			n += 2
			continue
		case code[n] == q:
			return n + 1
		case code[n] == '\n' && !ru.variables:
			return n // an unterminated Python string ends at the line
		}
		n++
	}
	return len(code)
}

// varEnd returns the index after a sh variable reference that starts with $ at i.
func varEnd(code string, i int) int {
	n := i + 1
	if n < len(code) && code[n] == '{' {
		end := strings.IndexByte(code[n:], '}')
		if end < 0 {
			return len(code)
		}
		return n + end + 1
	}
	if n < len(code) && strings.IndexByte("?#@*$!-0123456789", code[n]) >= 0 {
		return n + 1
	}
	for n < len(code) && isWordByte(code[n]) && code[n] < 0x80 {
		n++
	}
	return n
}
