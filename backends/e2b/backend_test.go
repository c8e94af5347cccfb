package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/e2bfake"
)

const testKey = "e2b_0123456789abcdef0123456789abcdef01234567"

// syncBuffer is a log sink safe for the backend's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// setup returns a fake E2B and a backend on it whose log is captured. At the end of the test it
// checks that the key is in no log line and never reached envd.
func setup(t *testing.T, mutate func(*Config)) (*e2bfake.Server, *Backend, *syncBuffer) {
	t.Helper()
	f := e2bfake.Start(t, testKey)
	logs := &syncBuffer{}
	cfg := fakeConfig(f)
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if mutate != nil {
		mutate(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if strings.Contains(logs.String(), testKey) {
			t.Errorf("the API key is in the log:\n%s", logs)
		}
		if n := f.Record().EnvdRequestsWithKey; n != 0 {
			t.Errorf("%d envd requests carried the API key; want 0", n)
		}
	})
	return f, b, logs
}

// snapshot is what the fake saw, spread out.
func snapshot(f *e2bfake.Server) (creates []e2bfake.CreateRequest, kills []string, starts, live, envdKeys int) {
	r := f.Record()
	return r.Creates, r.Kills, r.Starts, r.Live, r.EnvdRequestsWithKey
}

// fakeConfig is a backend config that talks to the fake.
func fakeConfig(f *e2bfake.Server) Config {
	return Config{APIKey: testKey, APIURL: f.APIURL(), SandboxURL: f.SandboxURL(), RequestTimeout: 5 * time.Second}
}

func run(t *testing.T, b guard.Backend, p guard.Policy, req guard.Request) (guard.Result, error) {
	t.Helper()
	c, err := p.Check(req, b.Name())
	if err != nil {
		t.Fatal(err)
	}
	c.Owner = guard.Owner{WorkflowID: "wf-1", RunID: "run-1", ActivityID: "5"}
	res, err := guard.New(b, p).Run(context.Background(), c)
	noKey(t, res, err)
	return res, err
}

// noKey fails the test if the key shows in an error or a result.
func noKey(t *testing.T, res guard.Result, err error) {
	t.Helper()
	raw, _ := json.Marshal(res)
	if bytes.Contains(raw, []byte(testKey)) || (err != nil && strings.Contains(err.Error(), testKey)) {
		t.Fatalf("the API key leaked into the result or the error: %v", err)
	}
}

