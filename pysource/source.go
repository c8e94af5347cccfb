package pysource

import (
	"bytes"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

// TabSize is the distance between the tab stops of Python's tokenizer: a tab in
// indentation moves to the next column that is a multiple of 8.
const TabSize = 8

// TabMarker is what the views draw where the code has a tab; spaces after it fill up to Python's
// next tab stop. A literal TabMarker in the text is shown as its escape (\u21e5), so a marker
// on the screen is always a tab.
const TabMarker = "⇥"

const tabMarkerRune = '⇥'

// ShowTabs returns one line of text with each tab written as TabMarker followed by spaces up to
// the next multiple of TabSize, counted in characters from the start of the line, so that
// indentation is drawn at the columns Python's tokenizer gives it whatever the terminal's or the
// browser's tab stops. A literal TabMarker becomes \u21e5. Call it on text that VisibleText has
// already escaped (escapes are counted as they are drawn).
func ShowTabs(line string) string {
	if !strings.ContainsAny(line, "\t"+TabMarker) {
		return line
	}
	var b strings.Builder
	col := 0
	for _, r := range line {
		switch r {
		case '\t':
			n := TabSize - col%TabSize
			b.WriteString(TabMarker)
			b.WriteString(strings.Repeat(" ", n-1))
			col += n
		case tabMarkerRune:
			b.WriteString(`\u21e5`)
			col += len(`\u21e5`)
		default:
			b.WriteRune(r)
			col++
		}
	}
	return b.String()
}

// physicalLines returns the physical lines of s, split at \n, \r\n and a lone \r.
func physicalLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}

// CheckIndentation reports an *Error, naming file and line, for Python source whose
// indentation could be read two ways: a line whose leading white space holds both tabs and
// spaces, a form feed before text (Python resets its column to 0 there), or a file that indents
// some lines with tabs and others with spaces. Every physical line counts, continuation lines
// and lines inside strings too: a checker that guessed which lines Python indents could be
// misled by the code it checks.
func CheckIndentation(file, src string) error {
	firstTab, firstSpace := 0, 0
	for i, line := range physicalLines(src) {
		n := i + 1
		ws := line[:len(line)-len(strings.TrimLeft(line, " \t\f"))]
		if ws == "" || ws == line { // no indentation, or a blank line
			continue
		}
		if strings.ContainsRune(ws, '\f') {
			return formFeedError(file, n)
		}
		hasTab, hasSpace := strings.ContainsRune(ws, '\t'), strings.ContainsRune(ws, ' ')
		if hasTab && hasSpace {
			return errorf("%s line %d: the indentation mixes tabs and spaces (Python's tab stops are 8 columns apart, a reader's may not be)", file, n)
		}
		if hasTab && firstTab == 0 {
			firstTab = n
		}
		if hasSpace && firstSpace == 0 {
			firstSpace = n
		}
		if firstTab != 0 && firstSpace != 0 {
			return errorf("%s line %d: the file indents with tabs (line %d) and with spaces (line %d) (Python's tab stops are 8 columns apart, a reader's may not be)",
				file, n, firstTab, firstSpace)
		}
	}
	return nil
}

func formFeedError(file string, line int) error {
	return errorf("%s line %d: a form feed in the indentation (Python resets its column there, so the line is not where it is drawn)", file, line)
}

// CheckFormFeeds reports an *Error, naming file and line, for a form feed in the
// indentation of a line that holds text: Python's tokenizer resets its column to 0 there, which
// no view can draw. A line holding nothing but white space (a page break) is fine. It applies
// whether or not the caller checks indentation (CheckIndentation).
func CheckFormFeeds(file, src string) error {
	for i, line := range physicalLines(src) {
		ws := line[:len(line)-len(strings.TrimLeft(line, " \t\f"))]
		if ws != line && strings.ContainsRune(ws, '\f') {
			return formFeedError(file, i+1)
		}
	}
	return nil
}

