//go:build integration

package notify_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/quotedprintable"
	netmail "net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/notify"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// The worker process of TestIntegrationWebhookAfterWorkerKilled reads its settings from these.
const (
	envWorker        = "NOTIFY_TEST_WORKER"
	envWorkerAddress = "NOTIFY_TEST_ADDRESS"
	envWorkerNS      = "NOTIFY_TEST_NAMESPACE"
	envWorkerQueue   = "NOTIFY_TEST_QUEUE"
	envWorkerRevs    = "NOTIFY_TEST_REVIEWERS"
	envWorkerHook    = "NOTIFY_TEST_WEBHOOK"
	envWorkerSecret  = "NOTIFY_TEST_SECRET_FILE"
)

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) == "1" {
		runWorkerProcess()
		return
	}
	os.Exit(m.Run())
}

// fastRetries are the notify options the tests record: a lost worker is noticed within 2 s and
// a failed attempt retried within a second.
var fastRetries = contract.NotifyOptions{
	StartToCloseTimeout: 20 * time.Second, HeartbeatTimeout: 2 * time.Second,
	InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Second, MaximumAttempts: 10,
}

// testSecret is the webhook secret of every test, as the verifier takes it too.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func secretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "webhook-secret")
	if err := os.WriteFile(p, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func webhook(t *testing.T, url, secretPath string) notify.Channel {
	t.Helper()
	key, err := notify.LoadSecret(secretPath)
	if err != nil {
		t.Fatal(err)
	}
	return notify.NewWebhook(url, key)
}

// env starts a server (or uses ts) and a worker whose runs notify on channels.
func env(t *testing.T, cfg notify.Config, ts *agenttest.Options) *agenttest.Env {
	t.Helper()
	na, err := notify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := agenttest.Options{NoStarter: true}
	if ts != nil {
		o = *ts
	}
	o.Notify = &fastRetries
	o.Register = func(r worker.Registry) { na.Register(r) }
	return agenttest.Setup(t, o)
}

// markerCode prints a word no notification may carry.
const markerCode = "print('CODE-MARKER-7f3a')\n"

func start(t *testing.T, c *client.Client, id string, req guard.Request) client.Started {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Start(ctx, req, client.StartOptions{WorkflowID: id})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	return s
}

func waitStatus(t *testing.T, c *client.Client, id, what string, ok func(contract.Status) bool) contract.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := c.Status(ctx, id)
		cancel()
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s within 30 s (last status %+v, error %v)", id, what, st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func approveAndResult(t *testing.T, c *client.Client, signer *reviewertest.Reviewer, s client.Started) guard.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Approve(ctx, client.Run(s.WorkflowID), s.Digest, signer.Signer, ""); err != nil {
		t.Fatalf("approve %s: %v", s.WorkflowID, err)
	}
	res, err := c.Result(ctx, s.WorkflowID)
	if err != nil {
		t.Fatalf("result of %s: %v", s.WorkflowID, err)
	}
	return res
}

// verdict is what the standardwebhooks npm package says of one delivery.
type verdict struct {
	ID         string `json:"id"`
	OK         bool   `json:"ok"`
	Type       string `json:"type"`
	WorkflowID string `json:"workflow_id"`
	Error      string `json:"error"`
}

var installed struct {
	once sync.Once
	err  error
}

// verify has the Standard Webhooks reference library (npm standardwebhooks, installed into
// testdata/verifier) verify each delivery with testSecret.
func verify(t *testing.T, ds []delivery) []verdict {
	t.Helper()
	need.Need(t, need.Node)
	installed.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = "testdata/verifier"
		if out, err := cmd.CombinedOutput(); err != nil {
			installed.err = fmt.Errorf("npm ci: %v\n%s", err, out)
		}
	})
	if installed.err != nil {
		t.Fatal(installed.err)
	}
	in, err := json.Marshal(map[string]any{"secret": testSecret, "deliveries": ds})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "verify.mjs")
	cmd.Dir = "testdata/verifier"
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node verify.mjs: %v", err)
	}
	var vs []verdict
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var v verdict
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("verifier line %q: %v", l, err)
		}
		vs = append(vs, v)
	}
	if len(vs) != len(ds) {
		t.Fatalf("the verifier judged %d deliveries; want %d", len(vs), len(ds))
	}
	return vs
}