func TestApprovedRunReturnsOutputAndProducedFile(t *testing.T) {
	t.Parallel()
	var created []string
	f, b, logs := setup(t, func(c *Config) {
		c.Created = func(_ context.Context, id string) { created = append(created, id) }
	})
	code := "data = open('in.csv').read()\nprint('sum', sum(int(x) for x in data.split(',')))\n" +
		"import os\nos.makedirs('out', exist_ok=True)\nopen('out/chart.txt', 'w').write('drawn')\n"
	res, err := run(t, b, guard.Policy{}, guard.Request{Code: code, Settings: guard.Settings{Files: map[string][]byte{"in.csv": []byte("1,2,3")}}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.OK || res.ExitCode != 0 || string(res.Stdout) != "sum 6\n" {
		t.Fatalf("got ok %t exit %d stdout %q stderr %q; want ok, 0, \"sum 6\\n\"", res.OK, res.ExitCode, res.Stdout, res.Stderr)
	}
	if len(res.Files) != 1 || res.Files[0].Name != "out/chart.txt" || string(res.Files[0].Content) != "drawn" || res.FilesTruncated {
		t.Fatalf("got files %+v (truncated %t); want only out/chart.txt = drawn (the unchanged input left out)", res.Files, res.FilesTruncated)
	}
	creates, kills, starts, live, _ := snapshot(f)
	if len(creates) != 1 || starts != 1 || len(kills) != 1 || live != 0 {
		t.Fatalf("fake saw %d creates, %d starts, kills %v, %d live; want 1, 1, one kill, 0 live", len(creates), starts, kills, live)
	}
	got := creates[0]
	if got.TemplateID != "base" || got.Timeout != 90 || !got.Secure || got.AutoPause || got.AllowInternetAccess == nil || *got.AllowInternetAccess {
		t.Fatalf("create body %+v; want template base, timeout 30+60 s, secure, no internet", got)
	}
	if got.Network == nil || !slices.Equal(got.Network.DenyOut, []string{"0.0.0.0/0"}) || len(got.Network.AllowOut) != 0 {
		t.Fatalf("network %+v; want all egress denied", got.Network)
	}
	if got.Metadata[MetaManaged] != "true" || got.Metadata[MetaWorkflowID] != "wf-1" || got.Metadata[MetaDigest] == "" {
		t.Fatalf("metadata %v; want the ownership labels", got.Metadata)
	}
	if !strings.Contains(logs.String(), "sandbox_id="+kills[0]) || !slices.Equal(created, kills) {
		t.Fatalf("created %v, kills %v, log:\n%s\nwant the sandbox id recorded", created, kills, logs)
	}
	if err := b.api.kill(context.Background(), kills[0]); err != nil {
		t.Fatalf("killing a sandbox already gone: %v; want nil", err)
	}
}

func TestNetworkAskedForIsWhatTheFakeReceives(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	p := guard.Policy{AllowOpenNetwork: true, Languages: []string{guard.Python, guard.Shell}}
	res, err := run(t, b, p, guard.Request{Code: "echo \"$GREETING\"", Language: guard.Shell, Settings: guard.Settings{Network: true, Env: map[string]string{"GREETING": "hi"}}})
	if err != nil || string(res.Stdout) != "hi\n" {
		t.Fatalf("got %q, %v; want \"hi\\n\"", res.Stdout, err)
	}
	creates, _, _, _, _ := snapshot(f)
	if got := creates[0].AllowInternetAccess; got == nil || !*got || creates[0].Network != nil {
		t.Fatalf("create body %+v; want internet access and no deny rule", creates[0])
	}
}

func TestExitCodeAndStderrComeBack(t *testing.T) {
	t.Parallel()
	_, b, _ := setup(t, nil)
	res, err := run(t, b, guard.Policy{}, guard.Request{Code: "import sys\nprint('bad', file=sys.stderr)\nsys.exit(3)\n"})
	if err != nil || res.OK || res.ExitCode != 3 || string(res.Stderr) != "bad\n" || res.TimedOut {
		t.Fatalf("got %+v, %v; want exit 3 with stderr \"bad\\n\"", res, err)
	}
}

func TestTimeoutIsAResultAndKillsTheSandbox(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	start := time.Now()
	res, err := run(t, b, guard.Policy{}, guard.Request{Code: "import time\nprint('before')\ntime.sleep(60)\n", Settings: guard.Settings{Limits: guard.Limits{Timeout: 2 * time.Second}}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.TimedOut || res.ExitCode != -1 || res.OK || !strings.HasPrefix(string(res.Stdout), "before") {
		t.Fatalf("got timed_out %t exit %d ok %t stdout %q; want a timeout with the output printed before it", res.TimedOut, res.ExitCode, res.OK, res.Stdout)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("the run took %s; want about the 2 s timeout", d)
	}
	if _, kills, _, live, _ := snapshot(f); len(kills) != 1 || live != 0 {
		t.Fatalf("kills %v, %d live; want the sandbox killed", kills, live)
	}
}

func TestRateLimitBeforeStartIsRetryable(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, func(c *Config) { c.MaxRetryAfter = 10 * time.Second })
	f.SetFaults(e2bfake.Faults{RateLimit: 1, RetryAfter: "7"})
	_, err := run(t, b, guard.Policy{}, guard.Request{Code: "print(1)"})
	var rl *RateLimitError
	if guard.TypeOf(err) != guard.TypeIntegrationError || !guard.Retryable(err) || !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Fatalf("got %v (retryable %t); want a retryable IntegrationError with Retry-After 7s", err, guard.Retryable(err))
	}
	if _, _, starts, _, _ := snapshot(f); starts != 0 {
		t.Fatalf("the code ran %d times before the retry; want 0", starts)
	}
	// The retry Temporal would make.
	res, err := run(t, b, guard.Policy{}, guard.Request{Code: "print(1)"})
	if err != nil || string(res.Stdout) != "1\n" {
		t.Fatalf("retry: got %q, %v; want \"1\\n\"", res.Stdout, err)
	}
	if _, _, starts, _, _ := snapshot(f); starts != 1 {
		t.Fatalf("the code ran %d times; want once", starts)
	}
	f.SetFaults(e2bfake.Faults{RateLimit: 1, RetryAfter: "100000"})
	_, err = run(t, b, guard.Policy{}, guard.Request{Code: "print(1)"})
	if !errors.As(err, &rl) || rl.RetryAfter != 10*time.Second {
		t.Fatalf("got %v; want Retry-After bounded to 10s", err)
	}
}

func TestBadKeyIsAConfigErrorThatNamesNoKey(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, func(c *Config) { c.APIKey = testKey + "x" })
	_, err := run(t, b, guard.Policy{}, guard.Request{Code: "print(1)"})
	if guard.TypeOf(err) != guard.TypeConfigError || guard.Retryable(err) {
		t.Fatalf("got %v; want a ConfigError, not retryable", err)
	}
	if strings.Contains(err.Error(), "e2b_0123") || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("error %q: want the echoed key redacted", err)
	}
	if _, _, starts, _, _ := snapshot(f); starts != 0 {
		t.Fatalf("the code ran %d times; want 0", starts)
	}
}

