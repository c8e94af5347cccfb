//go:build integration

package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// chartCode is what an agent writes to look at data: a pandas DataFrame, a matplotlib line chart
// with a title and axis labels, saved to /work. 6x4 inches at 100 dpi is a 600x400 PNG.
const chartCode = `import matplotlib
import matplotlib.pyplot as plt
import pandas as pd

df = pd.DataFrame({
    "month": ["Jan", "Feb", "Mar", "Apr", "May", "Jun"],
    "revenue": [12.5, 14.0, 13.25, 16.0, 18.5, 21.0],
})
fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
ax.plot(df["month"], df["revenue"], marker="o")
ax.set_title("Revenue by month")
ax.set_xlabel("month")
ax.set_ylabel("revenue (k)")
plt.savefig("chart.png")
print("backend=" + matplotlib.get_backend())
print("total=%.2f" % df["revenue"].sum())
`

// TestDataImageChart runs a pandas + matplotlib chart in the data image through the real backend,
// hardened as every run is (read-only root, HOME=/tmp, /work, a uid of its own, no network), and
// checks that the chart comes back as a PNG of the size asked for, drawn with Agg.
func TestDataImageChart(t *testing.T) {
	needDataImage(t)
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, func(c *Config) { c.Image = testDataImage() })
		c := checked(t, guard.Python, chartCode, func(r *guard.Request) { r.Limits.Timeout = time.Minute })
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		res, err := b.Run(ctx, c)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		t.Logf("%s: the chart run took %s (the backend measured %s)", rt, time.Since(start).Round(time.Millisecond), res.Duration.Round(time.Millisecond))
		if !res.OK {
			t.Fatalf("code failed: outcome %s exit %d\nstdout: %s\nstderr: %s", res.Outcome, res.ExitCode, res.Stdout, res.Stderr)
		}
		got := keyValues(res.Stdout)
		if got["backend"] != "agg" || got["total"] != "95.25" {
			t.Errorf("stdout: got backend=%q total=%q; want agg (the image's /etc/matplotlibrc) and 95.25", got["backend"], got["total"])
		}
		if bytes.Contains(res.Stderr, []byte("findfont")) {
			t.Errorf("matplotlib found no font to draw text with: %s", res.Stderr)
		}
		if !strings.HasPrefix(res.ImageID, "sha256:") {
			t.Errorf("image id: got %q; want sha256:...", res.ImageID)
		}
		var chart []byte
		for _, f := range res.Files {
			if f.Name == "chart.png" {
				chart = f.Content
			}
		}
		if chart == nil {
			t.Fatalf("produced files: got %d files, no chart.png (files_truncated=%t)", len(res.Files), res.FilesTruncated)
		}
		if magic := []byte("\x89PNG\r\n\x1a\n"); !bytes.HasPrefix(chart, magic) {
			t.Fatalf("chart.png starts with %q; want the PNG signature %q", chart[:min(len(chart), 8)], magic)
		}
		img, err := png.Decode(bytes.NewReader(chart))
		if err != nil {
			t.Fatalf("decode chart.png (%d bytes): %v", len(chart), err)
		}
		if got, want := img.Bounds().Size(), image.Pt(600, 400); got != want {
			t.Errorf("chart.png: got %v pixels; want %v", got, want)
		}
		if colors := distinctColors(img, 3); colors < 3 {
			t.Errorf("chart.png has %d colours; want a drawn chart (background, text, line)", colors)
		}
	})
}

// distinctColors counts the image's colours, stopping at enough.
func distinctColors(img image.Image, enough int) int {
	seen := map[[4]uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			seen[[4]uint32{cr, cg, cb, ca}] = true
			if len(seen) >= enough {
				return len(seen)
			}
		}
	}
	return len(seen)
}

// TestDataImageShowsChartsAndTables: in the data image, a run's plt.show() and a figure it left
// open come back as PNG outputs of the size drawn, and a cell ending with a DataFrame shows it as
// a table and as text, with its figure left open after it.
func TestDataImageShowsChartsAndTables(t *testing.T) {
	needDataImage(t)
	eachSessionRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, func(c *Config) { c.Image = testDataImage() })
		code := strings.Replace(chartCode, `plt.savefig("chart.png")`, "plt.show()\nplt.figure(figsize=(3, 2), dpi=100)\nplt.bar(['a', 'b'], [1, 2])", 1)
		c := checked(t, guard.Python, code, func(r *guard.Request) { r.Limits.Timeout = time.Minute })
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := b.Run(ctx, c)
		if err != nil || !res.OK {
			t.Fatalf("run: %v, exit %d stderr %s", err, res.ExitCode, res.Stderr)
		}
		if len(res.Outputs) != 2 {
			t.Fatalf("outputs %q; want the shown chart and the open bar chart", outputsOf(res.Outputs))
		}
		for i, want := range []image.Point{{600, 400}, {300, 200}} {
			o := res.Outputs[i]
			img, err := png.Decode(bytes.NewReader(o.Data))
			if o.Index != i+1 || o.Source != guard.OutputFigure || o.MIME != guard.MIMEPNG || err != nil || img.Bounds().Size() != want {
				t.Errorf("output %d: %d %s %s, %v; want figure %d, a %v PNG", i, o.Index, o.Source, o.MIME, err, i+1, want)
			}
		}

		ts := openSession(t, b, func(r *guard.SessionRequest) { r.Limits.Timeout = time.Minute })
		ts.must(guard.Python, "import pandas as pd, matplotlib.pyplot as plt\ndf = pd.DataFrame({'x': [1, 2, 3], 'y<b>': ['a', 'b', '<i>c</i>']})\n")
		cell := ts.must(guard.Python, "plt.plot(df['x'])\ndf\n")
		got := outputsOf(cell.Outputs)
		if len(got) != 3 || cell.Outputs[0].MIME != guard.MIMETable || cell.Outputs[1].MIME != guard.MIMEText || cell.Outputs[2].Source != guard.OutputFigure {
			t.Fatalf("cell outputs %q; want the DataFrame as a table and as text, then the open figure", got)
		}
		var table guard.TableOutput
		if err := json.Unmarshal(cell.Outputs[0].Data, &table); err != nil || strings.Join(table.Columns, ",") != "x,y<b>" ||
			len(table.Rows) != 3 || table.Rows[2][1] != "<i>c</i>" || strings.Join(table.Index, ",") != "0,1,2" {
			t.Errorf("table %s (%v); want columns x and y<b>, three rows, markup as text", cell.Outputs[0].Data, err)
		}
		if !strings.Contains(string(cell.Outputs[1].Data), "<i>c</i>") {
			t.Errorf("text %q; want the DataFrame's repr", cell.Outputs[1].Data)
		}
		// SVG on request: the figure as SVG first, then as PNG.
		svg := ts.must(guard.Python, "plt.rcParams['savefig.format'] = 'svg'\nplt.plot([1, 2])\nplt.show()\n")
		if len(svg.Outputs) != 2 || svg.Outputs[0].MIME != guard.MIMESVG || !bytes.Contains(svg.Outputs[0].Data, []byte("<svg")) || svg.Outputs[1].MIME != guard.MIMEPNG {
			t.Errorf("outputs with savefig.format svg: %q; want the figure as SVG, then PNG", outputsOf(svg.Outputs))
		}
	})
}
