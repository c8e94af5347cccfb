//go:build integration

// Package browsertest drives Debian's chromium, headless, over the DevTools protocol (chromedp)
// for the tests that need a real browser: the reviewers' inbox, and the Temporal Web UI decoding
// payloads through the codec server.
package browsertest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// EnvScreenshots names a folder; when set, Screenshot writes its pictures there.
const EnvScreenshots = "SANDBOXFLOW_SCREENSHOTS"

// Chromium returns the browser's path; need.Chromium decides whether its absence skips the test
// or fails it (under make test, or SANDBOXFLOW_REQUIRE_BROWSER=1).
func Chromium(t *testing.T) string {
	t.Helper()
	need.Need(t, need.Chromium)
	return need.ChromiumPath()
}

// Browser is one headless chromium with a fresh profile, ended with the test.
type Browser struct {
	t *testing.T
	// Ctx is the browser tab's context, for chromedp calls of the test's own.
	Ctx context.Context
}

// Start starts chromium on about:blank; ctx bounds its whole life.
func Start(t *testing.T, ctx context.Context) *Browser {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(Chromium(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter"),
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800))
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	b := &Browser{t: t, Ctx: bctx}
	b.Do(chromedp.Navigate("about:blank"), chromedp.EmulateViewport(1280, 800))
	return b
}

// Do runs steps and fails the test on an error.
func (b *Browser) Do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// Navigate loads url, again when the page it leaves aborts the load with a navigation of its own
// (a reload it had scheduled: net::ERR_ABORTED), at most three times.
func (b *Browser) Navigate(url string) {
	b.t.Helper()
	var err error
	for range 3 {
		if err = chromedp.Do(b.Ctx, chromedp.Navigate(url)); err == nil || !strings.Contains(err.Error(), "ERR_ABORTED") {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		b.t.Fatalf("browser: navigate to %s: %v", url, err)
	}
}

// WaitFor waits until the JavaScript expression expr is true; after timeout it fails the test
// with what the page reads.
func (b *Browser) WaitFor(what, expr string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			html, _ := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
			b.t.Fatalf("waiting for %s: %v; the page reads:\n%s", what, err, html)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Text evaluates expr, a JavaScript expression whose value is a string.
func (b *Browser) Text(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", expr, err)
	}
	return s
}

// Screenshot writes the page as name in the folder EnvScreenshots names, if it is set.
func (b *Browser) Screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