// Three waiting runs: three deliveries, one each, with three ids, each signed so that the
// reference verifier accepts it; none carries the code or an env value. A forged one (the body
// changed after signing) is refused by the same verifier, so the check can fail.
func TestIntegrationWebhookSignedPerWaitingRun(t *testing.T) {
	rcv := startReceiver(t, func(int) int { return 204 })
	e := env(t, notify.Config{Channels: []notify.Channel{webhook(t, rcv.URL, secretFile(t))}, InboxURL: "http://localhost:8235"}, nil)
	ids := []string{"notify-a", "notify-b", "notify-c"}
	for _, id := range ids {
		start(t, e.Client, id, guard.Request{Code: markerCode, Settings: guard.Settings{
			Env:      map[string]string{"TOKEN": "ENV-VALUE-MARKER"},
			Metadata: guard.Metadata{RequestedBy: "agent-7"},
		}})
	}
	var got []delivery
	for range ids {
		got = append(got, rcv.wait(t, 30*time.Second))
	}
	rcv.quiet(t, 2*time.Second)

	forged := got[0]
	forged.Body = strings.Replace(forged.Body, "agent-7", "alice", 1)
	vs := verify(t, append(slices.Clone(got), forged))
	seen := map[string]string{}
	for i, v := range vs[:len(got)] {
		if !v.OK || v.Type != contract.EventRunAwaiting {
			t.Errorf("delivery %d: verifier says %+v; want a verified %s", i, v, contract.EventRunAwaiting)
		}
		if prev, dup := seen[v.ID]; dup {
			t.Errorf("webhook-id %s used for %s and %s", v.ID, prev, v.WorkflowID)
		}
		seen[v.ID] = v.WorkflowID
		for _, no := range []string{"CODE-MARKER", "ENV-VALUE-MARKER"} {
			if strings.Contains(got[i].Body, no) {
				t.Errorf("delivery %d carries %s: %s", i, no, got[i].Body)
			}
		}
		for _, want := range []string{`"requested_by":"agent-7"`, `"inbox_url":"http://localhost:8235/run/` + v.WorkflowID + `"`, fmt.Sprintf(`"code_bytes":%d`, len(markerCode))} {
			if !strings.Contains(got[i].Body, want) {
				t.Errorf("delivery %d lacks %s: %s", i, want, got[i].Body)
			}
		}
	}
	if v := vs[len(got)]; v.OK {
		t.Errorf("the verifier accepted a body changed after signing: %+v", v)
	}
	if ws := slices.Sorted(func(yield func(string) bool) {
		for _, w := range seen {
			if !yield(w) {
				return
			}
		}
	}); !slices.Equal(ws, ids) {
		t.Errorf("notified runs %v; want %v", ws, ids)
	}
	for _, id := range ids {
		st := waitStatus(t, e.Client, id, "notified", func(st contract.Status) bool {
			return st.Notification != nil && st.Notification.State == contract.NotifyDelivered
		})
		if st.State != contract.StatusAwaitingApproval || !slices.Equal(st.Notification.Delivered, []string{notify.KindWebhook}) {
			t.Errorf("%s: status %s, notification %+v; want awaiting_approval, delivered by webhook", id, st.State, st.Notification)
		}
	}
}

