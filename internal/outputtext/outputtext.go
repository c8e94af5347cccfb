// Package outputtext writes what a run's code showed (guard.Output) as text, for the doors that
// cannot or must not show it as it is: the starter's terminal summary and the MCP server's tool
// results. A table is drawn aligned or as CSV, every cell escaped; an output is named by its
// source, type and size. The code wrote every byte of an output: nothing here lets one act as
// markup or as a terminal escape.
package outputtext

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/guard/human"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// Table reads the JSON of a guard.MIMETable output.
func Table(data []byte) (guard.TableOutput, error) {
	var t guard.TableOutput
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return t, fmt.Errorf("outputtext: table: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return t, errors.New("outputtext: table: data after the table's JSON")
	}
	return t, nil
}

// Shape says how big t is: "3 rows × 2 columns", and that the code's table was bigger when it
// carries only part of it.
func Shape(t guard.TableOutput) string {
	s := fmt.Sprintf("%d rows × %d columns", len(t.Rows), len(t.Columns))
	if t.Truncated {
		s += " (part of a bigger table)"
	}
	return s
}

// Cell makes s fit one line of text and show every character it holds: invisible, control and
// direction-changing characters and bytes that are not UTF-8 are escaped (pysource.VisibleText),
// and so are newline, carriage return and tab, which would break the row.
func Cell(s string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(pysource.VisibleText(s))
}

// Text makes s, a text output, show every character it holds: as Cell, but newlines and tabs
// are kept; a carriage return (which lets a line overwrite itself) is escaped.
func Text(s string) string {
	return strings.ReplaceAll(pysource.VisibleText(s), "\r", `\r`)
}

// grid is t's header and rows, every cell escaped, with t's index as a first column when it
// has one.
func grid(t guard.TableOutput) [][]string {
	withIndex := len(t.Index) > 0
	row := func(index string, cells []string) []string {
		var out []string
		if withIndex {
			out = append(out, Cell(index))
		}
		for _, c := range cells {
			out = append(out, Cell(c))
		}
		return out
	}
	rows := [][]string{row("", t.Columns)}
	for i, r := range t.Rows {
		index := ""
		if i < len(t.Index) {
			index = t.Index[i]
		}
		rows = append(rows, row(index, r))
	}
	return rows
}

// Aligned draws t as text: a header row, then each row, each column padded with spaces to its
// widest cell (counted in characters).
func Aligned(t guard.TableOutput) string {
	rows := grid(t)
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			if i > 0 {
				line.WriteString("  ")
			}
			line.WriteString(c)
			if i < len(r)-1 {
				line.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	return b.String()
}

// CSV writes t as CSV (RFC 4180), every cell escaped as Cell escapes it.
func CSV(t guard.TableOutput) string {
	var b strings.Builder
	w := csv.NewWriter(&b)
	_ = w.WriteAll(grid(t)) // a strings.Builder does not fail
	return b.String()
}

// TableText draws t in at most maxBytes: aligned when that fits, else as CSV, else the CSV's
// first rows with a line that says how many were left out. A table drawn aligned can be far
// bigger than its JSON (one long cell pads every row), so a door bounds it by the output's own
// size, which the result's caps bound.
func TableText(t guard.TableOutput, maxBytes int) string {
	if s := Aligned(t); len(s) <= maxBytes {
		return s
	}
	s := CSV(t)
	if len(s) <= maxBytes {
		return "(as CSV: aligned, it would be too wide)\n" + s
	}
	cut := strings.LastIndexByte(s[:maxBytes], '\n') + 1
	shown := strings.Count(s[:cut], "\n")
	return fmt.Sprintf("(as CSV, the first %d lines of %d)\n%s", shown, strings.Count(s, "\n"), s[:cut])
}

// Describe names o for a person or a model: its source, its type (a table by its shape) and its
// size, and "left out" when its data is not carried.
func Describe(o guard.Output) string {
	what := Cell(o.MIME)
	if o.MIME == guard.MIMETable && !o.LeftOut {
		if t, err := Table(o.Data); err == nil {
			what = "table, " + Shape(t)
		} else {
			what += " (not a table this door can read)"
		}
	}
	s := fmt.Sprintf("%s, %s, %s", Cell(o.Source), what, human.Bytes(o.Size))
	if o.LeftOut {
		s += ", left out (over the output limits)"
	}
	return s
}
