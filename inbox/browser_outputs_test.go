//go:build integration

package inbox_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/outputtest"
)

// showingBackend is a sandbox backend whose code shows and writes what hostile code would
// (outputtest): the worker enforces its limits on the result and its host signs the receipt,
// as for any backend's.
type showingBackend struct{ res guard.Result }

func (b showingBackend) Name() string { return "showing" }

func (b showingBackend) Run(context.Context, guard.Checked) (guard.Result, error) { return b.res, nil }

// requestCounter is a loopback HTTP server that counts the requests it gets: the hostile
// outputs load from it, so any request is one the inbox's page let them make.
type requestCounter struct {
	url   string
	mu    sync.Mutex
	paths []string
}

func startRequestCounter(t *testing.T) *requestCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &requestCounter{url: "http://" + ln.Addr().String()}
	hs := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.paths = append(c.paths, r.URL.Path)
		c.mu.Unlock()
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return c
}

// take returns the paths requested so far and forgets them.
func (c *requestCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.paths
	c.paths = nil
	return p
}

// TestBrowserInboxOutputs: a run whose code showed a real PNG chart beside SVG and HTML that run
// script and load from a listener of the test's, a PNG claiming 100000x100000 pixels, text and
// a table of markup and terminal escapes, and wrote a chart.png and an evil.png that holds HTML,
// is approved in a real browser; its verified result's page draws the chart, the JPEG and the
// chart file as pictures (decoded: naturalWidth > 0), no script of the outputs runs (the page
// global they set stays unset), no element of theirs is made, and the listener gets no request.
func TestBrowserInboxOutputs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	counter := startRequestCounter(t)
	// The listener counts: a request the test makes itself is seen.
	if resp, err := http.Get(counter.url + "/control"); err == nil {
		resp.Body.Close()
	}
	if got := counter.take(); len(got) != 1 {
		t.Fatalf("the listener saw %v; want the test's own request", got)
	}
	res := guard.Result{ExitCode: 0, Stdout: []byte("shown\n"), Duration: time.Second,
		Outputs: outputtest.Outputs(t, counter.url), Files: outputtest.Files(t, counter.url)}
	e := startEnvWith(t, ctx, showingBackend{res: res})
	signInAlice(t, e)
	if _, err := e.sc.Start(ctx, guard.Request{Code: "show_everything()\n", Language: guard.Python}, client.StartOptions{WorkflowID: "inbox-outputs"}); err != nil {
		t.Fatal(err)
	}
	e.Do(chromedp.Navigate(e.origin + "/run/inbox-outputs"))
	e.WaitFor("the run page", `!!document.getElementById("approve")`, 20*time.Second)
	e.decideAndReturn(chromedp.Click(chromedp.ID("approve")))
	e.WaitFor("the result's pictures, decoded", `(() => { const imgs = document.querySelectorAll("#result img.picture");
		return imgs.length === 3 && Array.from(imgs).every(i => i.complete && i.naturalWidth > 0); })()`, 60*time.Second)
	time.Sleep(2 * time.Second) // anything the page was made to load or run has by now

	if got := e.Text(`Array.from(document.querySelectorAll("#result img.picture")).map(i => i.naturalWidth + "x" + i.naturalHeight).join(" ")`); got != fmt.Sprintf("%[1]dx%[2]d 64x48 %[1]dx%[2]d", outputtest.ChartWidth, outputtest.ChartHeight) {
		t.Errorf("pictures drawn %s; want the chart, the JPEG and the chart file", got)
	}
	if got := e.Text(`String(window["` + outputtest.Marker + `"])`); got != "undefined" {
		t.Errorf("an output's script ran in the inbox's page: window.%s = %s", outputtest.Marker, got)
	}
	if got := e.Text(`document.title`); strings.Contains(got, "pwned") {
		t.Errorf("an output's script set the page's title: %q", got)
	}
	if n := e.Text(`String(document.querySelectorAll("#result svg, #result iframe, #result object, #result embed, #result script, #result image").length)`); n != "0" {
		t.Errorf("the result holds %s elements an output's markup made", n)
	}
	if got := counter.take(); len(got) != 0 {
		t.Errorf("the hostile outputs loaded from the test's listener: %v", got)
	}
	text := e.Text(`document.getElementById("result").innerText`)
	for _, want := range []string{"SVG, ", "not drawn (markup is never drawn here)", "HTML, ", "past the 40 megapixels the inbox draws",
		"left out, over the run's output limits", "</pre><script>window." + outputtest.Marker, "<b>col</b>", outputtest.TextMark + ` red \u001b[31mX`} {
		if !strings.Contains(text, want) {
			t.Errorf("the result lacks %q", want)
		}
	}
	checkDownloadsInBrowser(t, e)
	e.Do(chromedp.Evaluate[chromedp.Void](`document.getElementById("result").scrollIntoView()`))
	shot, err := chromedp.Run(e.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "inbox-outputs.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	e.Screenshot("inbox-outputs.png")
}

// checkDownloadsInBrowser reads the result's downloads from the page, as the browser gets them:
// SVG, HTML and the .png that holds HTML as attachments of application/octet-stream that run
// nothing, refused as pictures; the chart as a picture.
func checkDownloadsInBrowser(t *testing.T, e *env) {
	t.Helper()
	for what, want := range map[string]string{
		"output-0?inline=1": "200 image/png inline; filename=\"output-1.png\"",
		"output-2":          "200 application/octet-stream attachment; filename=\"output-2.svg\"",
		"output-2?inline=1": "415",
		"output-3":          "200 application/octet-stream attachment; filename=\"output-3.html\"",
		"output-4?inline=1": "415",
		"file-1":            "200 application/octet-stream attachment; filename=\"evil.png\"",
		"file-1?inline=1":   "415",
	} {
		got := e.Text(`(() => { const x = new XMLHttpRequest(); x.open("GET", "/run/inbox-outputs/download/` + what + `", false); x.send();
			if (x.status !== 200) return String(x.status);
			const csp = x.getResponseHeader("Content-Security-Policy"), nosniff = x.getResponseHeader("X-Content-Type-Options");
			if (!csp.includes("sandbox") || !csp.includes("default-src 'none'") || nosniff !== "nosniff") return "no CSP sandbox or nosniff: " + csp + " " + nosniff;
			return x.status + " " + x.getResponseHeader("Content-Type") + " " + x.getResponseHeader("Content-Disposition"); })()`)
		if !strings.HasPrefix(got, want) {
			t.Errorf("download %s: %s; want %s…", what, got, want)
		}
	}
}
