package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// The test activity environment's run, as the activity info names it.
const (
	testWorkflowID = "default-test-workflow-id"
	testRunID      = "default-test-run-id"
	testTaskQueue  = "default-test-taskqueue"
	testActivityID = "0"
)

// testReviewer is the key the tests' reviewers files list.
var testReviewer = sync.OnceValue(func() *reviewertest.Reviewer {
	r, err := reviewertest.NewKey("alice")
	if err != nil {
		panic(err)
	}
	return r
})

// reviewersFile writes an allowed_signers file that lists testReviewer.
func reviewersFile(t *testing.T) string {
	t.Helper()
	return reviewertest.WriteAllowedSigners(t, t.TempDir(), testReviewer())
}

// fields is the statement an approval of digest for the test environment's run signs.
func fields(digest string) approval.Fields {
	f := reviewertest.Fields(testWorkflowID, testRunID, digest, testTaskQueue, true)
	f.ApprovalID = approvalID
	return f
}

// approved is the run input of c with alice's approval signed over f.
func approved(t *testing.T, c guard.Checked, f approval.Fields) contract.RunInput {
	t.Helper()
	return contract.RunInput{Checked: c, Decision: testReviewer().Decision(t, f)}
}

// echoBackend is a hand-written backend that returns Result or Err and records what it ran.
type echoBackend struct {
	Result guard.Result
	Err    error
	ran    []guard.Checked
}

func (b *echoBackend) Name() string { return "echo" }

func (b *echoBackend) Run(_ context.Context, c guard.Checked) (guard.Result, error) {
	b.ran = append(b.ran, c)
	return b.Result, b.Err
}

func TestNewValidatesConfig(t *testing.T) {
	b := &echoBackend{}
	rf := reviewersFile(t)
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"backend only", Config{ReviewersFile: rf, Backend: b}, ""},
		{"name only", Config{ReviewersFile: rf, BackendName: "docker"}, ""},
		{"both agree", Config{ReviewersFile: rf, Backend: b, BackendName: "echo"}, ""},
		{"no backend", Config{ReviewersFile: rf}, "no backend"},
		{"no reviewers file", Config{Backend: b}, "no reviewers file"},
		{"names disagree", Config{ReviewersFile: rf, Backend: b, BackendName: "docker"}, "does not match"},
		{"bad policy", Config{ReviewersFile: rf, Backend: b, Policy: guard.Policy{Languages: []string{"ruby"}}}, "not offered"},
		{"negative heartbeat", Config{ReviewersFile: rf, Backend: b, HeartbeatTimeout: -time.Second}, "must not be negative"},
		{"tiny heartbeat", Config{ReviewersFile: rf, Backend: b, HeartbeatTimeout: time.Millisecond}, "under 1 s"},
		{"negative late result wait", Config{ReviewersFile: rf, Backend: b, LateResultWait: -time.Second}, "must not be negative"},
		{"negative attempts", Config{ReviewersFile: rf, Backend: b, StartAttempts: -1}, "must not be negative"},
		{"backoff over its max", Config{ReviewersFile: rf, Backend: b, StartBackoff: time.Hour}, "max start backoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v; want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("New: %v; want an error containing %q", err, tc.wantErr)
			case tc.wantErr != "" && guard.TypeOf(err) != guard.TypeConfigError:
				t.Fatalf("New: %v is not a ConfigError", err)
			}
		})
	}
}

