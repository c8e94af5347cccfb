// Package outputtest makes what hostile code shows (guard.Output) and writes, for the tests of
// the doors that draw it: a real PNG chart beside SVG and HTML that run script and load from an
// address the test listens on, a PNG whose header claims a picture no browser should allocate,
// text with terminal escapes and markup, and a file named .png that holds HTML. Test-only.
package outputtest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Marker is the page-global name the hostile outputs' script sets (window[Marker]): a page where
// it is set ran their code.
const Marker = "__sandboxflow_output_ran"

// Markers of the outputs whose bytes must never reach a page, not even escaped.
const (
	SVGMark  = "SVG_SCRIPT_MARK"
	HTMLMark = "HTML_SCRIPT_MARK"
)

// TextMark is in the text output, and FileMark in the file named .png that holds HTML: a page
// shows both as escaped text.
const (
	TextMark = "TEXT_OUTPUT_MARK"
	FileMark = "FILE_HTML_MARK"
)

// ChartWidth and ChartHeight are Chart's size.
const (
	ChartWidth  = 480
	ChartHeight = 240
)

// Chart is a real PNG: a bar chart of ChartWidth x ChartHeight.
func Chart(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, ChartWidth, ChartHeight))
	for y := range ChartHeight {
		for x := range ChartWidth {
			img.Set(x, y, color.White)
		}
	}
	for i, h := range []int{60, 150, 100, 200, 80} {
		for x := 40 + i*85; x < 100+i*85; x++ {
			for y := ChartHeight - h; y < ChartHeight; y++ {
				img.Set(x, y, color.RGBA{R: 11, G: 92, B: 173, A: 255})
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Photo is a real JPEG of 64 x 48.
func Photo(t testing.TB) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 64, 48))
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// HugePNG is the start of a PNG whose header (a valid IHDR chunk) claims width x height pixels.
func HugePNG(width, height uint32) []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	data := binary.BigEndian.AppendUint32(nil, width)
	data = binary.BigEndian.AppendUint32(data, height)
	data = append(data, 8, 6, 0, 0, 0) // 8-bit RGBA, no interlace
	chunk := append([]byte("IHDR"), data...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	b = append(b, chunk...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(chunk))
}

// SVG runs script and loads an image from url when drawn as markup.
func SVG(url string) []byte {
	return fmt.Appendf(nil, `<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" onload="window.%[1]s='svg onload'">`+
		`<script>window.%[1]s = "%[2]s"; document.title = "pwned";</script>`+
		`<image href="%[3]s/svg-image" width="10" height="10"/><text x="10" y="50">chart</text></svg>`, Marker, SVGMark, url)
}

// HTML runs script and loads from url when drawn as markup.
func HTML(url string) []byte {
	return fmt.Appendf(nil, `<div><script>window.%[1]s = "%[2]s"</script><img src="%[3]s/html-img" onerror="window.%[1]s='html onerror'">`+
		`<iframe src="%[3]s/html-frame"></iframe><b>table</b></div>`, Marker, HTMLMark, url)
}

// Text is text/plain with terminal escapes (colour, window title, clear screen) and markup that
// would end a <pre> and run script.
func Text() []byte {
	return fmt.Appendf(nil, "%s red \x1b[31mX\x1b[0m title \x1b]0;pwned\x07 clear \x1b[2J\n</pre><script>window.%s = 'text'</script><pre>\n", TextMark, Marker)
}

// Table is a MIMETable output whose names and cells are markup, one loading from url.
func Table(url string) []byte {
	b, _ := json.Marshal(guard.TableOutput{
		Columns: []string{"<b>col</b>", "value"},
		Index:   []string{"0", "<i>1</i>"},
		Rows: [][]string{
			{fmt.Sprintf(`<img src="%s/table-img" onerror="window.%s='table'">`, url, Marker), "1"},
			{"</td></tr></table><script>window." + Marker + " = 'table'</script>", "2"},
		},
	})
	return b
}

// JSON is an application/json output holding markup.
func JSON() []byte {
	return fmt.Appendf(nil, `{"note": "</pre><script>window.%s = 'json'</script>", "n": [1, 2, 3]}`, Marker)
}

// Outputs are a run's outputs, each thing shown with what it is (guard.Output.Index):
//  1. a figure as a real PNG chart, then as hostile SVG;
//  2. hostile SVG alone;
//  3. hostile HTML alone;
//  4. a PNG whose header claims 100000 x 100000 pixels;
//  5. text with terminal escapes and markup;
//  6. a table of markup, then as text;
//  7. JSON holding markup;
//  8. a PNG left out (over the limits);
//  9. HTML labelled as a PNG;
//  10. a real JPEG.
//
// url is where the hostile markup loads from: a listener of the test's that counts requests.
func Outputs(t testing.TB, url string) []guard.Output {
	t.Helper()
	outs := []guard.Output{
		{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Data: Chart(t)},
		{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMESVG, Data: SVG(url)},
		{Index: 2, Source: guard.OutputDisplay, MIME: guard.MIMESVG, Data: SVG(url)},
		{Index: 3, Source: guard.OutputDisplay, MIME: guard.MIMEHTML, Data: HTML(url)},
		{Index: 4, Source: guard.OutputDisplay, MIME: guard.MIMEPNG, Data: HugePNG(100000, 100000)},
		{Index: 5, Source: guard.OutputDisplay, MIME: guard.MIMEText, Data: Text()},
		{Index: 6, Source: guard.OutputValue, MIME: guard.MIMETable, Data: Table(url)},
		{Index: 6, Source: guard.OutputValue, MIME: guard.MIMEText, Data: []byte("   <b>col</b> value\n0  ...\n")},
		{Index: 7, Source: guard.OutputDisplay, MIME: guard.MIMEJSON, Data: JSON()},
		{Index: 8, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Size: 5 << 20, LeftOut: true},
		{Index: 9, Source: guard.OutputDisplay, MIME: guard.MIMEPNG, Data: HTML(url)},
		{Index: 10, Source: guard.OutputDisplay, MIME: guard.MIMEJPEG, Data: Photo(t)},
	}
	for i := range outs {
		if !outs[i].LeftOut {
			outs[i].Size = int64(len(outs[i].Data))
		}
	}
	return outs
}

// Files are files the code wrote: a real PNG chart and a file named .png that holds HTML.
func Files(t testing.TB, url string) []guard.File {
	t.Helper()
	chart := Chart(t)
	evil := fmt.Appendf(nil, `<html><body><script>window.%s = "%s"</script><img src="%s/file-img"></body></html>`, Marker, FileMark, url)
	return []guard.File{
		{Name: "plots/chart.png", Size: int64(len(chart)), Content: chart},
		{Name: "evil.png", Size: int64(len(evil)), Content: evil},
	}
}
