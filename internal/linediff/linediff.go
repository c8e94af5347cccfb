// Package linediff writes unified diffs of texts, line by line.
package linediff

import (
	"fmt"
	"strings"
)

// maxCells bounds the longest-common-subsequence table (lines of the old text times lines of the
// new, once the lines they share at both ends are set aside): past it, the changed middle is
// shown as removed whole and added whole, which is true, only less precise.
const maxCells = 4 << 20

// Context is how many unchanged lines a hunk shows around a change.
const Context = 3

// Kinds of Op.
const (
	Same    = ' '
	Added   = '+'
	Removed = '-'
)

// Op is one line of a line diff.
type Op struct {
	Kind byte
	Text string
}

// Lines returns the line diff from a to b: a longest common subsequence kept, the other lines
// removed from a or added to b, removals before the additions that take their place.
func Lines(a, b []string) []Op {
	var out []Op
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		out = append(out, Op{Same, a[pre]})
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if n > 0 && m > 0 && n*m <= maxCells {
		// lcs[i*(m+1)+j] is the length of a longest common subsequence of ma[i:] and mb[j:].
		lcs := make([]int32, (n+1)*(m+1))
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i*(m+1)+j] = lcs[(i+1)*(m+1)+j+1] + 1
				} else {
					lcs[i*(m+1)+j] = max(lcs[(i+1)*(m+1)+j], lcs[i*(m+1)+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n && j < m {
			switch {
			case ma[i] == mb[j]:
				out = append(out, Op{Same, ma[i]})
				i, j = i+1, j+1
			case lcs[(i+1)*(m+1)+j] >= lcs[i*(m+1)+j+1]:
				out = append(out, Op{Removed, ma[i]})
				i++
			default:
				out = append(out, Op{Added, mb[j]})
				j++
			}
		}
		for ; i < n; i++ {
			out = append(out, Op{Removed, ma[i]})
		}
		for ; j < m; j++ {
			out = append(out, Op{Added, mb[j]})
		}
	} else {
		for _, l := range ma {
			out = append(out, Op{Removed, l})
		}
		for _, l := range mb {
			out = append(out, Op{Added, l})
		}
	}
	for _, l := range a[len(a)-suf:] {
		out = append(out, Op{Same, l})
	}
	return out
}

// Split splits a text into lines; a final line feed ends the last line and makes none of its
// own.
func Split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// Counts returns how many lines ops add and remove.
func Counts(ops []Op) (added, removed int) {
	for _, o := range ops {
		switch o.Kind {
		case Added:
			added++
		case Removed:
			removed++
		}
	}
	return added, removed
}

// Unified returns the unified diff from old to new under the names oldName and newName, each
// line's text passed through show (which must keep it on one line), or "" when they are equal.
func Unified(oldName, newName, old, new string, show func(string) string) string {
	ops := Lines(Split(old), Split(new))
	if a, r := Counts(ops); a == 0 && r == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", oldName, newName)
	// Hunks: runs of changes with up to Context unchanged lines around them, joined when their
	// contexts meet.
	oldLine, newLine := make([]int, len(ops)+1), make([]int, len(ops)+1)
	for i, o := range ops {
		oldLine[i+1], newLine[i+1] = oldLine[i], newLine[i]
		if o.Kind != Added {
			oldLine[i+1]++
		}
		if o.Kind != Removed {
			newLine[i+1]++
		}
	}
	for i := 0; i < len(ops); {
		if ops[i].Kind == Same {
			i++
			continue
		}
		start := max(i-Context, 0)
		end := i
		for end < len(ops) {
			if ops[end].Kind != Same {
				end++
				continue
			}
			next := end
			for next < len(ops) && ops[next].Kind == Same {
				next++
			}
			if next == len(ops) || next-end > 2*Context {
				end = min(end+Context, len(ops))
				break
			}
			end = next
		}
		oa, na := oldLine[end]-oldLine[start], newLine[end]-newLine[start]
		fmt.Fprintf(&b, "@@ -%s +%s @@\n", hunkRange(oldLine[start], oa), hunkRange(newLine[start], na))
		for _, o := range ops[start:end] {
			b.WriteByte(o.Kind)
			b.WriteString(show(o.Text))
			b.WriteByte('\n')
		}
		i = end
	}
	return b.String()
}

// hunkRange is a hunk header's "start,count" for lines after the first skipped ones.
func hunkRange(skipped, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", skipped)
	}
	if count == 1 {
		return fmt.Sprintf("%d", skipped+1)
	}
	return fmt.Sprintf("%d,%d", skipped+1, count)
}