// CheckLineEnds reports an *Error, naming file and line, for a carriage return that is
// not followed by a line feed: Python ends the line there, while every view draws one line with
// a \r in it. A CRLF line end is fine.
func CheckLineEnds(file, src string) error {
	for i := strings.IndexByte(src, '\r'); i >= 0; {
		if i+1 >= len(src) || src[i+1] != '\n' {
			return errorf("%s line %d: a carriage return without a line feed (Python ends the line there; the views draw one line)",
				file, 1+strings.Count(src[:i], "\n"))
		}
		next := strings.IndexByte(src[i+1:], '\r')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return nil
}

// codingRE is Python's rule for a PEP 263 coding declaration (tokenize.cookie_re, ASCII).
var codingRE = regexp.MustCompile(`^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)`)

// isUTF8Coding reports whether a declared coding name is UTF-8 once normalized as Python does
// (lower case, "_" read as "-"): "utf-8", "utf8", or "utf-8-" followed by anything, which
// Python's tokenizer also reads as UTF-8.
func isUTF8Coding(name string) bool {
	n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	return n == "utf-8" || n == "utf8" || strings.HasPrefix(n, "utf-8-")
}

// CheckCoding reports an *Error, naming file and line, for a PEP 263 coding declaration
// that names anything but UTF-8, on any line of src. On the first two lines such a codec
// (unicode_escape, utf-7, shift_jis, hz, latin-1 and every other) makes Python read other
// characters than the ones every view draws: what reads as a comment or a string can be code
// (shift_jis reads the UTF-8 bytes of "\u00c1" and a backslash after them as two characters, so
// a \" drawn inside a string ends it; hz drops a "~" and the line end after it). On a later line
// it is refused too, whatever the codec: any line becomes a first line wherever the text is
// handed to Python (a shell here-document written to a file, a file the code writes), so shell
// code is checked the same way. Lines end at \n, at \r\n or a lone \r, and are also read split
// at \n alone, as Python reads a string it is given.
func CheckCoding(file string, src []byte) error {
	// Python reads the declaration after a UTF-8 byte order mark.
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	if !bytes.Contains(src, []byte("coding")) {
		return nil
	}
	for _, lines := range [][]string{strings.Split(string(src), "\n"), physicalLines(string(src))} {
		for i, line := range lines {
			if m := codingRE.FindStringSubmatch(line); m != nil && !isUTF8Coding(m[1]) {
				return errorf("%s line %d: coding declaration %q: only UTF-8 is accepted (another codec makes Python read other characters than the ones shown)",
					file, i+1, VisibleText(m[1]))
			}
		}
	}
	return nil
}

// boms are byte order marks of encodings other than UTF-8, longest first.
var boms = []struct {
	mark []byte
	name string
}{
	{[]byte{0x00, 0x00, 0xFE, 0xFF}, "UTF-32 (big-endian)"},
	{[]byte{0xFF, 0xFE, 0x00, 0x00}, "UTF-32 (little-endian)"},
	{[]byte{0xFE, 0xFF}, "UTF-16 (big-endian)"},
	{[]byte{0xFF, 0xFE}, "UTF-16 (little-endian)"},
	{[]byte{0x2B, 0x2F, 0x76}, "UTF-7"},
}

// IsSourceFile reports whether the interpreter could read an input file as Python source on its
// own or when the code imports or runs it: a name ending in .py, .pyw, .pyi or .pth (site reads
// .pth lines, and runs those that start with "import"), or a file of any name that starts with
// "#!" (it can be run as a script by its shebang). Such files must be UTF-8 without a coding
// declaration naming another codec; every other input file still may not declare one
// (CheckInputSource).
func IsSourceFile(name string, content []byte) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".py", ".pyw", ".pyi", ".pth":
		return true
	}
	return bytes.HasPrefix(content, []byte("#!"))
}

// isPythonIndented reports whether the indentation of an input file decides what Python runs:
// a .py, .pyw or .pyi module, or a script whose shebang names python.
func isPythonIndented(name string, content []byte) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".py", ".pyw", ".pyi":
		return true
	}
	if !bytes.HasPrefix(content, []byte("#!")) {
		return false
	}
	first, _, _ := bytes.Cut(content, []byte("\n"))
	return bytes.Contains(first, []byte("python"))
}

// CheckInputSource reports an *Error, naming the file, for an input file Python or sh could
// read as something other than what the views show: any file with a coding declaration other than
// UTF-8 (the code could run a file of any name), any text file that CheckHereDocs,
// CheckLineEnds or CheckFormFeeds refuses, and a source file (IsSourceFile) that starts with a byte order mark
// other than UTF-8's or is not valid UTF-8. With indentation, it also applies CheckIndentation
// to Python modules and scripts; without, CheckFormFeeds.
func CheckInputSource(name string, content []byte, indentation bool) error {
	return checkSource("input file "+VisibleText(name), name, content, indentation)
}

