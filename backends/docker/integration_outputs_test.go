//go:build integration

package docker

import (
	"bytes"
	"fmt"
	"image/png"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

// pngMaker is Python (standard library only) that defines png(w, h), a grey PNG of w×h pixels.
const pngMaker = `import struct, zlib
def png(w, h):
    raw = b"".join(b"\x00" + b"\x80" * w for _ in range(h))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
class Img:
    def __init__(self, w, h):
        self.w, self.h = w, h
    def _repr_png_(self):
        return png(self.w, self.h)
    def __repr__(self):
        return "Img(%d, %d)" % (self.w, self.h)
`

// outputsOf is "index source mime size[ left out]" of each output, and its data for text.
func outputsOf(outs []guard.Output) []string {
	var s []string
	for _, o := range outs {
		line := fmt.Sprintf("%d %s %s %d", o.Index, o.Source, o.MIME, o.Size)
		if o.LeftOut {
			line += " left out"
		} else if strings.HasPrefix(o.MIME, "text/") {
			line += " " + string(o.Data)
		}
		s = append(s, line)
	}
	return s
}

// TestDockerRunShowsOutputs: display() in a run gives ordered typed outputs (a picture from
// _repr_png_ with its text beside it, a value's repr); one past the per-output cap is left out
// with its size; what the code plants in the capture folder itself (a link to a file outside, a
// name the capture does not write) is dropped, and the result says outputs were truncated. An
// uncaught exception's traceback starts at the code's own frame, as python3 - prints it.
func TestDockerRunShowsOutputs(t *testing.T) {
	eachSessionRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		code := pngMaker + `import os
print("before")
display(Img(3, 2))
display({"a": 1}, "text")
class Big:
    def _repr_png_(self):
        return b"\x89PNG" + b"0" * (400 << 10)
display(Big())
d = "/tmp/.sandboxflow/out"
os.symlink("/etc/hostname", d + "/000010-00-display.txt")
open(d + "/notours.txt", "w").write("x")
print("after")
def f():
    1 / 0
f()
`
		res := mustRun(t, b, checked(t, guard.Python, code, nil))
		if res.ExitCode != 1 || string(res.Stdout) != "before\nafter\n" {
			t.Fatalf("exit %d stdout %q stderr %s; want 1, before and after", res.ExitCode, res.Stdout, res.Stderr)
		}
		if tb := string(res.Stderr); !strings.HasPrefix(tb, "Traceback (most recent call last):\n  File \"<stdin>\", line 29, in <module>\n  File \"<stdin>\", line 28, in f\n") {
			t.Errorf("traceback %q; want it to start at the code's frames", tb)
		}
		got := outputsOf(res.Outputs)
		want := []string{"1 display image/png " + fmt.Sprint(len(res.Outputs[0].Data)), "1 display text/plain 9 Img(3, 2)",
			"2 display text/plain 8 {'a': 1}", "3 display text/plain 6 'text'",
			fmt.Sprintf("4 display image/png %d left out", 4+400<<10), "4 display text/plain " + fmt.Sprint(len(res.Outputs[5].Data)) + " " + string(res.Outputs[5].Data)}
		if strings.Join(got, "\n") != strings.Join(want, "\n") || !res.OutputsTruncated {
			t.Fatalf("outputs:\n%s\ntruncated %t; want\n%s\nand truncated", strings.Join(got, "\n"), res.OutputsTruncated, strings.Join(want, "\n"))
		}
		img, err := png.Decode(bytes.NewReader(res.Outputs[0].Data))
		if err != nil || img.Bounds().Dx() != 3 || img.Bounds().Dy() != 2 {
			t.Errorf("the PNG output: %v, %v; want 3×2", err, img)
		}
	})
}

// TestDockerCellShowsOutputs: a cell's last expression is shown as a notebook shows it, after what
// it displayed; a cell ending in a statement or None shows nothing; an exception in the last
// expression is the cell's error and shows nothing; what a thread shows between cells is not
// the next cell's; the capture's imports never load io.py or json.py a cell wrote in /work.
func TestDockerCellShowsOutputs(t *testing.T) {
	eachSessionRuntime(t, func(t *testing.T, rt string) {
		ts := openSession(t, newTestBackend(t, rt, nil), nil)
		if res := ts.must(guard.Python, pngMaker+"x = 41\ndisplay('first')\nx + 1\n"); strings.Join(outputsOf(res.Outputs), "|") != "1 display text/plain 7 'first'|2 value text/plain 2 42" {
			t.Errorf("cell 1 outputs %q", outputsOf(res.Outputs))
		}
		if res := ts.must(guard.Python, "y = x\nprint(y)\nNone\n"); len(res.Outputs) != 0 || string(res.Stdout) != "41\n" {
			t.Errorf("cell 2: outputs %q stdout %q; want none and 41", outputsOf(res.Outputs), res.Stdout)
		}
		res := ts.must(guard.Python, "import threading, time\ndef later():\n    time.sleep(0.5)\n    display('from a thread')\nthreading.Thread(target=later, daemon=True).start()\n1 / 0\n")
		if res.ExitCode != 1 || len(res.Outputs) != 0 || !strings.Contains(string(res.Stderr), "ZeroDivisionError") {
			t.Errorf("cell 3: exit %d outputs %q stderr %s; want 1, none, the error", res.ExitCode, outputsOf(res.Outputs), res.Stderr)
		}
		ts.must(guard.Shell, "sleep 1; for m in io json; do echo 'print(\"SHADOW\")' > $m.py; done")
		if res := ts.must(guard.Python, "Img(2, 5)\n"); len(res.Outputs) != 2 || res.Outputs[0].MIME != guard.MIMEPNG || res.Outputs[0].Source != guard.OutputValue {
			t.Errorf("cell 5 outputs %q; want Img's PNG and text, not the thread's", outputsOf(res.Outputs))
		}
		// The capture's own imports never load a module an earlier cell wrote in /work.
		// (A stand-in for pandas, whose tables the capture encodes with json, not yet imported.)
		fakePandas := `import sys, types
assert "json" not in sys.modules
pd = types.ModuleType("pandas")
class Frame:
    shape, columns, index = (1, 1), ["c"], [0]
    class _Rows:
        def __getitem__(self, key):
            return FRAME
    iloc = _Rows()
    def itertuples(self, index=False, name=None):
        return iter([(1,)])
pd.DataFrame, pd.Series = Frame, type("Series", (), {})
sys.modules["pandas"] = pd
FRAME = Frame()
FRAME
`
		if res := ts.must(guard.Python, fakePandas); strings.Contains(string(res.Stdout), "SHADOW") || len(res.Outputs) != 2 ||
			string(res.Outputs[0].Data) != `{"columns": ["c"], "index": ["0"], "rows": [["1"]], "truncated": false}` {
			t.Errorf("cell 6: exit %d stdout %q stderr %s outputs %q; want the table and no shadow module run", res.ExitCode, res.Stdout, res.Stderr, outputsOf(res.Outputs))
		}
	})
}
