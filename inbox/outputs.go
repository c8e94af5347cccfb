package inbox

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/guard/human"
)

// What the code showed (guard.Output), as a page draws it: pictures the inbox checked from
// their bytes, tables and text escaped, markup (SVG, HTML) never drawn, only offered as a
// download.

const (
	// maxTableRows and maxTableColumns bound the rows and columns of a table the page draws;
	// the table is downloadable whole.
	maxTableRows    = 200
	maxTableColumns = 50
	// maxTableCellBytes bounds the text of one table cell drawn.
	maxTableCellBytes = 1024
	// maxIndentBytes bounds the JSON the page indents to draw it; longer JSON is drawn as sent.
	maxIndentBytes = 64 << 10
)

// Ways an output is drawn (outputView.Draw).
const (
	drawPicture = "picture"
	drawTable   = "table"
	drawText    = "text"
)

// shownThing is one thing the code showed: the outputs that share an Index, drawn as the first
// of them the page can draw (richest first), the others listed with why they are not drawn.
type shownThing struct {
	Index  int
	Source string
	Drawn  *outputView
	Others []outputView
}

// outputView is one output as the page shows it.
type outputView struct {
	// N is its place in the result's Outputs, which its download names (output-N).
	N int
	// Kind names its type for a reader ("PNG", "SVG", "table"); Size is how many bytes the code
	// produced for it.
	Kind, Size string
	LeftOut    bool
	// Draw is how the page draws it (drawPicture, drawTable, drawText), or "" when it is only
	// offered as a download, for the reason Why.
	Draw, Why string
	Picture   picture
	Table     *tableView
	// Text is the text drawn, escaped (visible); Cut says it is the start only.
	Text string
	Cut  bool
}

// tableView is a guard.TableOutput as the page draws it: every name and cell escaped
// (visible), at most maxTableRows rows of maxTableColumns columns.
type tableView struct {
	Columns []string
	// Index says the rows have index labels (drawn as their first column).
	Index bool
	Rows  []tableRow
	// RowsLeft and ColumnsLeft are how many the page does not draw; Truncated says the code's
	// table had more than it carries (guard.TableOutput.Truncated).
	RowsLeft, ColumnsLeft int
	Truncated             bool
}

type tableRow struct {
	Label string
	Cells []string
}

// shownThings groups outs by Index, in order, each group drawn as its first output the page can
// draw.
func shownThings(outs []guard.Output) []shownThing {
	var things []shownThing
	for i, o := range outs {
		if len(things) == 0 || things[len(things)-1].Index != o.Index {
			things = append(things, shownThing{Index: o.Index, Source: o.Source})
		}
		t := &things[len(things)-1]
		v := newOutputView(i, o)
		if t.Drawn == nil && v.Draw != "" {
			t.Drawn = &v
			continue
		}
		if v.Draw != "" {
			v.Draw, v.Why = "", "another form of the same output"
		}
		t.Others = append(t.Others, v)
	}
	return things
}

// newOutputView decides how the page shows output n, o.
func newOutputView(n int, o guard.Output) outputView {
	v := outputView{N: n, Kind: kindOf(o.MIME), Size: human.Bytes(o.Size), LeftOut: o.LeftOut}
	switch {
	case o.LeftOut:
		v.Why = "left out, over the run's output limits (not carried)"
	case o.MIME == guard.MIMEPNG || o.MIME == guard.MIMEJPEG:
		p, err := checkPicture(o.MIME, o.Data)
		if err != nil {
			v.Why = "not drawn (" + err.Error() + ")"
			break
		}
		v.Draw, v.Picture = drawPicture, p
	case o.MIME == guard.MIMESVG || o.MIME == guard.MIMEHTML:
		v.Why = "not drawn (markup is never drawn here)"
	case o.MIME == guard.MIMETable:
		if t, err := newTableView(o.Data); err == nil {
			v.Draw, v.Table = drawTable, t
			break
		}
		v.setText(o.Data, "not a table the inbox reads")
	case o.MIME == guard.MIMEJSON:
		v.setText(indentJSON(o.Data), "")
	default:
		v.setText(o.Data, "")
	}
	return v
}

// setText draws b as escaped text (preview), or says it is not text, why so.
func (v *outputView) setText(b []byte, why string) {
	text, binary, cut := preview(b, outputPreviewBytes)
	if binary {
		v.Why = "not drawn (not text: not UTF-8, or holding NUL)"
		return
	}
	v.Draw, v.Text, v.Cut = drawText, text, cut
	if why != "" {
		v.Kind += " (" + why + ", drawn as text)"
	}
}

// indentJSON is b indented for reading when it is JSON no longer than maxIndentBytes, b as it
// is otherwise.
func indentJSON(b []byte) []byte {
	var out bytes.Buffer
	if len(b) > maxIndentBytes || json.Indent(&out, b, "", "  ") != nil {
		return b
	}
	return out.Bytes()
}

// newTableView reads a guard.TableOutput from b for the page to draw, escaped and bounded.
func newTableView(b []byte) (*tableView, error) {
	var t guard.TableOutput
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, err
	}
	v := &tableView{Index: len(t.Index) > 0, Truncated: t.Truncated}
	cols := t.Columns
	if len(cols) > maxTableColumns {
		v.ColumnsLeft, cols = len(cols)-maxTableColumns, cols[:maxTableColumns]
	}
	v.Columns = cellTexts(cols)
	rows := t.Rows
	if len(rows) > maxTableRows {
		v.RowsLeft, rows = len(rows)-maxTableRows, rows[:maxTableRows]
	}
	for i, r := range rows {
		row := tableRow{}
		if i < len(t.Index) {
			row.Label = cellText(t.Index[i])
		}
		if len(r) > maxTableColumns {
			r = r[:maxTableColumns]
		}
		row.Cells = cellTexts(r)
		v.Rows = append(v.Rows, row)
	}
	return v, nil
}

func cellTexts(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = cellText(c)
	}
	return out
}

// cellText is a table cell as drawn: escaped (visible), its first maxTableCellBytes, with … when
// cut.
func cellText(s string) string {
	if len(s) <= maxTableCellBytes {
		return visible(s)
	}
	cut := maxTableCellBytes
	for cut > maxTableCellBytes-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	s = s[:cut]
	return visible(strings.TrimRight(s, "\n")) + "…"
}
