package inbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/outputtest"
)

// hostileURL is where the hostile outputs would load from; no test here listens on it.
const hostileURL = "http://127.0.0.1:9"

// hostileResult is a finished run's result showing every hostile output and writing the hostile
// files.
func hostileResult(t *testing.T) guard.Result {
	return guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("done\n"),
		Outputs: outputtest.Outputs(t, hostileURL), Files: outputtest.Files(t, hostileURL)}
}

// checkNoMarkup fails unless page (a page the inbox drew) carries nothing of the hostile
// outputs as markup: SVG and HTML not at all, not even escaped; text, JSON and table cells
// escaped only; no terminal escape.
func checkNoMarkup(t *testing.T, what, page string) {
	t.Helper()
	for _, bad := range []string{"<svg", "<image", "<iframe", "<script>window", "<img src=\"" + hostileURL, "<b>col", "<i>1",
		"</td></tr></table><script>", "</pre><script>", "onerror=\"window", "\x1b", "\x07"} {
		if strings.Contains(page, bad) {
			t.Errorf("%s holds %q unescaped", what, bad)
		}
	}
	text := html.UnescapeString(page)
	for _, never := range []string{outputtest.SVGMark, outputtest.HTMLMark} {
		if strings.Contains(text, never) {
			t.Errorf("%s shows %s: markup's bytes reached the page", what, never)
		}
	}
	for _, escaped := range []string{outputtest.TextMark + ` red \u001b[31mX\u001b[0m title \u001b]0;pwned\u0007`, "</pre><script>window." + outputtest.Marker + " = 'text'</script>",
		"<b>col</b>", "<i>1</i>", `<img src="` + hostileURL + `/table-img"`, `"note": "</pre><script>`} {
		if !strings.Contains(text, escaped) {
			t.Errorf("%s lacks %q as escaped text", what, escaped)
		}
	}
}

// checkOutputsDrawn fails unless page draws the hostile outputs as the inbox should, with links
// under links: the chart and the JPEG as pictures of their size, the rest named with why they
// are not drawn.
func checkOutputsDrawn(t *testing.T, what, page, links string) {
	t.Helper()
	for _, want := range []string{
		fmt.Sprintf(`<img class="picture" src="%soutput-0?inline=1" width="%d" height="%d"`, links, outputtest.ChartWidth, outputtest.ChartHeight),
		fmt.Sprintf(`<img class="picture" src="%soutput-11?inline=1" width="64" height="48"`, links),
		`SVG, ` + fmt.Sprint(len(outputtest.SVG(hostileURL))) + ` B: not drawn (markup is never drawn here), <a class="dl" href="` + links + `output-1" download>`,
		`SVG, ` + fmt.Sprint(len(outputtest.SVG(hostileURL))) + ` B: not drawn (markup is never drawn here), <a class="dl" href="` + links + `output-2" download>`,
		`HTML, ` + fmt.Sprint(len(outputtest.HTML(hostileURL))) + ` B: not drawn (markup is never drawn here), <a class="dl" href="` + links + `output-3" download>`,
		`PNG, 33 B: not drawn (its header claims 100000x100000 pixels, past the 40 megapixels the inbox draws), <a class="dl" href="` + links + `output-4" download>`,
		`PNG, 5 MiB: left out, over the run&#39;s output limits (not carried)</p>`,
		`PNG, ` + fmt.Sprint(len(outputtest.HTML(hostileURL))) + ` B: not drawn (its bytes are not a PNG picture), <a class="dl" href="` + links + `output-10" download>`,
		`<th>&lt;b&gt;col&lt;/b&gt;</th>`, `<th>&lt;i&gt;1&lt;/i&gt;</th>`,
		`text, 27 B: another form of the same output, <a class="dl" href="` + links + `output-7" download>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("%s lacks %s", what, want)
		}
	}
	if n := strings.Count(page, `<img `); n != 2+strings.Count(page, `alt="plots/chart.png`) {
		t.Errorf("%s draws %d pictures; want the chart and the JPEG (and the chart file)", what, n)
	}
}

