package guard

import "slices"

// Sources of an Output: what made the code's interpreter show it.
const (
	// OutputFigure is a matplotlib figure: one that plt.show() showed, or one left open when the
	// run or cell ended.
	OutputFigure = "figure"
	// OutputDisplay is a value the code passed to display().
	OutputDisplay = "display"
	// OutputValue is the value of a cell's last expression (sessions), as a notebook shows it.
	OutputValue = "value"
)

// MIME types an Output may have. Every door decides how to show each: images as pictures (SVG
// never as markup), HTML never as markup, tables and text escaped.
const (
	MIMEPNG   = "image/png"
	MIMEJPEG  = "image/jpeg"
	MIMESVG   = "image/svg+xml"
	MIMEHTML  = "text/html"
	MIMEText  = "text/plain"
	MIMEJSON  = "application/json"
	MIMETable = "application/vnd.sandboxflow.table+json"
)

// OutputMIMEs are the MIME types an Output may have; the guard drops any other.
var OutputMIMEs = []string{MIMEPNG, MIMEJPEG, MIMESVG, MIMEHTML, MIMEText, MIMEJSON, MIMETable}

// Output is one thing the code showed (docs/outputs.md), in the order shown. Outputs that share an
// Index are representations of one shown thing, richest first: a DataFrame as a table and as
// text. The code writes them, so they are as untrusted as its stdout.
type Output struct {
	// Index numbers the shown things from 1.
	Index int `json:"index"`
	// Source is OutputFigure, OutputDisplay or OutputValue.
	Source string `json:"source"`
	// MIME is one of OutputMIMEs.
	MIME string `json:"mime"`
	// Size is how many bytes the code produced for it.
	Size int64 `json:"size"`
	// Data is the bytes; empty when LeftOut.
	Data []byte `json:"data,omitempty"`
	// LeftOut says the output was over Limits.MaxOutputBytes, or past MaxOutputs or
	// MaxTotalOutputBytes: its data is not carried.
	LeftOut bool `json:"left_out,omitempty"`
}

// TableOutput is the JSON of a MIMETable output: a table of text cells, as the code's library
// formatted them (a DataFrame's columns, index and rows, each value as its str()). Doors draw it
// escaped; no cell is markup.
type TableOutput struct {
	Columns []string   `json:"columns"`
	Index   []string   `json:"index,omitempty"`
	Rows    [][]string `json:"rows"`
	// Truncated says the code's table had more rows or columns than it carries.
	Truncated bool `json:"truncated,omitempty"`
}

// enforceOutputs applies the output caps of l to outs, in their order: an output of an unknown
// source or MIME type, or whose Index goes back, is dropped; one over MaxOutputBytes, or past
// MaxOutputs or MaxTotalOutputBytes, is kept as LeftOut without its data. Sizes are set from the
// data. It reports whether anything was dropped or left out.
func enforceOutputs(outs []Output, l Limits) ([]Output, bool) {
	var kept []Output
	var total int64
	truncated, last := false, 0
	for _, o := range outs {
		if !slices.Contains(OutputMIMEs, o.MIME) || !slices.Contains([]string{OutputFigure, OutputDisplay, OutputValue}, o.Source) ||
			o.Index < last || o.Index < 1 || len(kept) >= l.MaxOutputs {
			truncated = true
			continue
		}
		last = o.Index
		if !o.LeftOut {
			o.Size = int64(len(o.Data))
		}
		if o.LeftOut || o.Size > l.MaxOutputBytes || total+o.Size > l.MaxTotalOutputBytes {
			o.Data, o.LeftOut, truncated = nil, true, true
		}
		total += int64(len(o.Data))
		kept = append(kept, o)
	}
	return kept, truncated
}
