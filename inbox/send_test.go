package inbox

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/outputtest"
)

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"out/report.html":      "report.html",
		`dir\evil.png`:         "evil.png",
		"..":                   "file",
		"":                     "file",
		".bashrc":              "bashrc",
		"a b<c>.txt":           "a_b_c_.txt",
		`a"b;c.csv`:            "a_b_c.csv",
		"chart\u202egnp.exe":   "chart_gnp.exe",
		"\x1b[31m.png":         "__31m.png",
		"r\u00e9sum\u00e9.pdf": "r\u00e9sum\u00e9.pdf",
		"chart.png.txt":        "chart.png.txt",
		"\xff.png":             "_.png",
	} {
		if got := safeName(in); got != want {
			t.Errorf("safeName(%q) = %q; want %q", in, got, want)
		}
	}
	if got, want := contentDisposition("attachment", "r\u00e9sum\u00e9.pdf"), `attachment; filename="r_sum_.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf`; got != want {
		t.Errorf("contentDisposition = %s; want %s", got, want)
	}
}

func TestCheckPicture(t *testing.T) {
	for _, c := range []struct {
		name, mime string
		b          []byte
		ok         bool
	}{
		{"a real PNG", guard.MIMEPNG, outputtest.Chart(t), true},
		{"a real JPEG", guard.MIMEJPEG, outputtest.Photo(t), true},
		{"a JPEG said to be a PNG", guard.MIMEPNG, outputtest.Photo(t), false},
		{"a PNG claiming 100000x100000", guard.MIMEPNG, outputtest.HugePNG(100000, 100000), false},
		{"a PNG claiming 40 megapixels and one row", guard.MIMEPNG, outputtest.HugePNG(8000, 5001), false},
		{"a PNG header of 8000x5000", guard.MIMEPNG, outputtest.HugePNG(8000, 5000), true},
		{"the PNG magic and garbage", guard.MIMEPNG, []byte("\x89PNG\r\n\x1a\ngarbage"), false},
		{"HTML said to be a PNG", guard.MIMEPNG, outputtest.HTML("http://127.0.0.1:1"), false},
		{"SVG", guard.MIMESVG, outputtest.SVG("http://127.0.0.1:1"), false},
	} {
		_, err := checkPicture(c.mime, c.b)
		if got := err == nil; got != c.ok {
			t.Errorf("%s: drawn %v (%v); want %v", c.name, got, err, c.ok)
		}
	}
}

// sent is one response of sendResultPart.
type sent struct {
	part   string
	inline bool
	code   int
	// ctype and disposition are the headers wanted on a 200.
	ctype, disposition string
}

// TestSendResultPartHeaders: every output and file a run made is sent as an attachment of a
// type from the short list (a picture's only when its bytes are one the inbox draws), or, asked
// for inline, as a picture only when it is one: SVG, HTML, a PNG claiming a huge size, HTML
// labelled a PNG and a file named .png holding HTML are refused inline and downloaded as
// application/octet-stream. Every download carries nosniff and a CSP that runs nothing.
func TestSendResultPartHeaders(t *testing.T) {
	const url = "http://127.0.0.1:9"
	res := &guard.Result{Stdout: outputtest.Text(), Outputs: outputtest.Outputs(t, url),
		Files: append(outputtest.Files(t, url), guard.File{Name: "data/table.csv", Content: []byte("a,b\n1,2\n")})}
	for _, c := range []sent{
		{"stdout", false, 200, "text/plain; charset=utf-8", `attachment; filename="stdout.txt"; filename*=UTF-8''stdout.txt`},
		{"stdout", true, 415, "", ""},
		{"output-0", true, 200, "image/png", `inline; filename="output-1.png"; filename*=UTF-8''output-1.png`},
		{"output-0", false, 200, "image/png", `attachment; filename="output-1.png"; filename*=UTF-8''output-1.png`},
		{"output-1", false, 200, octetStream, `attachment; filename="output-1.svg"; filename*=UTF-8''output-1.svg`},
		{"output-1", true, 415, "", ""},
		{"output-3", false, 200, octetStream, `attachment; filename="output-3.html"; filename*=UTF-8''output-3.html`},
		{"output-3", true, 415, "", ""},
		{"output-4", false, 200, octetStream, `attachment; filename="output-4.png"; filename*=UTF-8''output-4.png`},
		{"output-4", true, 415, "", ""},
		{"output-5", false, 200, "text/plain; charset=utf-8", `attachment; filename="output-5.txt"; filename*=UTF-8''output-5.txt`},
		{"output-6", false, 200, guard.MIMEJSON, `attachment; filename="output-6.json"; filename*=UTF-8''output-6.json`},
		{"output-9", false, 404, "", ""}, // left out: no data
		{"output-10", true, 415, "", ""},
		{"output-10", false, 200, octetStream, `attachment; filename="output-9.png"; filename*=UTF-8''output-9.png`},
		{"output-11", true, 200, "image/jpeg", `inline; filename="output-10.jpg"; filename*=UTF-8''output-10.jpg`},
		{"output-12", false, 404, "", ""},
		{"file-0", true, 200, "image/png", `inline; filename="chart.png"; filename*=UTF-8''chart.png`},
		{"file-0", false, 200, "image/png", `attachment; filename="chart.png"; filename*=UTF-8''chart.png`},
		{"file-1", false, 200, octetStream, `attachment; filename="evil.png"; filename*=UTF-8''evil.png`},
		{"file-1", true, 415, "", ""},
		{"file-2", false, 200, "text/csv; charset=utf-8", `attachment; filename="table.csv"; filename*=UTF-8''table.csv`},
	} {
		w := httptest.NewRecorder()
		sendResultPart(w, res, c.part, c.inline)
		checkSent(t, c, w)
	}
}

func checkSent(t *testing.T, c sent, w *httptest.ResponseRecorder) {
	t.Helper()
	h := w.Result().Header
	if w.Code != c.code {
		t.Errorf("%s (inline %v): %d; want %d", c.part, c.inline, w.Code, c.code)
		return
	}
	if c.code != http.StatusOK {
		if ct := h.Get("Content-Type"); ct != "text/plain; charset=utf-8" || h.Get("Content-Disposition") != "" {
			t.Errorf("%s (inline %v): refused as %s, %q; want plain text, no disposition", c.part, c.inline, ct, h.Get("Content-Disposition"))
		}
		return
	}
	for k, want := range map[string]string{"Content-Type": c.ctype, "Content-Disposition": c.disposition,
		"X-Content-Type-Options": "nosniff", "Content-Security-Policy": sentCSP} {
		if got := h.Get(k); got != want {
			t.Errorf("%s (inline %v): %s %q; want %q", c.part, c.inline, k, got, want)
		}
	}
}