// TestRunPageShowsOutputs: a finished run's page draws what the code showed, in order, every
// picture a link to the result's own bytes, markup never; a file the code wrote that is a
// picture is drawn as one, a file named .png that holds HTML is not.
func TestRunPageShowsOutputs(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	rv := &runView{ID: "run-1", State: contract.StatusSucceeded}
	rv.Result = newResultView(hostileResult(t))
	rv.Result.setLinks(rv.DownloadBase(), 0)
	var b bytes.Buffer
	if err := pages["run"].ExecuteTemplate(&b, "layout", pageData{Title: "run", Run: rv}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkNoMarkup(t, "the run page", page)
	checkOutputsDrawn(t, "the run page", page, "/run/run-1/download/")
	want := fmt.Sprintf(`<img class="picture" src="/run/run-1/download/file-0?inline=1" width="%d" height="%d" alt="plots/chart.png, %dx%d"`,
		outputtest.ChartWidth, outputtest.ChartHeight, outputtest.ChartWidth, outputtest.ChartHeight)
	if !strings.Contains(page, want) {
		t.Errorf("the run page does not draw the chart file: lacks %s", want)
	}
	if strings.Contains(page, "file-1?inline") || !strings.Contains(html.UnescapeString(page), outputtest.FileMark) {
		t.Error("the run page draws evil.png, a file named .png that holds HTML, as a picture, or not as text")
	}
	if i, j := strings.Index(page, "Output 1 · figure"), strings.Index(page, "Output 10 · display"); i < 0 || j < i {
		t.Errorf("outputs not drawn in order: output 1 at %d, output 10 at %d", i, j)
	}
}

// TestSessionPageShowsCellOutputs: the page of a session's waiting cell shows what each earlier
// cell showed, verified, through the inbox's own server (its headers too); a cell whose result
// does not verify shows none of its outputs and its downloads are refused.
func TestSessionPageShowsCellOutputs(t *testing.T) {
	f := newSessionFixture(t, "session-outputs")
	res := hostileResult(t)
	f.add("show()\n", contract.StatusSucceeded, &res)
	unverified := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Outputs: []guard.Output{
		{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Size: 10, Data: outputtest.Chart(t)}}}
	f.add("show()\n", contract.StatusSucceeded, &unverified)
	f.add("print(3)\n", contract.StatusAwaitingApproval, nil)
	door := &sessionDoorFake{unverified: map[int]error{2: &guard.ReceiptRefused{Field: "receipt", Msg: "no receipt of cell 2"}}}
	door.set(f)
	b := newSessionServer(t, door, f.start)
	code, page := b.get("/session/session-outputs")
	if code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, page)
	}
	checkNoMarkup(t, "the session page", page)
	checkOutputsDrawn(t, "the session page", page, "/session/session-outputs/download/cell-1-")
	if strings.Contains(page, "cell-2-output") {
		t.Error("the session page links an output of cell 2, whose result does not verify")
	}
	for _, c := range []struct {
		path        string
		code        int
		ctype, disp string
	}{
		{"cell-1-output-0?inline=1", 200, "image/png", "inline; "},
		{"cell-1-output-2", 200, octetStream, "attachment; "},
		{"cell-1-output-2?inline=1", 415, "", ""},
		{"cell-1-output-3", 200, octetStream, "attachment; "},
		{"cell-1-output-4?inline=1", 415, "", ""},
		{"cell-1-file-1", 200, octetStream, "attachment; "},
		{"cell-1-file-1?inline=1", 415, "", ""},
		{"cell-2-output-0?inline=1", http.StatusConflict, "", ""},
	} {
		r := httptest.NewRequest("GET", "/session/session-outputs/download/"+c.path, nil)
		r.AddCookie(b.cookie)
		w := httptest.NewRecorder()
		b.s.ServeHTTP(w, r)
		h := w.Result().Header
		if w.Code != c.code || c.code == 200 && (h.Get("Content-Type") != c.ctype || !strings.HasPrefix(h.Get("Content-Disposition"), c.disp) ||
			h.Get("Content-Security-Policy") != sentCSP || h.Get("X-Content-Type-Options") != "nosniff") {
			t.Errorf("%s: %d %s, %s, CSP %s, %s; want %d %s, %s…, CSP %s, nosniff", c.path, w.Code, h.Get("Content-Type"), h.Get("Content-Disposition"),
				h.Get("Content-Security-Policy"), h.Get("X-Content-Type-Options"), c.code, c.ctype, c.disp, sentCSP)
		}
	}
}

// TestTableOutputIsBounded: a table is drawn at most maxTableRows rows of maxTableColumns
// columns, a long cell cut, and the page says what it left; a table that is not a TableOutput
// is drawn as text.
func TestTableOutputIsBounded(t *testing.T) {
	tab := guard.TableOutput{Truncated: true}
	for i := range maxTableColumns + 3 {
		tab.Columns = append(tab.Columns, fmt.Sprint("c", i))
	}
	for i := range maxTableRows + 7 {
		tab.Rows = append(tab.Rows, []string{strings.Repeat("é", i*10)})
	}
	data, _ := json.Marshal(tab)
	v := newOutputView(0, guard.Output{Index: 1, Source: guard.OutputValue, MIME: guard.MIMETable, Size: int64(len(data)), Data: data})
	if v.Draw != drawTable || len(v.Table.Rows) != maxTableRows || v.Table.RowsLeft != 7 || len(v.Table.Columns) != maxTableColumns || v.Table.ColumnsLeft != 3 || !v.Table.Truncated {
		t.Fatalf("table drawn as %s with %d rows (%d left), %d columns (%d left); want %d rows (7 left), %d columns (3 left)",
			v.Draw, len(v.Table.Rows), v.Table.RowsLeft, len(v.Table.Columns), v.Table.ColumnsLeft, maxTableRows, maxTableColumns)
	}
	last := v.Table.Rows[maxTableRows-1].Cells[0]
	if !strings.HasSuffix(last, "…") || len(last) > maxTableCellBytes+len("…") || !strings.HasPrefix(last, "éé") {
		t.Errorf("a long cell is drawn as %d bytes %.20q…; want its first %d bytes and …", len(last), last, maxTableCellBytes)
	}
	bad := newOutputView(0, guard.Output{Index: 1, Source: guard.OutputValue, MIME: guard.MIMETable, Data: []byte("<table><script>")})
	if bad.Draw != drawText || bad.Text != "<table><script>" {
		t.Errorf("a table that is not JSON is drawn as %q %q; want text", bad.Draw, bad.Text)
	}
}