// CheckWrittenSource is CheckInputSource for a file a session's cell wrote in /work, where a later
// cell can import or run it: the error names it as a written file. Indentation is always checked.
func CheckWrittenSource(name string, content []byte) error {
	return checkSource("written file "+VisibleText(name), name, content, true)
}

// CheckWrittenCode reports an *Error for a file a session's cell wrote that a later cell could
// import or run as other code than every view draws it, where no view can draw it as Python reads
// it: compiled bytecode (.pyc, .pyo: Python imports it, no view shows it as text), a file of any
// name declaring a coding other than UTF-8, and a source file (IsSourceFile) that
// CheckWrittenSource refuses. A session takes no cell while such a file is in /work. What only
// warrants a warning is not refused here: start-up hooks and shadowed modules (StartupWarnings,
// drawn with what Python does with them), a lone carriage return in a text file that is not source.
func CheckWrittenCode(name string, content []byte) error {
	file := "written file " + VisibleText(name)
	switch strings.ToLower(path.Ext(name)) {
	case ".pyc", ".pyo":
		return errorf("%s: compiled bytecode: Python runs it when it is imported, and no view can show it as text", file)
	}
	if err := CheckCoding(file, content); err != nil {
		return err
	}
	if IsSourceFile(name, content) {
		return CheckWrittenSource(name, content)
	}
	return nil
}

// checkSource is CheckInputSource for the file named name, called file in errors.
func checkSource(file, name string, content []byte, indentation bool) error {
	if err := CheckCoding(file, content); err != nil {
		return err
	}
	// A text file of any name (what the views draw as text: UTF-8 without NUL) can be run by sh
	// (sh helper.sh) or by Python (exec(open('notes.txt').read()), runpy.run_path), which ends
	// a line at a lone carriage return where the views draw one line with a \r in it, and
	// resets its column at a form feed in the indentation, which no view can draw.
	if utf8.Valid(content) && bytes.IndexByte(content, 0) < 0 {
		if err := CheckHereDocs(file, string(content)); err != nil {
			return err
		}
		if err := CheckLineEnds(file, string(content)); err != nil {
			return err
		}
		if err := CheckFormFeeds(file, string(content)); err != nil {
			return err
		}
	}
	if !IsSourceFile(name, content) {
		return nil
	}
	for _, b := range boms {
		if bytes.HasPrefix(content, b.mark) {
			return errorf("%s: starts with a %s byte order mark: Python source must be UTF-8", file, b.name)
		}
	}
	if !utf8.Valid(content) {
		line := 1 + bytes.Count(content[:invalidUTF8At(content)], []byte("\n"))
		return errorf("%s line %d: not valid UTF-8 (Python source must be UTF-8)", file, line)
	}
	if !isPythonIndented(name, content) {
		return nil
	}
	if err := CheckLineEnds(file, string(content)); err != nil {
		return err
	}
	if indentation {
		return CheckIndentation(file, string(content))
	}
	return CheckFormFeeds(file, string(content))
}

// invalidUTF8At returns the offset of the first byte of b that is not valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// hereDocRE finds a here-document operator and the word after it (its delimiter): "<<" or "<<-",
// blanks, then the word up to a blank or a character that ends a shell word.
var hereDocRE = regexp.MustCompile(`<<(-?)[ \t]*([^ \t;&|<>()]*)`)

