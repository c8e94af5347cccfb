package mcpserver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/guard"
)

// pngOf is a w×h PNG.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestOutputContent: a PNG figure is an image block (base64 on the wire) that decodes to the
// figure, its text representation named and not sent; a table is aligned text with its escapes
// drawn; HTML and SVG are named by type and size, never sent as markup or images (a plainer
// representation of the same thing is sent instead); bytes that are not the PNG they claim are
// not sent as an image; a left-out output is named with its size; the structured result
// carries no output data.
func TestOutputContent(t *testing.T) {
	fig := pngOf(t, 7, 5)
	res := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Outputs: []guard.Output{
		{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Size: int64(len(fig)), Data: fig},
		{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEText, Size: 8, Data: []byte("<Figure>")},
		{Index: 2, Source: guard.OutputDisplay, MIME: guard.MIMETable, Size: 60, Data: []byte(`{"columns":["a","b"],"rows":[["1","\u001b[31mred"],["22","x"]]}`)},
		{Index: 3, Source: guard.OutputDisplay, MIME: guard.MIMEHTML, Size: 21, Data: []byte("<script>x()</script>")},
		{Index: 3, Source: guard.OutputDisplay, MIME: guard.MIMEText, Size: 10, Data: []byte("plain\x1b[8m")},
		{Index: 4, Source: guard.OutputFigure, MIME: guard.MIMESVG, Size: 12, Data: []byte("<svg onload>")},
		{Index: 5, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Size: 9, Data: []byte("<html>...")},
		{Index: 6, Source: guard.OutputValue, MIME: guard.MIMEPNG, Size: 5 << 20, LeftOut: true},
	}, OutputsTruncated: true}
	out := resultContent("sandbox-1", res)
	var texts []string
	var images []*mcp.ImageContent
	for _, c := range out.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			texts = append(texts, c.Text)
		case *mcp.ImageContent:
			images = append(images, c)
		default:
			t.Errorf("content %T; want text and images only", c)
		}
	}
	all := strings.Join(texts, "\n---\n")
	if len(images) != 1 || images[0].MIMEType != guard.MIMEPNG {
		t.Fatalf("images %+v; want the one PNG figure", images)
	}
	wire, err := json.Marshal(images[0])
	if err != nil {
		t.Fatal(err)
	}
	var block struct{ Type, Data, MIMEType string }
	if err := json.Unmarshal(wire, &block); err != nil || block.Type != "image" || block.MIMEType != "image/png" {
		t.Fatalf("image block on the wire %s: %v", wire, err)
	}
	raw, err := base64.StdEncoding.DecodeString(block.Data)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width != 7 || cfg.Height != 5 {
		t.Errorf("the image block decodes to %+v, %v; want a 7×5 PNG", cfg, err)
	}
	for _, want := range []string{
		"output 1: figure, image/png, ",
		"also figure, text/plain, 8 B (not sent: the first one is)",
		"output 2: display, table, 2 rows × 2 columns, 60 B (below, as text):\na   b\n1   \\x1b[31mred\n22  x\n",
		"output 3: display, text/html, 21 B (not sent: SVG and HTML are never sent as images or markup); also display, text/plain, 10 B (below, escaped):\nplain\\x1b[8m",
		"output 4: figure, image/svg+xml, 12 B (not sent: SVG and HTML are never sent as images or markup)",
		"output 5: figure, image/png, 9 B (not sent: its bytes do not start as image/png does)",
		"output 6: value, image/png, 5 MiB, left out (over the output limits)",
		"Some outputs were dropped or left out",
		"6 output(s) shown by the code",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the text content lacks %q:\n%s", want, all)
		}
	}
	for _, never := range []string{"<script>", "<svg", "<html>", "<Figure>", "\x1b"} {
		if strings.Contains(all, never) {
			t.Errorf("the text content holds %q:\n%s", never, all)
		}
	}
	b, err := json.Marshal(out.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var structured guard.Result
	if err := json.Unmarshal(b, &structured); err != nil || len(structured.Outputs) != len(res.Outputs) {
		t.Fatalf("structured content %s: %v; want every output listed", b, err)
	}
	for _, o := range structured.Outputs {
		if o.Data != nil {
			t.Errorf("structured output %d (%s) carries its data; content blocks do", o.Index, o.MIME)
		}
	}
}