func TestCreateTimingOutIsRetryable(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, func(c *Config) { c.RequestTimeout = 300 * time.Millisecond })
	f.SetFaults(e2bfake.Faults{CreateDelay: 5 * time.Second})
	_, err := run(t, b, guard.Policy{}, guard.Request{Code: "print(1)"})
	if guard.TypeOf(err) != guard.TypeIntegrationError || !guard.Retryable(err) {
		t.Fatalf("got %v (retryable %t); want a retryable IntegrationError", err, guard.Retryable(err))
	}
	f.SetFaults(e2bfake.Faults{CreateDelay: 10 * time.Millisecond}) // E2B gives up itself: 504
	_, err = run(t, b, guard.Policy{}, guard.Request{Code: "print(1)"})
	if guard.TypeOf(err) != guard.TypeIntegrationError || !guard.Retryable(err) || !strings.Contains(err.Error(), "504") {
		t.Fatalf("got %v; want a retryable IntegrationError for the 504", err)
	}
}

func TestStreamCutAfterStartIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	f.SetFaults(e2bfake.Faults{CutStream: true})
	_, err := run(t, b, guard.Policy{}, guard.Request{Code: "print('partial', flush=True)\nimport time\ntime.sleep(2)\n"})
	var ie *guard.IntegrationError
	if !errors.As(err, &ie) || !ie.CodeMayHaveStarted || guard.Retryable(err) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("got %v (retryable %t); want an outcome-unknown IntegrationError, never retried", err, guard.Retryable(err))
	}
	if _, kills, starts, live, _ := snapshot(f); len(kills) != 1 || starts != 1 || live != 0 {
		t.Fatalf("kills %v, starts %d, live %d; want the sandbox killed after one start", kills, starts, live)
	}
}

func TestKillFailureIsLoggedAndTheReaperEndsTheSandbox(t *testing.T) {
	t.Parallel()
	f, b, logs := setup(t, nil)
	f.SetFaults(e2bfake.Faults{FailKill: true})
	res, err := run(t, b, guard.Policy{}, guard.Request{Code: "print(1)"})
	if err != nil || !res.OK {
		t.Fatalf("got %+v, %v; want the run's result despite the failed kill", res, err)
	}
	_, _, _, live, _ := snapshot(f)
	if live != 1 || !strings.Contains(logs.String(), "kill sandbox failed") || !strings.Contains(logs.String(), "sandbox_id=ifake0001") {
		t.Fatalf("live %d, log:\n%s\nwant one sandbox left and a warning naming it", live, logs)
	}
	if n, err := b.Reap(context.Background(), time.Hour); err != nil || n != 0 {
		t.Fatalf("Reap(1h) = %d, %v; want 0: the sandbox is young", n, err)
	}
	f.SetFaults(e2bfake.Faults{})
	time.Sleep(5 * time.Millisecond)
	if n, err := b.Reap(context.Background(), time.Millisecond); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v; want 1", n, err)
	}
	if _, _, _, live, _ := snapshot(f); live != 0 {
		t.Fatalf("%d sandboxes live after the reaper; want 0", live)
	}
}

