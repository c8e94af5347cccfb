package inbox

import "strings"

// Kinds of diff lines (also their CSS classes, prefix "d-").
const (
	diffSame    = "same"
	diffAdded   = "add"
	diffRemoved = "del"
)

// diffLine is one line of a line diff: kept, added or removed, with its number in the old text
// (Old, 0 for an added line) and in the new text (New, 0 for a removed one), and its text as
// tokens: invisible characters escaped and tabs drawn at Python's columns, as in the code.
type diffLine struct {
	Kind     string
	Old, New int
	Tokens   []token
}

// maxDiffCells bounds the table the diff fills (lines of the old text times lines of the new,
// once the lines they share at the start and the end are set aside): past it, the changed
// middle is shown as removed whole and added whole, which is true, only less precise.
const maxDiffCells = 4 << 20

// lineDiff returns the line diff from old to new: the lines of a longest common subsequence
// kept, the others removed (from old) or added (to new), a removal before the additions that
// take its place. A final line feed ends the last line; it makes no line of its own.
func lineDiff(old, new string) []diffLine {
	a, b := splitLines(old), splitLines(new)
	var out []diffLine
	emit := func(kind string, i, j int) {
		l := diffLine{Kind: kind}
		var text string
		switch kind {
		case diffAdded:
			l.New, text = j+1, b[j]
		case diffRemoved:
			l.Old, text = i+1, a[i]
		default:
			l.Old, l.New, text = i+1, j+1, b[j]
		}
		l.Tokens = showTabs(splitInvisible(text, ""))
		out = append(out, l)
	}
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		emit(diffSame, pre, pre)
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	// The changed middle: a[pre:ea] against b[pre:eb].
	ea, eb := len(a)-suf, len(b)-suf
	n, m := ea-pre, eb-pre
	if n > 0 && m > 0 && n*m <= maxDiffCells {
		// lcs[i*(m+1)+j] is the length of a longest common subsequence of a[pre+i:ea] and
		// b[pre+j:eb]; it is at most min(n, m) ≤ 2048, so uint16 holds it.
		w := m + 1
		lcs := make([]uint16, (n+1)*w)
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				switch {
				case a[pre+i] == b[pre+j]:
					lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
				case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
					lcs[i*w+j] = lcs[(i+1)*w+j]
				default:
					lcs[i*w+j] = lcs[i*w+j+1]
				}
			}
		}
		i, j := 0, 0
		for i < n && j < m {
			switch {
			case a[pre+i] == b[pre+j]:
				emit(diffSame, pre+i, pre+j)
				i, j = i+1, j+1
			case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
				emit(diffRemoved, pre+i, 0)
				i++
			default:
				emit(diffAdded, 0, pre+j)
				j++
			}
		}
		for ; i < n; i++ {
			emit(diffRemoved, pre+i, 0)
		}
		for ; j < m; j++ {
			emit(diffAdded, 0, pre+j)
		}
	} else {
		for i := pre; i < ea; i++ {
			emit(diffRemoved, i, 0)
		}
		for j := pre; j < eb; j++ {
			emit(diffAdded, 0, j)
		}
	}
	for k := 0; k < suf; k++ {
		emit(diffSame, ea+k, eb+k)
	}
	return out
}

// splitLines splits s into its lines, without their line feeds; "" has none.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
