//go:build integration

package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/notify"
)

// The worker's notification flags through the real binaries: worker --dev with
// --notify-webhook posts a signed notification when `starter run --conversation` starts a run,
// linking to the --dev inbox, and `starter show` names the conversation.
func TestNotifyThroughTheWorkerFlags(t *testing.T) {
	workerBin, starterBin := binaries(t)
	type got struct {
		header http.Header
		body   []byte
	}
	deliveries := make(chan got, 8)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		deliveries <- got{r.Header.Clone(), b}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	data := t.TempDir()
	secret := filepath.Join(data, "webhook-secret")
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	if err := os.WriteFile(secret, []byte(whsec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := notify.LoadSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	inboxPort := freePort(t)
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=e2e-notify", "USER=alice",
		"SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")}
	startDevWorker(t, workerBin, env, "--data-dir", data, "--ui-port", "-1", "--inbox-port", strconv.Itoa(inboxPort),
		"--backend", "local", "--allow-unsafe-local", "--task-queue", "e2e-notify",
		"--notify-webhook", "http://"+ln.Addr().String()+"/hook", "--notify-webhook-secret-file", secret)
	s := starterCLI{t: t, bin: starterBin, env: env}
	var started startedJSON
	s.mustJSON(&started, "run", "--code", "print('notified')", "--conversation", "e2e-task", "--requested-by", "ci-agent")

	var d got
	select {
	case d = <-deliveries:
	case <-time.After(45 * time.Second):
		t.Fatal("no notification within 45 s")
	}
	id, ts := d.header.Get(notify.HeaderID), d.header.Get(notify.HeaderTimestamp)
	if sig := d.header.Get(notify.HeaderSignature); id == "" || sig != notify.Sign(key, id, ts, d.body) {
		t.Errorf("signature %q over id %q, timestamp %q does not verify", sig, id, ts)
	}
	var body struct {
		Type string `json:"type"`
		Data struct {
			WorkflowID   string `json:"workflow_id"`
			RequestedBy  string `json:"requested_by"`
			Conversation string `json:"conversation"`
			InboxURL     string `json:"inbox_url"`
			Code         string `json:"code"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d.body, &body); err != nil {
		t.Fatal(err)
	}
	want := "http://localhost:" + strconv.Itoa(inboxPort) + "/run/" + started.WorkflowID
	if body.Type != "run.awaiting_approval" || body.Data.WorkflowID != started.WorkflowID || body.Data.RequestedBy != "ci-agent" ||
		body.Data.Conversation != "e2e-task" || body.Data.InboxURL != want || body.Data.Code != "" {
		t.Errorf("notification %s; want the run, ci-agent, e2e-task, %s, no code", d.body, want)
	}
	if out, code := s.run("show", started.WorkflowID); code != 0 || !strings.Contains(out, "conversation") || !strings.Contains(out, "e2e-task") {
		t.Errorf("starter show (exit %d) does not name the conversation:\n%s", code, out)
	}
}