func TestReaperSparesOtherDeployments(t *testing.T) {
	t.Parallel()
	f, ours, _ := setup(t, func(c *Config) { c.Labels = map[string]string{"deployment": "a"} })
	cfg := fakeConfig(f)
	cfg.Labels = map[string]string{"deployment": "b"}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	theirs, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.SetFaults(e2bfake.Faults{FailKill: true})
	for _, b := range []*Backend{ours, theirs} {
		if _, err := run(t, b, guard.Policy{}, guard.Request{Code: "print(1)"}); err != nil {
			t.Fatal(err)
		}
	}
	f.SetFaults(e2bfake.Faults{})
	time.Sleep(5 * time.Millisecond)
	if n, err := ours.Reap(context.Background(), time.Millisecond); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v; want 1: only our own sandbox", n, err)
	}
	if _, _, _, live, _ := snapshot(f); live != 1 {
		t.Fatalf("%d live; want the other deployment's sandbox left", live)
	}
}

func TestProducedFilesAreBounded(t *testing.T) {
	t.Parallel()
	_, b, _ := setup(t, nil)
	code := "for i in range(5):\n    open('f%d.txt' % i, 'w').write('x' * 10)\nopen('big.bin', 'w').write('y' * 5000)\n" +
		"import os\nos.symlink('/etc/passwd', 'link')\n"
	p := guard.Policy{MaxFiles: 3, MaxFileBytes: 1000}
	res, err := run(t, b, p, guard.Request{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 3 || !res.FilesTruncated {
		t.Fatalf("got %d files (truncated %t); want 3 and truncated", len(res.Files), res.FilesTruncated)
	}
	for _, file := range res.Files {
		if file.Name == "big.bin" || file.Name == "link" {
			t.Fatalf("got %s; want it left out", file.Name)
		}
	}
}

func TestDoctor(t *testing.T) {
	t.Parallel()
	f, _, _ := setup(t, nil)
	cfg := fakeConfig(f)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range Doctor(context.Background(), cfg) {
		if !c.OK {
			t.Errorf("FAIL %s: %s", c.Name, c.Detail)
		}
	}
	cfg.APIKey = testKey + "x"
	checks := Doctor(context.Background(), cfg)
	if len(checks) != 3 || !checks[0].OK || checks[1].OK || checks[2].OK {
		t.Fatalf("got %+v; want config PASS, API FAIL, probe FAIL", checks)
	}
	for _, c := range checks {
		if strings.Contains(c.Detail, "e2b_0123") {
			t.Fatalf("check %s shows the key: %s", c.Name, c.Detail)
		}
	}
	cfg.APIKey = ""
	if checks := Doctor(context.Background(), cfg); len(checks) != 1 || checks[0].OK {
		t.Fatalf("got %+v; want one failed config check", checks)
	}
}

func TestClassify(t *testing.T) {
	cfg := Config{APIKey: "sekret", MaxRetryAfter: 30 * time.Second}
	for _, tt := range []struct {
		status     int
		retryAfter string
		wantType   string
		retryable  bool
	}{
		{http.StatusUnauthorized, "", guard.TypeConfigError, false},
		{http.StatusForbidden, "", guard.TypeConfigError, false},
		{http.StatusBadRequest, "", guard.TypeConfigError, false},
		{http.StatusNotFound, "", guard.TypeConfigError, false},
		{http.StatusTooManyRequests, "3", guard.TypeIntegrationError, true},
		{http.StatusInternalServerError, "", guard.TypeIntegrationError, true},
		{http.StatusServiceUnavailable, "", guard.TypeIntegrationError, true},
		{http.StatusGatewayTimeout, "", guard.TypeIntegrationError, true},
	} {
		h := http.Header{}
		if tt.retryAfter != "" {
			h.Set("Retry-After", tt.retryAfter)
		}
		err := classify("e2b: POST /sandboxes", tt.status, h, []byte(`{"code":1,"message":"m sekret"}`), cfg)
		if guard.TypeOf(err) != tt.wantType || guard.Retryable(err) != tt.retryable || strings.Contains(err.Error(), "sekret") {
			t.Errorf("status %d: got %v (retryable %t); want %s retryable=%t, key redacted", tt.status, err, guard.Retryable(err), tt.wantType, tt.retryable)
		}
	}
	if err := classify("x", http.StatusCreated, nil, nil, cfg); err != nil {
		t.Errorf("201: got %v; want nil", err)
	}
	if got := retryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), time.Minute); got != time.Minute {
		t.Errorf("retryAfter(date in an hour) = %s; want bounded to 1m", got)
	}
}

