//go:build integration

package e2e

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandboxflow/sandboxflow/internal/testkit/browsertest"
)

// TestBrowserWebUIDecodesThroughTheCodecServer follows docs/operating.md in a real browser: with a key
// file, worker --dev serves the Web UI and a codec server; the UI shows a run's code in the clear
// only once this browser has signed in at the codec server's /login with its token. Before that,
// and after a sign-in with a wrong token, the page shows nothing of the code.
func TestBrowserWebUIDecodesThroughTheCodecServer(t *testing.T) {
	browsertest.Chromium(t)
	workerBin, starterBin := binaries(t)
	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	uiPort, codecPort := freePort(t), freePort(t)
	keys := writeKeys(t, keyLine(t, "ui"))
	const token = "ui-test-token-0123456789abcdef"
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_TASK_QUEUE=ui", "SANDBOXFLOW_KEY_FILE=" + keys,
		"SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")}
	// The token travels in the worker's environment: on its command line the code could read it.
	startDevWorker(t, workerBin, append(env, "SANDBOXFLOW_CODEC_TOKEN="+token), "--data-dir", data, "--ui-port", strconv.Itoa(uiPort),
		"--backend", "local", "--allow-unsafe-local", "--codec-port", strconv.Itoa(codecPort))
	s := starterCLI{t: t, bin: starterBin, env: env}

	const secret = "UI_CODEC_SECRET_4b1d"
	var st startedJSON
	s.mustJSON(&st, "run", "--code", "print('"+secret+"')")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := browsertest.Start(t, ctx)
	ui := "http://127.0.0.1:" + strconv.Itoa(uiPort)
	page := ui + "/namespaces/default/workflows/" + st.WorkflowID + "/" + st.RunID + "/history"
	codec := "http://127.0.0.1:" + strconv.Itoa(codecPort)
	shown := `document.body.innerText.includes("` + secret + `")`
	// loaded: the run's page has rendered its start event's input, decoded or not.
	loaded := `document.body.innerText.includes("` + st.WorkflowID + `") && document.body.innerText.includes("Input")`

	signIn := func(tok, answer string) {
		t.Helper()
		b.Do(chromedp.Navigate(codec + "/login"))
		b.WaitFor("the codec server's sign-in form", `!!document.querySelector('input[name="token"]')`, 20*time.Second)
		b.Do(chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), tok), chromedp.Submit(chromedp.CSS(`input[name="token"]`)))
		b.WaitFor("the sign-in's answer", `document.readyState === "complete" && document.body.innerText.includes("`+answer+`")`, 20*time.Second)
	}
	notShown := func(when string) {
		t.Helper()
		b.Do(chromedp.Navigate(page))
		b.WaitFor("the run's page", loaded, 60*time.Second)
		// The UI called the codec server and was refused (the session is missing or wrong).
		b.WaitFor("the UI's codec error", `document.body.innerText.includes("Codec Server could not connect")`, 30*time.Second)
		b.Screenshot("webui-encoded.png")
		if b.Text(`String(`+shown+`)`) == "true" {
			t.Errorf("%s, the Web UI shows the code in the clear", when)
		}
	}

	notShown("before the browser signed in at the codec server")
	signIn("wrong-token-0123456789abcdef", "Wrong token")
	notShown("after a sign-in with a wrong token")

	signIn(token, "Signed in")
	b.Do(chromedp.Navigate(page))
	b.WaitFor("the code, decoded through the codec server", shown, 60*time.Second)
	b.Screenshot("webui-decoded.png")
}