// A worker SIGKILLed while its delivery hangs: another worker delivers the same notification,
// with the same webhook-id, and the reference verifier accepts both deliveries.
func TestIntegrationWebhookAfterWorkerKilled(t *testing.T) {
	rcv := startReceiver(t, func(n int) int {
		if n == 1 {
			return 0 // hang: the worker dies while it waits for the answer
		}
		return 200
	})
	secret := secretFile(t)
	ts := devtest.Start(t)
	reviewer := reviewertest.New(t, "notify-reviewer")
	queue := "notify-killed"

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"=1", envWorkerAddress+"="+ts.GetFrontendHostPort(), envWorkerNS+"="+ts.GetDefaultNamespace(),
		envWorkerQueue+"="+queue, envWorkerRevs+"="+reviewer.File, envWorkerHook+"="+rcv.URL, envWorkerSecret+"="+secret)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	ready := make(chan struct{})
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if s.Text() == "ready" {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker process is not ready after 30 s")
	}

	tc := ts.GetDefaultClient()
	c, err := client.New(client.Options{Temporal: tc, TaskQueue: queue, Reviewer: reviewer.Principal})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, c, "notify-killed", guard.Request{Code: "print('after the crash')"})
	first := rcv.wait(t, 30*time.Second)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()

	// A fresh worker, in this process, with the same settings.
	startWorker(t, tc, queue, reviewer.File, rcv.URL, secret)
	second := rcv.wait(t, 30*time.Second)
	if first.Headers["webhook-id"] == "" || second.Headers["webhook-id"] != first.Headers["webhook-id"] {
		t.Errorf("webhook-id before the crash %q, after %q; want one id", first.Headers["webhook-id"], second.Headers["webhook-id"])
	}
	for i, v := range verify(t, []delivery{first, second}) {
		if !v.OK || v.WorkflowID != s.WorkflowID {
			t.Errorf("delivery %d: verifier says %+v", i, v)
		}
	}
	waitStatus(t, c, s.WorkflowID, "notified", func(st contract.Status) bool {
		return st.Notification != nil && st.Notification.State == contract.NotifyDelivered && st.State == contract.StatusAwaitingApproval
	})
	rcv.quiet(t, time.Second)
	if res := approveAndResult(t, c, reviewer, s); !res.OK || string(res.Stdout) != "after the crash\n" {
		t.Errorf("result %+v; want the code's output", res)
	}
}