func TestCheckRecordsTheCheckedRequestAndSettings(t *testing.T) {
	a, err := New(Config{
		ReviewersFile:    reviewersFile(t),
		BackendName:      "docker",
		Policy:           guard.Policy{ApprovalTimeout: 2 * time.Hour, Grace: 3 * time.Second},
		SandboxTaskQueue: "sandboxes",
		StartAttempts:    7,
	})
	if err != nil {
		t.Fatal(err)
	}
	req := guard.Request{Code: "print(1)", Settings: guard.Settings{Limits: guard.Limits{Timeout: 10 * time.Second}}}
	got, err := a.SandboxCheck(context.Background(), contract.CheckInput{Request: req})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	want, _ := guard.Policy{ApprovalTimeout: 2 * time.Hour, Grace: 3 * time.Second}.Check(req, "docker")
	if got.Checked.Digest != want.Digest || got.Checked.Backend != "docker" {
		t.Errorf("checked digest %s for backend %s; want %s for docker", got.Checked.Digest, got.Checked.Backend, want.Digest)
	}
	wantRun := contract.RunOptions{
		TaskQueue: "sandboxes", Grace: 3 * time.Second, HeartbeatTimeout: DefaultHeartbeatTimeout,
		ReportMargin: DefaultReportMargin, StartAttempts: 7, StartBackoff: DefaultStartBackoff,
		MaxStartBackoff: DefaultMaxStartBackoff, ScheduleToStartTimeout: DefaultScheduleToStartTimeout,
	}
	if got.ApprovalTimeout != 2*time.Hour || got.Run != wantRun {
		t.Errorf("settings = %s, %+v; want 2h, %+v", got.ApprovalTimeout, got.Run, wantRun)
	}
	if keys := got.Reviewers.Keys(); len(keys) != 1 || keys[0].Principals[0] != "alice" {
		t.Errorf("recorded reviewers = %+v; want alice's key", keys)
	}
	if len(got.Warnings) != 0 {
		t.Errorf("warnings %v for a request without input files", got.Warnings)
	}
	withHook := guard.Request{Code: "print(1)", Settings: guard.Settings{Files: map[string][]byte{"hook.pth": []byte("import os\n"), "data.csv": nil}}}
	hooked, err := a.SandboxCheck(context.Background(), contract.CheckInput{Request: withHook})
	if err != nil {
		t.Fatal(err)
	}
	if len(hooked.Warnings) != 1 || hooked.Warnings[0].File != "hook.pth" {
		t.Errorf("recorded warnings %v; want the one for hook.pth", hooked.Warnings)
	}

	_, err = a.SandboxCheck(context.Background(), contract.CheckInput{Request: guard.Request{Code: ""}})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != guard.TypeToolUsageError || !appErr.NonRetryable() {
		t.Errorf("Check of empty code: %v; want a non-retryable ToolUsageError application error", err)
	}
}

func runActivity(t *testing.T, a *Activities, in contract.RunInput) (guard.Result, error) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	if a.history == nil {
		a.history = &historytest.Log{ScheduleCaller: true}
	}
	return executeRun(t, a, env, in)
}

// executeRun runs the sandbox activity of a in env.
func executeRun(t *testing.T, a *Activities, env *testsuite.TestActivityEnvironment, in contract.RunInput) (guard.Result, error) {
	t.Helper()
	a.Register(env)
	v, err := env.ExecuteActivity(contract.RunActivityName, in)
	if err != nil {
		return guard.Result{}, err
	}
	var res guard.Result
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	return res, nil
}