// CheckHereDocs reports an *Error, naming file and line, for shell code whose
// here-documents sh hands on otherwise than every view draws them:
//   - a line that starts with a tab, after a "<<-" operator: sh removes the leading tabs of such
//     a here-document's lines, so a program it hands to Python (python3 - <<-EOF) is indented
//     otherwise than drawn (at Python's columns, see ShowTabs); "<<" keeps them;
//   - in a here-document whose delimiter is not quoted (<<EOF, not <<'EOF'), a line with "\\",
//     "\$" or "\`", or that ends with "\": sh reads those backslashes before handing the text on
//     (a "\\\"" drawn inside a Python string becomes \\" and ends it; a "\" at the end of a
//     comment joins the next line to it), so the program is not the one drawn. Its body is taken
//     to run from the next line to a line equal to the delimiter, or to the end (lines end at
//     \n, as sh reads them).
//
// Every "<<" counts, quoted or inside a here-document or not: a checker that guessed which text
// sh reads as an operator could be misled by the code it checks; at worst it refuses code that
// can be written with a quoted delimiter instead.
func CheckHereDocs(file, src string) error {
	// sh's lines end at \n alone: a carriage return is a character of the line, and of a
	// delimiter word, so "EOF\r" does not end a here-document whose delimiter is EOF.
	lines := strings.Split(src, "\n")
	// sh joins a line that ends with a backslash to the next before it reads operators: a "<<"
	// made so (<\ and <EOF below it) is refused, as no reader of the lines sees it.
	for i := 0; i < len(lines); {
		j, joined, parts := i, "", 0
		for ; j < len(lines); j++ {
			parts += len(hereDocRE.FindAllString(lines[j], -1))
			if j+1 == len(lines) || !oddBackslashesAtEnd(lines[j]) {
				joined += lines[j]
				break
			}
			joined += strings.TrimSuffix(lines[j], `\`)
		}
		if len(hereDocRE.FindAllString(joined, -1)) > parts {
			return errorf("%s line %d: a here-document operator (<<) broken across lines with a backslash: sh reads it as one, the views draw none", file, i+1)
		}
		i = j + 1
	}
	tabsFrom := 0 // the first line after a "<<-" operator, 1-based; 0 for none
	for i, line := range lines {
		if tabsFrom != 0 && strings.HasPrefix(line, "\t") {
			return errorf("%s line %d: a tab at the start of a line after the \"<<-\" here-document of line %d (sh removes those tabs, so the lines are not indented as drawn; use \"<<\")",
				file, i+1, tabsFrom-1)
		}
		for _, m := range hereDocRE.FindAllStringSubmatch(line, -1) {
			if m[1] == "-" && tabsFrom == 0 {
				tabsFrom = i + 2
			}
			word := m[2]
			// A word that ends the line with a backslash goes on on the next line (sh removes
			// the backslash and the line end): <<\ and EOF below it is an unquoted <<EOF. Its
			// delimiter is not known here, so its body is taken to run to the end.
			continued := strings.HasSuffix(line, word) && oddBackslashesAtEnd(word)
			if continued {
				// The next line may begin with "-" (<<\ then -EOF is <<-EOF): tabs count too.
				word = "\x00"
				if tabsFrom == 0 {
					tabsFrom = i + 2
				}
			} else if strings.ContainsAny(word, `'"\`) {
				continue // quoted: sh hands the body on as it is
			}
			for j := i + 1; j < len(lines); j++ {
				body := lines[j]
				if m[1] == "-" {
					body = strings.TrimLeft(body, "\t")
				}
				if body == word {
					break
				}
				if strings.HasSuffix(body, `\`) || strings.Contains(body, `\\`) || strings.Contains(body, `\$`) || strings.Contains(body, "\\`") {
					return errorf("%s line %d: a backslash in the here-document of line %d, whose delimiter is not quoted: sh reads \\\\, \\$, \\` and a \\ at the line end before handing the text on, so it is not what is drawn (quote the delimiter: <<'%s')",
						file, j+1, i+1, VisibleText(word))
				}
			}
		}
	}
	return nil
}

// oddBackslashesAtEnd reports whether s ends with an odd number of backslashes: its last one
// escapes what follows.
func oddBackslashesAtEnd(s string) bool {
	n := len(s) - len(strings.TrimRight(s, `\`))
	return n%2 == 1
}

// ShowTabsText applies ShowTabs to every line of s (lines end at \n).
func ShowTabsText(s string) string {
	if !strings.ContainsAny(s, "\t"+TabMarker) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = ShowTabs(l)
	}
	return strings.Join(lines, "\n")
}

// QuoteValue returns an env value as a reviewer reads it: in double quotes, with a backslash,
// a quote, newline, carriage return and tab written as \\, \", \n, \r and \t, and every other
// character a reader could not see (IsSuspicious) or byte that is not UTF-8 escaped as
// VisibleText does. What is between the quotes is the whole value, leading and trailing spaces
// included.
func QuoteValue(v string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRuneInString(v[i:])
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteString(VisibleText(v[i : i+size]))
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}