// startWorker runs, in this process, the worker the killed test runs in a child: the local
// backend, and a webhook channel.
func startWorker(t interface {
	Fatal(...any)
	Cleanup(func())
}, tc tclient.Client, queue, reviewers, hook, secret string) {
	w, err := newWorker(tc, queue, reviewers, hook, secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

func newWorker(tc tclient.Client, queue, reviewers, hook, secret string) (worker.Worker, error) {
	py, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return nil, fmt.Errorf("python3: %w", err)
	}
	b, err := local.New(local.Config{AllowUnsafeLocal: true, Python: strings.TrimSpace(string(py))})
	if err != nil {
		return nil, err
	}
	acts, err := activities.New(activities.Config{Policy: guard.Policy{Languages: []string{guard.Python}, ApprovalTimeout: time.Hour},
		Backend: b, ReviewersFile: reviewers, Sink: &activities.MemorySink{}, Notify: &fastRetries})
	if err != nil {
		return nil, err
	}
	key, err := notify.LoadSecret(secret)
	if err != nil {
		return nil, err
	}
	na, err := notify.New(notify.Config{Channels: []notify.Channel{notify.NewWebhook(hook, key)}})
	if err != nil {
		return nil, err
	}
	w := worker.New(tc, queue, worker.Options{})
	workflows.Register(w)
	acts.Register(w)
	na.Register(w)
	return w, nil
}

// runWorkerProcess is the child of TestIntegrationWebhookAfterWorkerKilled: a worker until it is
// killed.
func runWorkerProcess() {
	tc, err := tclient.Dial(tclient.Options{HostPort: os.Getenv(envWorkerAddress), Namespace: os.Getenv(envWorkerNS)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w, err := newWorker(tc, os.Getenv(envWorkerQueue), os.Getenv(envWorkerRevs), os.Getenv(envWorkerHook), os.Getenv(envWorkerSecret))
	if err == nil {
		err = w.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}

// Every channel failing (a receiver that answers 500, a Slack URL where nothing listens): the
// run waits all the same, its status says the notification failed after its attempts, nothing
// is decided, and an approval runs it.
func TestIntegrationFailingChannelsNeverDecide(t *testing.T) {
	rcv := startReceiver(t, func(int) int { return 500 })
	dead := startReceiver(t, func(int) int { return 200 })
	deadURL := dead.URL
	opts := fastRetries
	opts.MaximumAttempts = 3
	na, err := notify.New(notify.Config{Channels: []notify.Channel{webhook(t, rcv.URL, secretFile(t)), notify.NewSlack(strings.Replace(deadURL, "/hook", "/closed", 1))}})
	if err != nil {
		t.Fatal(err)
	}
	// The Slack receiver is gone before the run starts: its port refuses connections.
	dead.close()
	e := agenttest.Setup(t, agenttest.Options{NoStarter: true, Notify: &opts, Register: func(r worker.Registry) { na.Register(r) }})
	s := start(t, e.Client, "notify-failing", guard.Request{Code: "print('ran anyway')"})
	st := waitStatus(t, e.Client, s.WorkflowID, "notification failed", func(st contract.Status) bool {
		return st.Notification != nil && st.Notification.State == contract.NotifyFailed
	})
	if st.State != contract.StatusAwaitingApproval || st.Decision != nil {
		t.Fatalf("after the failed notification: state %s, decision %+v; want awaiting_approval, none", st.State, st.Decision)
	}
	if n := len(rcv.all()); n != 3 {
		t.Errorf("the failing receiver got %d attempts; want 3 (MaximumAttempts)", n)
	}
	for _, d := range rcv.all() {
		if d.Headers["webhook-id"] != rcv.all()[0].Headers["webhook-id"] {
			t.Errorf("retries carry ids %s and %s; want one", d.Headers["webhook-id"], rcv.all()[0].Headers["webhook-id"])
		}
	}
	time.Sleep(time.Second)
	if st, _ := e.Client.Status(context.Background(), s.WorkflowID); st.State != contract.StatusAwaitingApproval {
		t.Fatalf("state %s a second later; want still awaiting_approval", st.State)
	}
	if res := approveAndResult(t, e.Client, e.Reviewer, s); !res.OK || string(res.Stdout) != "ran anyway\n" {
		t.Errorf("result %+v; want the code's output", res)
	}
}

// An SMTP server on loopback (go-smtp) with STARTTLS and PLAIN: the email arrives inside TLS,
// authenticated, from and to the configured addresses, naming the run; by default without the
// code, and with --notify-include-code with the code escaped (a line that reads like a header
// stays a prefixed line of the body).
func TestIntegrationEmailOverStartTLS(t *testing.T) {
	cert, ca := selfSigned(t)
	srv := startSMTP(t, &cert, "sandboxflow", "s3cret")
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	channel := func() notify.Channel {
		e, err := notify.NewEmail(notify.EmailConfig{Addr: srv.Addr, From: "sandboxflow@example.com", To: []string{"reviewers@example.com"},
			Username: "sandboxflow", PasswordFile: pw, CAFile: ca})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	ts := devtest.Start(t)
	plain := env(t, notify.Config{Channels: []notify.Channel{channel()}}, &agenttest.Options{NoStarter: true, Server: ts, TaskQueue: "notify-email-plain"})
	withCode := env(t, notify.Config{Channels: []notify.Channel{channel()}, IncludeCode: true},
		&agenttest.Options{NoStarter: true, Server: ts, TaskQueue: "notify-email-code"})

	const hostileCode = "print('CODE-MARKER-7f3a')\nBcc: attacker@evil.example\n# \u202e reversed\n"
	for _, tc := range []struct {
		e        *agenttest.Env
		id       string
		withCode bool
	}{{plain, "notify-mail-plain", false}, {withCode, "notify-mail-code", true}} {
		start(t, tc.e.Client, tc.id, guard.Request{Code: hostileCode, Settings: guard.Settings{Egress: nil, Metadata: guard.Metadata{RequestedBy: "agent-9"}}})
		m := srv.wait(t, 30*time.Second)
		if !m.TLS || m.AuthUser != "sandboxflow" || m.From != "sandboxflow@example.com" || !slices.Equal(m.To, []string{"reviewers@example.com"}) {
			t.Errorf("%s: mail tls=%t auth=%q from=%q to=%v", tc.id, m.TLS, m.AuthUser, m.From, m.To)
		}
		msg, err := netmail.ReadMessage(bytes.NewReader(m.Data))
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.Header.Get("Subject"); !strings.HasPrefix(got, "sandboxflow: a run waits for approval (sha256:") || strings.Contains(got, tc.id) {
			t.Errorf("Subject %q", got)
		}
		if got := msg.Header.Get("Bcc"); got != "" {
			t.Errorf("a Bcc header: %q", got)
		}
		raw, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
		if err != nil {
			t.Fatal(err)
		}
		body := strings.ReplaceAll(string(raw), "\r\n", "\n")
		if !strings.Contains(body, "Requested by: agent-9") || !strings.Contains(body, "Run:          "+tc.id) {
			t.Errorf("%s: body does not name the run and who asked:\n%s", tc.id, body)
		}
		if got := strings.Contains(body, "CODE-MARKER"); got != tc.withCode {
			t.Errorf("%s: code in the email: %t; want %t\n%s", tc.id, got, tc.withCode, body)
		}
		if tc.withCode {
			for _, want := range []string{"| print('CODE-MARKER-7f3a')\n", "| Bcc: attacker@evil.example\n", `| # \u202e reversed`} {
				if !strings.Contains(body, want) {
					t.Errorf("the code is not escaped and prefixed (%q):\n%s", want, body)
				}
			}
			if strings.Contains(body, "\u202e") || strings.Contains(body, "\nBcc:") {
				t.Errorf("the code reached the body unescaped:\n%s", body)
			}
		}
	}
}

// A session's cells wait too: each cell's wait is notified once, as cell.awaiting_approval with
// its index and the session's inbox page, under an id of its own.
func TestIntegrationWebhookPerWaitingCell(t *testing.T) {
	rcv := startReceiver(t, func(int) int { return 200 })
	e := env(t, notify.Config{Channels: []notify.Channel{webhook(t, rcv.URL, secretFile(t))}, InboxURL: "https://inbox.example"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	s, err := e.Client.OpenSession(ctx, guard.SessionRequest{}, client.SessionOptions{WorkflowID: "notify-session"})
	if err != nil {
		t.Fatal(err)
	}
	var got []delivery
	for i, code := range []string{"x = 1\n", "print(x)\n"} {
		if _, err := e.Client.SubmitCell(ctx, s.WorkflowID, contract.CellRequest{Code: code}); err != nil {
			t.Fatal(err)
		}
		d := rcv.wait(t, 30*time.Second)
		got = append(got, d)
		for _, want := range []string{fmt.Sprintf(`"cell":%d`, i+1), `"inbox_url":"https://inbox.example/session/notify-session"`} {
			if !strings.Contains(d.Body, want) {
				t.Errorf("cell %d: delivery lacks %s: %s", i+1, want, d.Body)
			}
		}
		if _, err := e.Client.Approve(ctx, client.Cell(s.WorkflowID, i+1), "", e.Reviewer.Signer, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.AwaitCell(ctx, s.WorkflowID, i+1); err != nil {
			t.Fatal(err)
		}
	}
	rcv.quiet(t, time.Second)
	vs := verify(t, got)
	if !vs[0].OK || !vs[1].OK || vs[0].Type != contract.EventCellAwaiting || vs[0].ID == vs[1].ID {
		t.Errorf("verdicts %+v; want two verified cell notifications with two ids", vs)
	}
}

// A run in a conversation: its notification names the previous run, how it was decided (its
// signature verified against the worker's reviewers file) and what changed (names and counts),
// and carries no diff (it holds code) without IncludeCode.
func TestIntegrationWebhookShowsConversationChanges(t *testing.T) {
	rcv := startReceiver(t, func(int) int { return 200 })
	rev := reviewertest.New(t, "alice")
	e := env(t, notify.Config{Channels: []notify.Channel{webhook(t, rcv.URL, secretFile(t))},
		ReviewersFile: reviewertest.WriteAllowedSigners(t, t.TempDir(), rev)}, &agenttest.Options{NoStarter: true, Reviewer: rev})
	first := start(t, e.Client, "conv-n1", guard.Request{Code: "x = 1\nprint(x)\n", Conversation: "task-n"})
	rcv.wait(t, 30*time.Second)
	if res := approveAndResult(t, e.Client, e.Reviewer, first); !res.OK {
		t.Fatalf("first run: %+v", res)
	}
	// Visibility lists the first run a moment after it set its conversation.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := e.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: contract.AttrConversation + " = 'task-n'"})
		if err == nil && len(resp.GetExecutions()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("visibility does not list the first run of task-n: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	start(t, e.Client, "conv-n2", guard.Request{Code: "x = 2\nprint('SECOND-CODE-MARKER', x)\n", Conversation: "task-n"})
	d := rcv.wait(t, 30*time.Second)
	var body struct {
		Data struct {
			Conversation string         `json:"conversation"`
			Changes      notify.Changes `json:"changes"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(d.Body), &body); err != nil {
		t.Fatal(err)
	}
	ch := body.Data.Changes
	if body.Data.Conversation != "task-n" || ch.PreviousWorkflowID != "conv-n1" || ch.PreviousOutcome != "approved by "+e.Reviewer.Principal ||
		!slices.Equal(ch.ChangedFiles, []string{"code"}) || ch.Added != 2 || ch.Removed != 2 || ch.Notice != client.ConversationNotice {
		t.Errorf("the notification's changes: %+v (conversation %q)", ch, body.Data.Conversation)
	}
	if ch.Diff != "" || strings.Contains(d.Body, "SECOND-CODE-MARKER") || strings.Contains(d.Body, "x = 1") {
		t.Errorf("the notification carries code without IncludeCode: %s", d.Body)
	}
	if vs := verify(t, []delivery{d}); !vs[0].OK {
		t.Errorf("verifier: %+v", vs[0])
	}
}

// TestRecordNotifyHistory runs the story of the history workflows' TestReplayNotifyHistory
// replays (a run in a conversation, notified by webhook, approved and run) and checks that its
// history replays (historytest.Recorded; SANDBOXFLOW_RECORD_HISTORY=1 re-records
// ../workflows/testdata/runcode_notify.json).
func TestRecordNotifyHistory(t *testing.T) {
	rcv := startReceiver(t, func(int) int { return 200 })
	e := env(t, notify.Config{Channels: []notify.Channel{webhook(t, rcv.URL, secretFile(t))}}, nil)
	s := start(t, e.Client, "recorded-notify", guard.Request{Code: "print('notified')", Conversation: "recorded-task"})
	rcv.wait(t, 30*time.Second)
	waitStatus(t, e.Client, s.WorkflowID, "notified", func(st contract.Status) bool {
		return st.Notification != nil && st.Notification.State == contract.NotifyDelivered
	})
	if res := approveAndResult(t, e.Client, e.Reviewer, s); !res.OK {
		t.Fatalf("result %+v", res)
	}
	iter := e.Temporal.GetWorkflowHistory(context.Background(), s.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	r := worker.NewWorkflowReplayer()
	workflows.Register(r)
	historytest.Recorded(t, r, s.WorkflowID, events, filepath.Join("..", "workflows", "testdata", "runcode_notify.json"))
}

// The Slack body of a real run whose orchestrator chose hostile strings (a mention, a link, markup,
// a line break in its metadata; a file name with & and <): every one of them reaches Slack as
// plain_text or escaped, and the egress hosts and secret names are named.
func TestIntegrationSlackBodyEscapesTheRequest(t *testing.T) {
	rcv := startReceiver(t, func(int) int { return 200 })
	policy := guard.Policy{Languages: []string{guard.Python}, ApprovalTimeout: time.Hour,
		EgressAllow: []string{"*.example.com"}, SecretNames: []string{"github_token"}}
	e := env(t, notify.Config{Channels: []notify.Channel{notify.NewSlack(rcv.URL)}}, &agenttest.Options{NoStarter: true, Policy: &policy})
	start(t, e.Client, "notify-slack", guard.Request{Code: markerCode, Settings: guard.Settings{
		Egress:   []string{"api.example.com"},
		Secrets:  []string{"github_token"},
		Files:    map[string][]byte{"a&b<c>.txt": []byte("x")},
		Metadata: guard.Metadata{RequestedBy: "<!channel> <https://evil.example|approve now> *urgent*\nApproved by alice"},
	}})
	d := rcv.wait(t, 30*time.Second)
	var body struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type   string `json:"type"`
			Text   *struct{ Type, Text string }
			Fields []struct{ Type, Text string }
		} `json:"blocks"`
	}
	if err := json.Unmarshal([]byte(d.Body), &body); err != nil {
		t.Fatal(err)
	}
	var plain []string
	for _, b := range body.Blocks {
		texts := b.Fields
		if b.Text != nil {
			texts = append(texts, *b.Text)
		}
		for _, x := range texts {
			if x.Type == "mrkdwn" {
				t.Errorf("a mrkdwn block without an inbox link: %q", x.Text)
			}
			plain = append(plain, x.Text)
		}
	}
	all := strings.Join(plain, "\n")
	for _, want := range []string{`Requested by: <!channel> <https://evil.example|approve now> *urgent*\nApproved by alice`,
		"Egress: api.example.com", "Secrets: github_token", "Input files: a&b<c>.txt (1 bytes)", "Run: notify-slack"} {
		if !strings.Contains(all, want) {
			t.Errorf("the plain_text blocks lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(body.Text, "<") || strings.Contains(body.Text, "\n") || strings.Contains(d.Body, "CODE-MARKER") {
		t.Errorf("fallback text %q (or the body holds the code): %s", body.Text, d.Body)
	}
}