func checked(t *testing.T, a *Activities, req guard.Request) guard.Checked {
	t.Helper()
	res, err := a.SandboxCheck(context.Background(), contract.CheckInput{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return res.Checked
}

const approvalID = "8a6e0804-2bd0-4672-b79d-d97027f9071a"

func TestRunGuardsTheBackendAndEmitsEvents(t *testing.T) {
	const secretCode, secretEnv, secretOut, secretFile, secretInput = "print('code-s3cret')", "env-s3cret", "out-s3cret", "file-s3cret", "input-s3cret"
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprint("capture_content=", capture), func(t *testing.T) {
			b := &echoBackend{Result: guard.Result{
				ExitCode: 0,
				Stdout:   []byte(secretOut + strings.Repeat("x", 200)),
				Files:    []guard.File{{Name: "out.txt", Content: []byte(secretFile)}},
			}}
			sink := &MemorySink{}
			a, err := New(Config{Backend: b, Sink: sink, ReviewersFile: reviewersFile(t)})
			if err != nil {
				t.Fatal(err)
			}
			c := checked(t, a, guard.Request{
				Code: secretCode, Settings: guard.Settings{
					Env:            map[string]string{"TOKEN": secretEnv},
					Files:          map[string][]byte{"in.txt": []byte(secretInput)},
					Limits:         guard.Limits{MaxStdoutBytes: 100},
					CaptureContent: capture,
				}})
			res, err := runActivity(t, a, approved(t, c, fields(c.Digest)))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			// The guard re-applied the request's stdout cap to what the backend returned.
			if len(res.Stdout) != 100 || !res.StdoutTruncated {
				t.Errorf("stdout %d bytes, truncated %t; want 100, true", len(res.Stdout), res.StdoutTruncated)
			}
			if res.ApprovalID != approvalID || res.Reviewer != "alice" || res.Digest != c.Digest || res.Backend != "echo" {
				t.Errorf("result ids = %s %s %s %s; want the approval, reviewer, digest and backend", res.ApprovalID, res.Reviewer, res.Digest, res.Backend)
			}
			if len(b.ran) != 1 || b.ran[0].Owner.ActivityID == "" {
				t.Errorf("backend ran %d times, owner %+v; want once, with the activity as owner", len(b.ran), b.ran)
			}

			evs := sink.Events()
			if len(evs) != 2 || evs[0].Type != contract.EventSandboxStarted || evs[1].Type != contract.EventSandboxFinished {
				t.Fatalf("events %v; want started, finished", evs)
			}
			for _, e := range evs {
				if e.Time.IsZero() || e.Data["digest"] != c.Digest || e.Data["approval_id"] != approvalID || e.Data["backend"] != "echo" {
					t.Errorf("%s lacks time, digest, approval id or backend: %v", e.Type, e.Data)
				}
			}
			fin := evs[1].Data
			if fin["exit_code"] != 0 || fin["stdout_bytes"] != 100 || fin["stdout_truncated"] != true || fin["files"] != 1 {
				t.Errorf("finished = %v; want exit 0, 100 stdout bytes, truncated, 1 file", fin)
			}
			text := fmt.Sprint(evs)
			for _, secret := range []string{"code-s3cret", secretEnv, secretOut, secretFile, secretInput} {
				if got := strings.Contains(text, secret); got != capture {
					t.Errorf("events contain %q: %t; want %t", secret, got, capture)
				}
			}
		})
	}
}

