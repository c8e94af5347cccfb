package mcpserver

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/outputtext"
)

// What the code showed (guard.Output) reaches the model as content blocks, one shown thing
// (the outputs that share an Index) at a time: a caption that names every representation by its
// source, type and size, then the first representation a model can read. A PNG or JPEG is image
// content (its bytes, base64 on the wire, and its mimeType), once its bytes start as that type's
// do; a table is text, aligned (or CSV when aligned would outgrow its JSON); text/plain and JSON
// are text; every text escaped (outputtext). SVG and HTML are never sent as images or markup:
// their caption names them by type and size, and a plainer representation of the same thing,
// if any, is sent instead. Left-out outputs are named with their size. Each byte is sent once:
// the structured result lists the outputs without their data, and the other representations of
// a thing already sent are named, not sent. The result's own caps (guard.Limits.MaxOutputs,
// MaxOutputBytes, MaxTotalOutputBytes) bound what one answer carries.

// imageMagic is how the bytes of each image type sent as image content start.
var imageMagic = map[string][]byte{
	guard.MIMEPNG:  []byte("\x89PNG\r\n\x1a\n"),
	guard.MIMEJPEG: {0xff, 0xd8, 0xff},
}

// minTableTextBytes is the least a table's text may take however small its JSON: aligned, a
// small table's padding can outgrow its JSON.
const minTableTextBytes = 4096

// outputContent returns the content blocks of outs (see above), and a last text block when
// truncated says some were dropped or left out.
func outputContent(outs []guard.Output, truncated bool) []mcp.Content {
	var content []mcp.Content
	for start := 0; start < len(outs); {
		end := start + 1
		for end < len(outs) && outs[end].Index == outs[start].Index {
			end++
		}
		content = append(content, shownContent(outs[start:end])...)
		start = end
	}
	if truncated {
		content = append(content, &mcp.TextContent{Text: "Some outputs were dropped or left out: over the output limits (how many, how big, or in all)."})
	}
	return content
}

// shownContent is one shown thing, all its representations: the caption, and the first
// representation that can be sent.
func shownContent(reps []guard.Output) []mcp.Content {
	chosen := -1
	var notes []string
	for i, o := range reps {
		ok, why := sendable(o)
		switch {
		case !ok:
			notes = append(notes, outputtext.Describe(o)+why)
		case chosen < 0:
			chosen = i
			notes = append(notes, outputtext.Describe(o)+sentAs(o))
		default:
			notes = append(notes, outputtext.Describe(o)+" (not sent: the first one is)")
		}
	}
	caption := fmt.Sprintf("output %d: %s", reps[0].Index, strings.Join(notes, "; also "))
	if chosen < 0 {
		return []mcp.Content{&mcp.TextContent{Text: caption}}
	}
	o := reps[chosen]
	switch o.MIME {
	case guard.MIMEPNG, guard.MIMEJPEG:
		return []mcp.Content{&mcp.TextContent{Text: caption}, &mcp.ImageContent{Data: o.Data, MIMEType: o.MIME}}
	case guard.MIMETable:
		t, _ := outputtext.Table(o.Data) // sendable refused a table that does not read
		return []mcp.Content{&mcp.TextContent{Text: caption + ":\n" + outputtext.TableText(t, max(len(o.Data), minTableTextBytes))}}
	}
	return []mcp.Content{&mcp.TextContent{Text: caption + ":\n" + outputtext.Text(string(o.Data))}}
}

// sendable says whether o can be sent as content, and when not why (starting with " "; empty
// for a left-out output, which Describe says is).
func sendable(o guard.Output) (bool, string) {
	switch {
	case o.LeftOut:
		return false, ""
	case o.MIME == guard.MIMESVG || o.MIME == guard.MIMEHTML:
		return false, " (not sent: SVG and HTML are never sent as images or markup)"
	case imageMagic[o.MIME] != nil && !bytes.HasPrefix(o.Data, imageMagic[o.MIME]):
		return false, fmt.Sprintf(" (not sent: its bytes do not start as %s does)", o.MIME)
	case o.MIME == guard.MIMETable:
		if _, err := outputtext.Table(o.Data); err != nil {
			return false, " (not sent: not a table this server can read)"
		}
	}
	return true, ""
}

// sentAs says how the chosen representation follows its caption.
func sentAs(o guard.Output) string {
	switch o.MIME {
	case guard.MIMEPNG, guard.MIMEJPEG:
		return " (the next block, as an image)"
	case guard.MIMETable:
		return " (below, as text)"
	}
	return " (below, escaped)"
}

// withoutData returns r as the structured result carries it: the produced files without their
// contents (client.WithoutContents) and the outputs without their data, which the content
// blocks carry. r is not changed.
func withoutData(r guard.Result) guard.Result {
	r = client.WithoutContents(r)
	if r.Outputs == nil {
		return r
	}
	outs := make([]guard.Output, len(r.Outputs))
	for i, o := range r.Outputs {
		o.Data = nil
		outs[i] = o
	}
	r.Outputs = outs
	return r
}

// shownThings counts the shown things of outs: the distinct Indexes.
func shownThings(outs []guard.Output) int {
	n, last := 0, 0
	for _, o := range outs {
		if o.Index != last {
			n, last = n+1, o.Index
		}
	}
	return n
}
