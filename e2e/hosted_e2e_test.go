//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/sandboxflow/sandboxflow/backends/e2b"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/internal/testkit/e2bfake"
	"github.com/sandboxflow/sandboxflow/internal/testkit/httpfake"
)

// approveRun approves a run through `starter approve`, as a reviewer would. It is the only place
// the hosted-backend tests approve, so a change in how decisions are made (signed approvals)
// is made here once.
func approveRun(t *testing.T, s starterCLI, run startedJSON) {
	t.Helper()
	var decided struct {
		State string `json:"state"`
	}
	s.mustJSON(&decided, "approve", run.WorkflowID, "--digest", run.Digest) // signed with the dev key
	if decided.State != "running" {
		t.Fatalf("approve %s printed state %q; want running", run.WorkflowID, decided.State)
	}
}

// devReviewerKeyEnv points the starter at the development reviewer key that worker --dev made
// in data.
func devReviewerKeyEnv(data string) string {
	return "SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")
}

// hostedOutcome is what `starter result` printed for one approved run: a result, or an error.
type hostedOutcome struct {
	run   startedJSON
	res   resultJSON
	files map[string]string
	err   struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	exit   int
	stdout string
}

// runApproved starts a run with the starter ARGS, waits until it awaits approval, approves it and
// reads its result.
func runApproved(t *testing.T, s starterCLI, args ...string) hostedOutcome {
	t.Helper()
	var o hostedOutcome
	s.mustJSON(&o.run, append([]string{"run"}, args...)...)
	waitPending(t, s, o.run.WorkflowID)
	approveRun(t, s, o.run)
	o.stdout, o.exit = s.run("result", o.run.WorkflowID)
	if o.exit != 0 {
		var e struct {
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(o.stdout), &e); err != nil || json.Unmarshal(e.Error, &o.err) != nil {
			t.Fatalf("result of %s exited %d and printed %q", o.run.WorkflowID, o.exit, o.stdout)
		}
		return o
	}
	var withContent struct {
		Files []struct {
			Name    string `json:"name"`
			Content []byte `json:"content"`
		} `json:"files"`
	}
	if json.Unmarshal([]byte(o.stdout), &o.res) != nil || json.Unmarshal([]byte(o.stdout), &withContent) != nil {
		t.Fatalf("result of %s printed %q", o.run.WorkflowID, o.stdout)
	}
	o.files = map[string]string{}
	for _, f := range withContent.Files {
		o.files[f.Name] = string(f.Content)
	}
	return o
}