func TestRunRefusals(t *testing.T) {
	b := &echoBackend{}
	a, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	tampered := c
	tampered.Code = "print(2)"
	other, _ := New(Config{BackendName: "echo", ReviewersFile: reviewersFile(t)})
	// removed runs on a host whose reviewers file no longer lists alice's key.
	otherKey, err := reviewertest.NewKey("bob")
	if err != nil {
		t.Fatal(err)
	}
	removed, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewertest.WriteAllowedSigners(t, t.TempDir(), otherKey)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		a          *Activities
		in         contract.RunInput
		wantReason guard.RefusedReason
		want       string
	}{
		{"approval for another digest", a, approved(t, c, fields("sha256:"+strings.Repeat("0", 64))), guard.RefusedMismatch, "the approval is for"},
		{"no approval id", a, contract.RunInput{Checked: c, Decision: contract.Decision{Digest: c.Digest, Approve: true}}, guard.RefusedNoApproval, "no approving decision"},
		{"no decision", a, contract.RunInput{Checked: c}, guard.RefusedNoApproval, "no approving decision"},
		{"code changed after the check", a, approved(t, tampered, fields(c.Digest)), guard.RefusedNotVerified, "nothing ran"},
		{"unsigned", a, contract.RunInput{Checked: c, Decision: contract.Decision{ApprovalID: approvalID, Digest: c.Digest, Approve: true, Reviewer: "alice"}}, guard.RefusedNotVerified, "unsigned"},
		{"decision's approval id changed after signing", a, withDecision(approved(t, c, fields(c.Digest)), func(d *contract.Decision) { d.ApprovalID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427" }), guard.RefusedNotVerified, "approval_id"},
		{"signed for another run", a, approved(t, c, withField(fields(c.Digest), func(f *approval.Fields) { f.RunID = "another-run" })), guard.RefusedNotVerified, "run_id"},
		{"signed for another workflow", a, approved(t, c, withField(fields(c.Digest), func(f *approval.Fields) { f.WorkflowID = "another" })), guard.RefusedNotVerified, "workflow_id"},
		{"signed for another task queue", a, approved(t, c, withField(fields(c.Digest), func(f *approval.Fields) { f.SandboxTaskQueue = "elsewhere" })), guard.RefusedNotVerified, "sandbox_task_queue"},
		{"a denial", a, approved(t, c, withField(fields(c.Digest), func(f *approval.Fields) { f.Approve = false })), guard.RefusedNoApproval, "no approving decision"},
		{"expired", a, approved(t, c, withField(fields(c.Digest), func(f *approval.Fields) { f.Expires = time.Now().Add(-time.Minute).UTC() })), guard.RefusedExpired, "expired"},
		{"key not in this worker's file", removed, approved(t, c, fields(c.Digest)), guard.RefusedNotVerified, "unknown_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runActivity(t, tc.a, tc.in)
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != guard.TypeApprovalRefused || !appErr.NonRetryable() || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v; want a non-retryable %s containing %q", err, guard.TypeApprovalRefused, tc.want)
			}
			var ar *guard.ApprovalRefused
			if !errors.As(contract.FromFailure(err), &ar) || ar.Reason != tc.wantReason {
				t.Errorf("Run: %#v; want an ApprovalRefused with reason %s", ar, tc.wantReason)
			}
			evs := tc.a.sink.(*MemorySink).Events()
			if last := evs[len(evs)-1]; last.Type != contract.EventSandboxRefused || last.Data["reason"] != tc.wantReason {
				t.Errorf("last event %s %v; want %s with reason %s", last.Type, last.Data, contract.EventSandboxRefused, tc.wantReason)
			}
		})
	}
	if len(b.ran) != 0 {
		t.Errorf("backend ran %d times; want never", len(b.ran))
	}
	// A worker without a backend does not register Run, and refuses it if called directly.
	if _, err := other.SandboxRun(context.Background(), contract.RunInput{}); guard.TypeOf(contract.FromFailure(err)) != guard.TypeConfigError {
		t.Errorf("Run without a backend: %v; want ConfigError", err)
	}
}

func TestRunReportsBackendFailuresTyped(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         error
		wantStarted bool
	}{
		{"before start", &guard.IntegrationError{Op: "echo: connect", Err: errors.New("refused <out-s3cret>")}, false},
		{"after start", &guard.IntegrationError{Op: "echo: read", Err: errors.New("garbled <out-s3cret>"), CodeMayHaveStarted: true}, true},
		{"untyped", errors.New("boom <out-s3cret>"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &MemorySink{}
			a, err := New(Config{Backend: &echoBackend{Err: tc.err}, Sink: sink, ReviewersFile: reviewersFile(t)})
			if err != nil {
				t.Fatal(err)
			}
			c := checked(t, a, guard.Request{Code: "print(1)"})
			_, err = runActivity(t, a, approved(t, c, fields(c.Digest)))
			var ie *guard.IntegrationError
			if !errors.As(contract.FromFailure(err), &ie) || ie.CodeMayHaveStarted != tc.wantStarted {
				t.Fatalf("Run: %v; want IntegrationError with CodeMayHaveStarted=%t", err, tc.wantStarted)
			}
			evs := sink.Events()
			if len(evs) != 2 || evs[1].Data["error_type"] != guard.TypeIntegrationError || evs[1].Data["code_may_have_started"] != tc.wantStarted {
				t.Fatalf("events %v; want a finished event with the integration error", evs)
			}
			if strings.Contains(fmt.Sprint(evs), "out-s3cret") {
				t.Errorf("events quote the backend's error text without capture_content: %v", evs)
			}
		})
	}
}