func TestEnvelopeFraming(t *testing.T) {
	msg := []byte(`{"event":{"keepalive":{}}}`)
	framed := append(envelope(0, msg), envelope(flagEndStream, []byte(`{}`))...)
	r := bytes.NewReader(framed)
	if flags, got, err := readEnvelope(r); err != nil || flags != 0 || string(got) != string(msg) {
		t.Fatalf("got %d %q %v", flags, got, err)
	}
	if flags, _, err := readEnvelope(r); err != nil || flags != flagEndStream {
		t.Fatalf("got flags %d, %v; want end of stream", flags, err)
	}
	if _, _, err := readEnvelope(r); err != io.EOF {
		t.Fatalf("got %v; want io.EOF", err)
	}
	if _, _, err := readEnvelope(bytes.NewReader(envelope(0, msg)[:10])); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut message: got %v; want io.ErrUnexpectedEOF", err)
	}
	huge := []byte{0, 0xff, 0xff, 0xff, 0xff}
	if _, _, err := readEnvelope(bytes.NewReader(huge)); err == nil {
		t.Fatal("oversized message: got nil error")
	}
}

func TestEgressNetwork(t *testing.T) {
	nc, err := EgressNetwork([]string{"pypi.org", "*.pythonhosted.org", "10.1.0.0/16", "8.8.8.8"})
	if err != nil || !slices.Equal(nc.DenyOut, []string{"0.0.0.0/0"}) || len(nc.AllowOut) != 4 {
		t.Fatalf("got %+v, %v", nc, err)
	}
	for _, bad := range []string{"pypi.org:443", "http://x", "a b", ""} {
		if _, err := EgressNetwork([]string{bad}); guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("EgressNetwork(%q): got %v; want ConfigError", bad, err)
		}
	}
}