// historyEvents returns a run's history events, read through the Temporal client.
func historyEvents(t *testing.T, addr, workflowID string) []*historypb.HistoryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tc, err := client.Dial(ctx, client.Connection{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var events []*historypb.HistoryEvent
	iter := tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	return events
}

// countEvents counts the events of type typ.
func countEvents(events []*historypb.HistoryEvent, typ enumspb.EventType) int {
	n := 0
	for _, ev := range events {
		if ev.GetEventType() == typ {
			n++
		}
	}
	return n
}

// retryTimers returns the durations of the timers a history started that are shorter than a
// minute: the workflow's waits between sandbox attempts (the approval timer is far longer).
func retryTimers(events []*historypb.HistoryEvent) []time.Duration {
	var out []time.Duration
	for _, ev := range events {
		if a := ev.GetTimerStartedEventAttributes(); a != nil {
			if d := a.GetStartToFireTimeout().AsDuration(); d < time.Minute {
				out = append(out, d)
			}
		}
	}
	return out
}

// secretFree fails t if any of the texts holds secret.
func secretFree(t *testing.T, secret string, texts map[string][]byte) {
	t.Helper()
	for name, text := range texts {
		if bytes.Contains(text, []byte(secret)) {
			t.Errorf("%s holds the secret", name)
		}
	}
}

func randomSecret(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// runDoctor runs `worker doctor ARGS` and returns its output and exit code.
func runDoctor(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"doctor"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// sandboxOf returns the fake's id of the first sandbox created for a workflow. The fake names
// sandboxes by the count of create requests, rate-limited ones included.
func sandboxOf(rec e2bfake.Record, workflowID string) (id string, creates int) {
	for i, c := range rec.Creates {
		if c.Metadata[e2b.MetaWorkflowID] == workflowID {
			if id == "" {
				id = fmt.Sprintf("ifake%04d", i+1)
			}
			creates++
		}
	}
	return id, creates
}

// TestHostedE2BEndToEnd runs `worker --dev --backend e2b` against the fake E2B with the key in
// E2B_API_KEY and drives it with the starter: an approved run returns output and a produced
// file with network off as the fake received it; a timeout kills the sandbox; a 429 before the
// start is retried after its Retry-After; a stream cut after the start is "outcome unknown" and
// never retried; doctor passes; the key is in no log line, no starter output and no history.
func TestHostedE2BEndToEnd(t *testing.T) {
	workerBin, starterBin := binaries(t)
	key := randomSecret(t, "e2b_")
	fake := e2bfake.Start(t, key)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=hosted-e2b",
		e2b.EnvAPIURL + "=" + fake.APIURL(), e2b.EnvSandboxURL + "=" + fake.SandboxURL()}
	workerEnv := append(slices.Clone(env), e2b.EnvAPIKey+"="+key)
	data := t.TempDir()
	w := startDevWorker(t, workerBin, workerEnv, "--data-dir", data, "--ui-port", "-1", "--backend", "e2b", "--languages", "python,sh")
	s := starterCLI{t: t, bin: starterBin, env: append(env, devReviewerKeyEnv(data))}
	texts := map[string][]byte{}
	var runs []string

	input := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(input, []byte("forty-two"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := runApproved(t, s, "--code", "print('hello from e2b', open('in.txt').read())\nopen('out.txt', 'w').write('made')\n",
		"--input", "in.txt="+input)
	runs = append(runs, ok.run.WorkflowID)
	texts["result of the first run"] = []byte(ok.stdout)
	if !ok.res.OK || ok.res.Stdout != "hello from e2b forty-two\n" || ok.res.Backend != "e2b" || ok.files["out.txt"] != "made" || len(ok.files) != 1 {
		t.Fatalf("approved run: %s", ok.stdout)
	}
	rec := fake.Record()
	id, creates := sandboxOf(rec, ok.run.WorkflowID)
	if creates != 1 {
		t.Fatalf("the fake saw %d creates for the run; want 1", creates)
	}
	c := rec.Creates[0]
	if c.AllowInternetAccess == nil || *c.AllowInternetAccess || c.Network == nil || !slices.Equal(c.Network.DenyOut, []string{"0.0.0.0/0"}) ||
		len(c.Network.AllowOut) != 0 || !c.Secure || c.Metadata[e2b.MetaDigest] != ok.run.Digest {
		t.Errorf("create request: %+v (network %+v); want internet access off, all egress denied, secure, the digest in the metadata", c, c.Network)
	}
	if !slices.Contains(rec.Kills, id) || rec.Live != 0 || rec.EnvdRequestsWithKey != 0 {
		t.Errorf("after the run: kills %v (want %s), live %d, envd requests with the key %d", rec.Kills, id, rec.Live, rec.EnvdRequestsWithKey)
	}

	// A timeout is a result, and the sandbox is killed.
	slow := runApproved(t, s, "--code", "import time\nprint('before', flush=True)\ntime.sleep(60)\n", "--timeout", "2s")
	runs = append(runs, slow.run.WorkflowID)
	if slow.exit != 0 || !slow.res.TimedOut || slow.res.ExitCode != -1 || !strings.Contains(slow.res.Stdout, "before") {
		t.Fatalf("timed-out run: %s", slow.stdout)
	}
	rec = fake.Record()
	if id, _ := sandboxOf(rec, slow.run.WorkflowID); !slices.Contains(rec.Kills, id) || rec.Live != 0 {
		t.Errorf("timed-out run: the fake saw kills %v, %d live; want %s killed", rec.Kills, rec.Live, id)
	}

	// A 429 before the start: the workflow retries after at least the Retry-After (3 s, over the
	// default 2 s backoff) and the code runs once.
	startsBefore := fake.Record().Starts
	fake.SetFaults(e2bfake.Faults{RateLimit: 1, RetryAfter: "3"})
	limited := runApproved(t, s, "--code", "print('after the rate limit')")
	runs = append(runs, limited.run.WorkflowID)
	fake.SetFaults(e2bfake.Faults{})
	if !limited.res.OK || limited.res.Stdout != "after the rate limit\n" {
		t.Fatalf("rate-limited run: %s", limited.stdout)
	}
	rec = fake.Record()
	if _, creates := sandboxOf(rec, limited.run.WorkflowID); creates != 2 || rec.Starts-startsBefore != 1 {
		t.Errorf("rate-limited run: %d creates, %d starts; want 2 creates (429, then created) and 1 start", creates, rec.Starts-startsBefore)
	}
	events := historyEvents(t, addr, limited.run.WorkflowID)
	if n := countEvents(events, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED); n != 2 {
		t.Errorf("rate-limited run: %d sandbox activities scheduled; want 2", n)
	}
	if timers := retryTimers(events); len(timers) != 1 || timers[0] < 3*time.Second {
		t.Errorf("rate-limited run: retry timers %v; want one of at least the Retry-After, 3s", timers)
	}

	// The stream cut after the start (and the kill failing): outcome unknown, never retried.
	startsBefore = fake.Record().Starts
	fake.SetFaults(e2bfake.Faults{CutStream: true, FailKill: true})
	cut := runApproved(t, s, "--code", "import time\nprint('started', flush=True)\ntime.sleep(1)\nprint('end')\n")
	runs = append(runs, cut.run.WorkflowID)
	fake.SetFaults(e2bfake.Faults{})
	texts["error of the cut run"] = []byte(cut.stdout)
	if cut.exit != 1 || cut.err.Type != "IntegrationError" || !strings.Contains(cut.err.Message, "outcome unknown") {
		t.Fatalf("cut stream: exit %d, %s; want an IntegrationError, outcome unknown", cut.exit, cut.stdout)
	}
	events = historyEvents(t, addr, cut.run.WorkflowID)
	if n := countEvents(events, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED); n != 1 || fake.Record().Starts-startsBefore != 1 {
		t.Errorf("cut stream: %d activities scheduled, %d starts; want 1 and 1 (never retried)", n, fake.Record().Starts-startsBefore)
	}
	cutID, _ := sandboxOf(fake.Record(), cut.run.WorkflowID)
	if !strings.Contains(w.output(), "kill sandbox failed") || !strings.Contains(w.output(), cutID) {
		t.Errorf("the failed kill of %s was not logged with its id:\n%s", cutID, w.output())
	}

	out, code := runDoctor(t, workerBin, workerEnv, "--backend", "e2b")
	texts["doctor output"] = []byte(out)
	for _, want := range []string{"PASS e2b config", "PASS e2b API reachable", "PASS e2b probe run", "PASS temporal"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor (exit %d) printed no %q:\n%s", code, want, out)
		}
	}
	bad, _ := runDoctor(t, workerBin, append(slices.Clone(env), e2b.EnvAPIKey+"=wrong"+key), "--backend", "e2b")
	texts["doctor output with a wrong key"] = []byte(bad)
	if !strings.Contains(bad, "FAIL e2b API reachable") || !strings.Contains(bad, "refused the API key") {
		t.Errorf("doctor with a wrong key:\n%s", bad)
	}

	if schema, _ := s.run("tool-schema", "--format", "openai", "--backend", "e2b"); !strings.Contains(schema, "E2B cloud sandbox") {
		t.Errorf("tool-schema --backend e2b does not say where the code runs:\n%s", schema)
	}

	texts["worker log"] = []byte(w.output())
	for _, id := range runs {
		texts["history of "+id] = rawHistory(t, addr, id)
	}
	secretFree(t, key, texts)
}

// TestHostedHTTPEndToEnd runs `worker --dev --backend http` against a fake code-execution service
// that requires a token header from --http-header-file: an approved run returns output and a
// produced file, the service received the header and network off, doctor passes, and the
// header's value is in no log line, no starter output and no history.
func TestHostedHTTPEndToEnd(t *testing.T) {
	workerBin, starterBin := binaries(t)
	token := randomSecret(t, "tok_")
	hdr := http.Header{"Authorization": {"Bearer " + token}}
	svc := httpfake.Start(t, hdr)
	headerFile := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(headerFile, []byte("# the service's token\nAuthorization: Bearer "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=hosted-http"}
	backendArgs := []string{"--backend", "http", "--http-url", svc.URL, "--http-header-file", headerFile}
	data := t.TempDir()
	w := startDevWorker(t, workerBin, env, append([]string{"--data-dir", data, "--ui-port", "-1"}, backendArgs...)...)
	s := starterCLI{t: t, bin: starterBin, env: append(env, devReviewerKeyEnv(data))}

	ok := runApproved(t, s, "--code", "print('hello over http')\nopen('out.txt', 'w').write('made')\n")
	if !ok.res.OK || ok.res.Stdout != "hello over http\n" || ok.res.Backend != "http" || ok.files["out.txt"] != "made" || len(ok.files) != 1 {
		t.Fatalf("approved run: %s", ok.stdout)
	}
	last := svc.Last()
	if svc.Runs() != 1 || last == nil || last.Network || last.Digest != ok.run.Digest {
		t.Fatalf("the service ran %d requests, last %+v; want 1, network off, the run's digest", svc.Runs(), last)
	}

	out, code := runDoctor(t, workerBin, env, backendArgs...)
	for _, want := range []string{"PASS http config", "PASS http service reachable", "PASS http probe run", "PASS temporal"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor (exit %d) printed no %q:\n%s", code, want, out)
		}
	}
	if svc.Runs() != 2 {
		t.Errorf("the service ran %d requests after the doctor's probe; want 2 (the header reached it each time)", svc.Runs())
	}

	if schema, _ := s.run("tool-schema", "--format", "anthropic", "--backend", "http"); !strings.Contains(schema, "code-execution service") {
		t.Errorf("tool-schema --backend http does not say where the code runs:\n%s", schema)
	}

	secretFree(t, token, map[string][]byte{
		"worker log":    []byte(w.output()),
		"result":        []byte(ok.stdout),
		"doctor output": []byte(out),
		"history":       rawHistory(t, addr, ok.run.WorkflowID),
	})
}