func TestSlogSinkWritesStructuredRecords(t *testing.T) {
	var buf bytes.Buffer
	sink := SlogSink{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	sink.Emit(context.Background(), Event{Type: contract.EventSandboxFinished, Data: map[string]any{"exit_code": 3, "digest": "sha256:ab"}})
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("record %q is not JSON: %v", buf.String(), err)
	}
	if rec["msg"] != string(contract.EventSandboxFinished) || rec["event"] != string(contract.EventSandboxFinished) || rec["exit_code"] != float64(3) || rec["digest"] != "sha256:ab" || rec["level"] != "INFO" {
		t.Errorf("record = %v; want msg and event %s, exit_code 3, digest, level INFO", rec, contract.EventSandboxFinished)
	}
}

func withField(f approval.Fields, change func(*approval.Fields)) approval.Fields {
	change(&f)
	return f
}

// TestVerifyKeepsTheRefusalTyped: the sandbox host's refusal of a decision that does not verify
// (verifyAdmission, which SandboxRun calls before anything starts) is an ApprovalRefused that wraps
// the approval package's typed refusal, so errors.As finds its reason (here, a statement signed
// for another run).
func TestVerifyKeepsTheRefusalTyped(t *testing.T) {
	a, err := New(Config{Backend: &echoBackend{}, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	in := approved(t, c, withField(fields(c.Digest), func(f *approval.Fields) { f.RunID = "another-run" }))
	info := activity.Info{TaskQueue: testTaskQueue, ScheduledTime: time.Now()}
	info.WorkflowExecution.ID, info.WorkflowExecution.RunID = testWorkflowID, testRunID
	_, err = a.verifyAdmission(a.runAdmission(info, c, in))
	var ar *guard.ApprovalRefused
	var re *approval.RefusalError
	if !errors.As(err, &ar) || ar.Reason != guard.RefusedNotVerified || !errors.As(err, &re) || re.Reason != approval.ReasonStatementMismatch || re.Field != "run_id" {
		t.Fatalf("verifyAdmission: %v; want an ApprovalRefused (not_verified) wrapping a statement_mismatch on run_id", err)
	}
	if guard.Retryable(err) {
		t.Errorf("a refusal is retryable")
	}
}

func withDecision(in contract.RunInput, change func(*contract.Decision)) contract.RunInput {
	change(&in.Decision)
	return in
}

// The sandbox host accepts a passkey decision only when it was made on the inbox's configured
// origin, and only when the passkey's signature counter grew since the last one this host
// accepted (its own counters file): an assertion made on another port of the inbox's host, on
// plain http beside an https inbox, or replayed with a counter that did not grow (a cloned
// authenticator) runs nothing. The same assertion presented again by the workflow's fresh
// activity after a failure from before the start still runs.
func TestRunPasskeyOriginAndCounter(t *testing.T) {
	const origin = "https://inbox.example.com"
	alice := reviewertest.NewPasskey(t, "alice", "inbox.example.com")
	dir := t.TempDir()
	file := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(file, []byte(alice.AllowedLine(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &echoBackend{}
	cfg := Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: file, PasskeyOrigin: origin, PasskeyCountersFile: filepath.Join(dir, "counters.json")}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	f := fields(c.Digest)
	input := func(d contract.Decision) contract.RunInput {
		return contract.RunInput{Checked: c, Decision: d}
	}
	runs := func(name string, in contract.RunInput, want string) {
		t.Helper()
		before := len(b.ran)
		a.history = nil // a fresh run history each time (runActivity gives one)
		_, err := runActivity(t, a, in)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v; want it to run", name, err)
		case want != "" && (guard.TypeOf(contract.FromFailure(err)) != guard.TypeApprovalRefused || !strings.Contains(err.Error(), "refused ("+want+")")):
			t.Errorf("%s: %v; want an ApprovalRefused (%s)", name, err, want)
		case want != "" && len(b.ran) != before:
			t.Errorf("%s: the backend ran; want nothing to run", name)
		}
	}
	runs("another port of the inbox's host", input(alice.Decision(t, f, "https://inbox.example.com:8443", 3)), string(approval.ReasonWrongOrigin))
	runs("plain http beside the https inbox", input(alice.Decision(t, f, "http://inbox.example.com", 3)), string(approval.ReasonWrongOrigin))
	good := input(alice.Decision(t, f, origin, 3))
	runs("the inbox's origin", good, "")
	runs("the same assertion again", good, "")
	runs("counter 3 again, another statement (a clone)", input(alice.Decision(t, withField(f, func(f *approval.Fields) { f.Expires = f.Expires.Add(time.Minute) }), origin, 3)), string(approval.ReasonCounterReplayed))
	runs("counter 2 (a clone behind)", input(alice.Decision(t, withField(f, func(f *approval.Fields) { f.Expires = f.Expires.Add(2 * time.Minute) }), origin, 2)), string(approval.ReasonCounterReplayed))
	// A host restarted on the same counters file still refuses; a grown counter runs.
	a, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runs("after a restart, counter 3 again", input(alice.Decision(t, withField(f, func(f *approval.Fields) { f.Expires = f.Expires.Add(3 * time.Minute) }), origin, 3)), string(approval.ReasonCounterReplayed))
	runs("after a restart, counter 4", input(alice.Decision(t, withField(f, func(f *approval.Fields) { f.Expires = f.Expires.Add(4 * time.Minute) }), origin, 4)), "")
	// A host without a passkey origin refuses every passkey decision.
	cfg.PasskeyOrigin = ""
	noOrigin, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a = noOrigin
	runs("no passkey origin configured", input(alice.Decision(t, withField(f, func(f *approval.Fields) { f.Expires = f.Expires.Add(5 * time.Minute) }), origin, 5)), string(approval.ReasonWrongOrigin))
	// Check records the origin with the keys, for the workflow.
	cfg.PasskeyOrigin = origin
	a, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	a.Register(env)
	v, err := env.ExecuteActivity(contract.CheckActivityName, contract.CheckInput{Request: guard.Request{Code: "print(1)"}})
	if err != nil {
		t.Fatal(err)
	}
	var res contract.CheckResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	if got := res.Reviewers.PasskeyOrigin(); got != origin {
		t.Errorf("Check recorded passkey origin %q; want %q", got, origin)
	}
	if _, err := New(Config{Backend: b, ReviewersFile: file, PasskeyOrigin: origin}); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("New with a passkey origin and no counters file: %v; want a ConfigError", err)
	}
}

// acquireCounter is an echoBackend that also takes sandboxes ahead (guard.Acquirer), counting
// each take.
type acquireCounter struct {
	echoBackend
	mu       sync.Mutex
	acquired int
}

func (b *acquireCounter) Acquire(ctx context.Context, c guard.Checked) (guard.Acquired, error) {
	b.mu.Lock()
	b.acquired++
	b.mu.Unlock()
	return acquiredEcho{b: &b.echoBackend, ctx: ctx, c: c}, nil
}

type acquiredEcho struct {
	b   *echoBackend
	ctx context.Context
	c   guard.Checked
}

func (a acquiredEcho) Run(ctx context.Context) (guard.Result, error) { return a.b.Run(ctx, a.c) }
func (a acquiredEcho) Discard()                                      {}

// A sandbox activity whose approvals do not verify (a namespace writer's, scheduled with a
// forged decision) is refused before any sandbox is taken: it makes no backend call at all, so
// such activities cannot drain the warm pool.
func TestRunWithAnUnverifiedApprovalTakesNoSandbox(t *testing.T) {
	b := &acquireCounter{}
	a, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	forged := contract.RunInput{Checked: c, Decision: contract.Decision{ApprovalID: approvalID, Digest: c.Digest, Approve: true, Reviewer: "alice"}}
	if _, err := runActivity(t, a, forged); guard.TypeOf(contract.FromFailure(err)) != guard.TypeApprovalRefused {
		t.Fatalf("Run: %v; want ApprovalRefused", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.acquired != 0 || len(b.ran) != 0 {
		t.Errorf("acquired %d, ran %d; want no sandbox taken and nothing run", b.acquired, len(b.ran))
	}
}