func TestConfig(t *testing.T) {
	c := Config{APIKey: "k"}.WithDefaults()
	if c.APIURL != "https://api.e2b.app" || c.envdBase("abc", "") != "https://sandbox.e2b.app" {
		t.Fatalf("got API %s envd %s", c.APIURL, c.envdBase("abc", ""))
	}
	c = Config{APIKey: "k", Domain: "e2b.example.com"}.WithDefaults()
	if c.APIURL != "https://api.e2b.example.com" || c.envdBase("abc", "") != "https://49983-abc.e2b.example.com" {
		t.Fatalf("self-hosted: got API %s envd %s", c.APIURL, c.envdBase("abc", ""))
	}
	for _, bad := range []Config{{}, {APIKey: "a b"}, {APIKey: "k", Template: "../x"}, {APIKey: "k", APIURL: "ftp://x"},
		{APIKey: "k", WorkDir: "rel"}, {APIKey: "k", Labels: map[string]string{MetaManaged: "x"}},
		{APIKey: "k", WorkDir: "/tmp"}, {APIKey: "k", WorkDir: "/"}, {APIKey: "k", WorkDir: "/tmp/.sandboxflow/home"},
		{APIKey: "k", SandboxURL: "https://user:hunter2@sandbox.example.com"}, {APIKey: "k", APIURL: "https://user:hunter2@%zz"}} {
		err := bad.Validate()
		if guard.TypeOf(err) != guard.TypeConfigError {
			t.Errorf("Validate(%+v): got %v; want ConfigError", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Validate(%+v): error %q shows the URL's password", bad, err)
		}
	}
}

func TestConfigWorkDirBesideTheCode(t *testing.T) {
	for _, ok := range []string{"/home/user", "/tmp/work", "/tmp/.sandboxflowx"} {
		if err := (Config{APIKey: "k", WorkDir: ok}).Validate(); err != nil {
			t.Errorf("work dir %s: %v; want it accepted", ok, err)
		}
	}
}

func TestLoadAPIKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(" "+testKey+" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvAPIKey, "from-env")
	if k, err := LoadAPIKey(file); err != nil || k != testKey {
		t.Fatalf("file: got %q, %v", k, err)
	}
	if k, err := LoadAPIKey(""); err != nil || k != "from-env" {
		t.Fatalf("env: got %q, %v", k, err)
	}
	t.Setenv(EnvAPIKey, "")
	if _, err := LoadAPIKey(""); guard.TypeOf(err) != guard.TypeConfigError {
		t.Fatalf("none: got %v; want ConfigError", err)
	}
	if _, err := LoadAPIKey(filepath.Join(t.TempDir(), "missing")); guard.TypeOf(err) != guard.TypeConfigError {
		t.Fatalf("missing file: got %v; want ConfigError", err)
	}
	// A wrong path (a log file, a device) is refused after 64 KiB, not read whole.
	huge := filepath.Join(t.TempDir(), "huge")
	if err := os.WriteFile(huge, []byte(testKey+"\n"+strings.Repeat("x", 70<<10)), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadAPIKey(huge); guard.TypeOf(err) != guard.TypeConfigError || strings.Contains(err.Error(), testKey) {
		t.Fatalf("a file over 64 KiB: got %q, %v; want a ConfigError that does not quote the key", k, err)
	}
}

// ExampleNew builds the backend the way the worker does for --backend e2b.
// A backend over the key in a file (LoadAPIKey("") reads E2B_API_KEY instead); a key that cannot
// be read is a ConfigError. New contacts nothing: the first run creates the first sandbox.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "e2b-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "e2b-key")
	if err := os.WriteFile(file, []byte("e2b_0123456789abcdef0123456789abcdef01234567\n"), 0o600); err != nil {
		fmt.Println(err)
		return
	}
	key, err := LoadAPIKey(file)
	if err != nil {
		fmt.Println(guard.TypeOf(err))
		return
	}
	b, err := New(Config{APIKey: key, Template: "base"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.Name())
	_, err = LoadAPIKey(filepath.Join(dir, "missing"))
	fmt.Println(guard.TypeOf(err))
	// Output:
	// e2b
	// ConfigError
}

func TestCancelKillsTheSandbox(t *testing.T) {
	t.Parallel()
	f, b, _ := setup(t, nil)
	p := guard.Policy{}
	c, err := p.Check(guard.Request{Code: "import time\ntime.sleep(60)\n"}, Name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	// The code had started: the guard answers with a cancelled result (the output so far).
	res, err := guard.New(b, p).Run(ctx, c)
	if err != nil || res.Outcome != guard.OutcomeCancelled {
		t.Fatalf("got %+v, %v; want a cancelled result", res.Outcome, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, kills, starts, live, _ := snapshot(f)
		if len(kills) == 1 && live == 0 && starts == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kills %v, live %d, starts %d; want the sandbox killed after the cancel", kills, live, starts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestEnvdUnreachableBeforeStartIsRetryable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	f, b, _ := setup(t, func(c *Config) { c.SandboxURL = closed })
	_, err = run(t, b, guard.Policy{}, guard.Request{Code: "print(1)"})
	if guard.TypeOf(err) != guard.TypeIntegrationError || !guard.Retryable(err) {
		t.Fatalf("got %v (retryable %t); want a retryable IntegrationError", err, guard.Retryable(err))
	}
	if _, kills, starts, live, _ := snapshot(f); len(kills) != 1 || starts != 0 || live != 0 {
		t.Fatalf("kills %v, starts %d, live %d; want the sandbox killed and nothing run", kills, starts, live)
	}
}
