//go:build integration

package devserver_test

import (
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
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/internal/devserver"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// The workflow's search attributes, as the worker main will pass them.
var (
	statusKey   = temporal.NewSearchAttributeKeyKeyword("SandboxStatus")
	digestKey   = temporal.NewSearchAttributeKeyKeyword("SandboxDigest")
	languageKey = temporal.NewSearchAttributeKeyKeyword("SandboxLanguage")
	backendKey  = temporal.NewSearchAttributeKeyKeyword("SandboxBackend")
	reviewerKey = temporal.NewSearchAttributeKeyKeyword("SandboxReviewer")

	sandboxKeys = []temporal.SearchAttributeKey{statusKey, digestKey, languageKey, backendKey, reviewerKey}
)

const taskQueue = "devserver-test"

// echoWorkflow is a test-only workflow: it marks itself finished through a
// search attribute, as the RunCode workflow does, and echoes its input.
func echoWorkflow(ctx workflow.Context, in string) (string, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, statusKey.ValueSet("finished")); err != nil {
		return "", err
	}
	return "echo:" + in, nil
}

// digestWorkflow upserts the search attribute a restart added, which the
// history service must know by then.
func digestWorkflow(ctx workflow.Context, digest string) error {
	return workflow.UpsertTypedSearchAttributes(ctx, digestKey.ValueSet(digest))
}

func freePort(t *testing.T) int {
	t.Helper()
	return freePortOn(t, "127.0.0.1")
}

func freePortOn(t *testing.T, host string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("pick a free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatalf("release port: %v", err)
	}
	return port
}

// testConfig is a dev server on free loopback ports; server logs at WARN and
// above go to stderr.
func testConfig(t *testing.T, dataDir string) devserver.Config {
	return devserver.Config{
		Address:          "127.0.0.1:0",
		DataDir:          dataDir,
		UIPort:           freePort(t),
		SearchAttributes: sandboxKeys,
		Logger:           slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
}

// start starts cfg's server. A UI port that freePort picked can be taken before the server binds
// it (it cannot be held: the server binds it itself, and the server's own ephemeral ports or
// another test's may get it first); then start picks another, at most twice, and sets it in cfg.
func start(t *testing.T, cfg *devserver.Config) *devserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	srv, err := devserver.Start(ctx, *cfg)
	for retry := 0; retry < 2 && cfg.UIPort > 0; retry++ {
		var pe *devserver.PortInUseError
		if !errors.As(err, &pe) || pe.Service != "UI" {
			break
		}
		t.Logf("UI port %d was taken before the server bound it; picking another", cfg.UIPort)
		host := cfg.UIHost
		if host == "" {
			host = "127.0.0.1"
		}
		cfg.UIPort = freePortOn(t, host)
		srv, err = devserver.Start(ctx, *cfg)
	}
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("Start took %s", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return srv
}

func stop(t *testing.T, srv *devserver.Server) {
	t.Helper()
	began := time.Now()
	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %s", time.Since(began).Round(time.Millisecond))
}

func dial(t *testing.T, srv *devserver.Server) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:  srv.FrontendAddress(),
		Namespace: srv.Namespace(),
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		t.Fatalf("dial %s: %v", srv.FrontendAddress(), err)
	}
	return c
}

// waitListed polls visibility until query returns exactly workflowID.
func waitListed(t *testing.T, c client.Client, query, workflowID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Fatalf("ListWorkflow(%q): %v", query, err)
		}
		var ids []string
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if len(ids) == 1 && ids[0] == workflowID {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListWorkflow(%q): got %v; want [%s]", query, ids, workflowID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func listSearchAttributes(t *testing.T, c client.Client, namespace string) map[string]enumspb.IndexedValueType {
	t.Helper()
	resp, err := c.OperatorService().ListSearchAttributes(context.Background(),
		&operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		t.Fatalf("ListSearchAttributes: %v", err)
	}
	return resp.GetCustomAttributes()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// TestLifecycle starts a dev server, runs a workflow on it, checks the
// namespace, search attributes, visibility and UI, then restarts it on the
// same data dir and finds the workflow again.
func TestLifecycle(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := testConfig(t, dataDir)
	cfg.Codec = devserver.Codec{Endpoint: "http://127.0.0.1:8888/codec", PassAccessToken: true, IncludeCredentials: true}
	srv := start(t, &cfg)

	if got, want := srv.Namespace(), "default"; got != want {
		t.Errorf("Namespace() = %q; want %q", got, want)
	}
	if got, want := srv.DatabasePath(), filepath.Join(dataDir, devserver.DatabaseFileName); got != want {
		t.Errorf("DatabasePath() = %q; want %q", got, want)
	}
	checkWriteAhead(t, srv.DatabasePath())
	if got, want := srv.UIURL(), "http://127.0.0.1:"+strconv.Itoa(cfg.UIPort); got != want {
		t.Errorf("UIURL() = %q; want %q", got, want)
	}
	if host, _, err := net.SplitHostPort(srv.FrontendAddress()); err != nil || host != "127.0.0.1" {
		t.Errorf("FrontendAddress() = %q; want 127.0.0.1:<port>", srv.FrontendAddress())
	}
	fi, err := os.Stat(dataDir)
	if err != nil {
		t.Fatalf("stat data dir: %v", err)
	}
	if got, want := fi.Mode().Perm(), os.FileMode(0o700); got != want {
		t.Errorf("data dir mode = %v; want %v", got, want)
	}

	c := dial(t, srv)
	defer c.Close()

	t.Run("namespace", func(t *testing.T) {
		resp, err := c.WorkflowService().DescribeNamespace(context.Background(),
			&workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		if err != nil {
			t.Fatalf("DescribeNamespace(default): %v", err)
		}
		if got, want := resp.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(), devserver.DefaultRetention; got != want {
			t.Errorf("retention = %s; want %s", got, want)
		}
	})

	t.Run("search attributes", func(t *testing.T) {
		got := listSearchAttributes(t, c, "default")
		for _, k := range sandboxKeys {
			if typ, ok := got[k.GetName()]; !ok || typ != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
				t.Errorf("search attribute %s: got %v (listed %v); want Keyword", k.GetName(), typ, ok)
			}
		}
	})

	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(echoWorkflow)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	workflowID := "devserver-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID:        workflowID,
		TaskQueue: taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			statusKey.ValueSet("pending"),
			languageKey.ValueSet("python"),
		),
	}, echoWorkflow, "hi")
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow result: %v", err)
	}
	if out != "echo:hi" {
		t.Fatalf("workflow result = %q; want %q", out, "echo:hi")
	}
	query := fmt.Sprintf(`SandboxStatus = "finished" AND SandboxLanguage = "python" AND WorkflowId = %q`, workflowID)
	waitListed(t, c, query, workflowID)

	t.Run("web UI", func(t *testing.T) {
		code, body := httpGet(t, srv.UIURL()+"/")
		if code != http.StatusOK {
			t.Errorf("GET / = %d; want 200", code)
		}
		if !strings.Contains(body, "<html") || !strings.Contains(body, "/_app/") {
			t.Errorf("GET / did not serve the UI's index.html; got %.200q", body)
		}
		code, body = httpGet(t, srv.UIURL()+"/api/v1/settings")
		if code != http.StatusOK {
			t.Fatalf("GET /api/v1/settings = %d; want 200", code)
		}
		var settings struct {
			DefaultNamespace string
			DisableNewsFetch bool
			Codec            struct {
				Endpoint           string
				PassAccessToken    bool
				IncludeCredentials bool
			}
		}
		if err := json.Unmarshal([]byte(body), &settings); err != nil {
			t.Fatalf("settings: %v in %.200q", err, body)
		}
		if settings.Codec.Endpoint != cfg.Codec.Endpoint || !settings.Codec.PassAccessToken || !settings.Codec.IncludeCredentials {
			t.Errorf("UI codec settings = %+v; want %+v", settings.Codec, cfg.Codec)
		}
		if settings.DefaultNamespace != "default" || !settings.DisableNewsFetch {
			t.Errorf("UI settings: DefaultNamespace %q, DisableNewsFetch %v; want default, true",
				settings.DefaultNamespace, settings.DisableNewsFetch)
		}
	})

	t.Run("data dir in use", func(t *testing.T) {
		second := testConfig(t, dataDir)
		_, err := devserver.Start(context.Background(), second)
		if !errors.Is(err, devserver.ErrDataDirInUse) {
			t.Fatalf("second Start on %s: got %v; want ErrDataDirInUse", dataDir, err)
		}
	})

	w.Stop()
	c.Close()
	uiURL := srv.UIURL()
	stop(t, srv)
	if resp, err := http.Get(uiURL + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("web UI still answers at %s after Stop", uiURL)
	}

	// Restart on the same data dir, on other ports.
	cfg2 := testConfig(t, dataDir)
	srv2 := start(t, &cfg2)
	c2 := dial(t, srv2)
	defer c2.Close()
	desc, err := c2.DescribeWorkflowExecution(context.Background(), workflowID, "")
	if err != nil {
		t.Fatalf("after restart: DescribeWorkflowExecution(%s): %v", workflowID, err)
	}
	if got, want := desc.GetWorkflowExecutionInfo().GetStatus(), enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED; got != want {
		t.Errorf("after restart: status = %v; want %v", got, want)
	}
	out = ""
	if err := c2.GetWorkflow(context.Background(), workflowID, "").Get(context.Background(), &out); err != nil || out != "echo:hi" {
		t.Errorf("after restart: result = %q, %v; want %q", out, err, "echo:hi")
	}
	waitListed(t, c2, query, workflowID)
	if got := listSearchAttributes(t, c2, "default"); len(got) != len(sandboxKeys) {
		t.Errorf("after restart: custom search attributes = %v; want the %d sandbox keys, once each", got, len(sandboxKeys))
	}
}

// TestSearchAttributesOnRestart shows that a restart adds search attributes
// the namespace lacks, and refuses one whose type changed.
func TestSearchAttributesOnRestart(t *testing.T) {
	dataDir := t.TempDir()
	cfg := testConfig(t, dataDir)
	cfg.UIPort = -1
	cfg.SearchAttributes = []temporal.SearchAttributeKey{statusKey}
	srv := start(t, &cfg)
	if got := srv.UIURL(); got != "" {
		t.Errorf("UIURL() with UIPort -1 = %q; want \"\"", got)
	}
	stop(t, srv)

	cfg.SearchAttributes = []temporal.SearchAttributeKey{statusKey, digestKey}
	srv = start(t, &cfg)
	c := dial(t, srv)
	got := listSearchAttributes(t, c, "default")
	for _, k := range cfg.SearchAttributes {
		if got[k.GetName()] != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			t.Errorf("after restart: search attribute %s = %v; want Keyword", k.GetName(), got[k.GetName()])
		}
	}
	// The added attribute is usable at once, by a starter (frontend) and by
	// a workflow's upsert (history).
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(echoWorkflow)
	w.RegisterWorkflow(digestWorkflow)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		TaskQueue:             taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(digestKey.ValueSet("sha256:abc")),
	}, echoWorkflow, "x")
	if err != nil {
		t.Fatalf("ExecuteWorkflow with the added search attribute: %v", err)
	}
	waitListed(t, c, `SandboxDigest = "sha256:abc"`, run.GetID())
	run, err = c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		TaskQueue:                taskQueue,
		WorkflowTaskTimeout:      time.Second,
		WorkflowExecutionTimeout: 20 * time.Second,
	}, digestWorkflow, "sha256:def")
	if err != nil {
		t.Fatalf("ExecuteWorkflow(digestWorkflow): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("digestWorkflow: %v", err)
	}
	waitListed(t, c, `SandboxDigest = "sha256:def"`, run.GetID())
	hist := c.GetWorkflowHistory(context.Background(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for hist.HasNext() {
		ev, err := hist.Next()
		if err != nil {
			t.Fatalf("history of digestWorkflow: %v", err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
			t.Errorf("digestWorkflow: a workflow task failed (%v): the history service did not know the added search attribute yet",
				ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage())
		}
	}
	w.Stop()
	c.Close()
	stop(t, srv)

	cfg.SearchAttributes = []temporal.SearchAttributeKey{temporal.NewSearchAttributeKeyString("SandboxDigest")}
	_, err = devserver.Start(context.Background(), cfg)
	var typeErr *devserver.SearchAttributeTypeError
	if !errors.As(err, &typeErr) {
		t.Fatalf("Start with SandboxDigest as Text: got %v; want *SearchAttributeTypeError", err)
	}
	if typeErr.Name != "SandboxDigest" || typeErr.Have != enumspb.INDEXED_VALUE_TYPE_KEYWORD || typeErr.Want != enumspb.INDEXED_VALUE_TYPE_TEXT {
		t.Errorf("SearchAttributeTypeError = %+v; want SandboxDigest, have Keyword, want Text", typeErr)
	}
}

// TestBusyPort shows a taken port is reported before anything starts, naming
// the port, and that the failed Start releases the data dir.
func TestBusyPort(t *testing.T) {
	tests := []struct {
		service string
		setPort func(cfg *devserver.Config, port int)
	}{
		{"frontend", func(cfg *devserver.Config, port int) { cfg.Address = "127.0.0.1:" + strconv.Itoa(port) }},
		{"UI", func(cfg *devserver.Config, port int) { cfg.UIPort = port }},
	}
	for _, tt := range tests {
		t.Run(tt.service, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatalf("listen: %v", err)
			}
			defer l.Close()
			port := l.Addr().(*net.TCPAddr).Port

			dataDir := t.TempDir()
			cfg := testConfig(t, dataDir)
			tt.setPort(&cfg, port)
			srv, err := devserver.Start(context.Background(), cfg)
			if err == nil {
				_ = srv.Stop()
				t.Fatalf("Start with %s port %d taken: got nil error", tt.service, port)
			}
			var pe *devserver.PortInUseError
			if !errors.As(err, &pe) {
				t.Fatalf("Start with %s port %d taken: got %v; want *PortInUseError", tt.service, port, err)
			}
			if pe.Service != tt.service || pe.Port != port || pe.Host != "127.0.0.1" {
				t.Errorf("PortInUseError = {%s %s %d}; want {%s 127.0.0.1 %d}", pe.Service, pe.Host, pe.Port, tt.service, port)
			}
			if !strings.Contains(err.Error(), "127.0.0.1:"+strconv.Itoa(port)) {
				t.Errorf("error %q does not name the port %d", err, port)
			}
			if _, err := os.Stat(filepath.Join(dataDir, devserver.DatabaseFileName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("database created although Start failed on the port check: stat: %v", err)
			}
			// Were the data dir still locked, this would be ErrDataDirInUse.
			if _, err := devserver.Start(context.Background(), cfg); !errors.As(err, &pe) {
				t.Errorf("second Start with %s port %d taken: got %v; want *PortInUseError", tt.service, port, err)
			}
		})
	}
}

// TestCancelledContext shows Start gives up when its context has ended,
// returns the context's error and releases the data dir.
func TestCancelledContext(t *testing.T) {
	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 2 { // the second Start would see ErrDataDirInUse had the first kept the lock
		srv, err := devserver.Start(ctx, testConfig(t, dataDir))
		if err == nil {
			_ = srv.Stop()
			t.Fatalf("Start %d with a cancelled context: got nil error", i+1)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Start %d with a cancelled context: got %v; want context.Canceled", i+1, err)
		}
	}
}

// TestIPv6Loopback runs the server and the UI on ::1.
func TestIPv6Loopback(t *testing.T) {
	need.Need(t, need.IPv6Loopback)
	cfg := testConfig(t, t.TempDir())
	cfg.Address = "[::1]:0"
	cfg.UIHost = "::1"
	cfg.UIPort = freePortOn(t, "::1")
	srv := start(t, &cfg)
	if host, _, err := net.SplitHostPort(srv.FrontendAddress()); err != nil || host != "::1" {
		t.Errorf("FrontendAddress() = %q; want [::1]:<port>", srv.FrontendAddress())
	}
	if got, want := srv.UIURL(), "http://[::1]:"+strconv.Itoa(cfg.UIPort); got != want {
		t.Errorf("UIURL() = %q; want %q", got, want)
	}
	c := dial(t, srv)
	defer c.Close()
	if got := listSearchAttributes(t, c, "default"); len(got) != len(sandboxKeys) {
		t.Errorf("custom search attributes = %v; want the %d sandbox keys", got, len(sandboxKeys))
	}
	if code, _ := httpGet(t, srv.UIURL()+"/"); code != http.StatusOK {
		t.Errorf("GET / = %d; want 200", code)
	}
}

// TestReadyTimeoutStopsServer shows that when readiness is not reached in
// time, Start stops the server it started: its port and data dir are free
// for the next Start.
func TestReadyTimeoutStopsServer(t *testing.T) {
	dataDir := t.TempDir()
	cfg := testConfig(t, dataDir)
	cfg.Address = "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg.ReadyTimeout = time.Nanosecond
	srv, err := devserver.Start(context.Background(), cfg)
	if err == nil {
		_ = srv.Stop()
		t.Fatal("Start with a 1ns ReadyTimeout: got nil error")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start with a 1ns ReadyTimeout: got %v; want context.DeadlineExceeded", err)
	}
	cfg.ReadyTimeout = 0
	srv = start(t, &cfg)
	if got, want := srv.FrontendAddress(), cfg.Address; got != want {
		t.Errorf("FrontendAddress() = %q; want %q", got, want)
	}
}

// checkWriteAhead: the store writes ahead (the database header's read and write versions are 2,
// SQLite's WAL mode), and its log has the database's own mode.
func checkWriteAhead(t *testing.T, db string) {
	t.Helper()
	f, err := os.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	header := make([]byte, 20)
	if _, err := io.ReadFull(f, header); err != nil {
		t.Fatalf("read %s's header: %v", db, err)
	}
	if header[18] != 2 || header[19] != 2 {
		t.Errorf("%s: file format versions %d/%d; want 2/2 (journal_mode=wal)", db, header[18], header[19])
	}
	dbInfo, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	walInfo, err := os.Stat(db + "-wal")
	if err != nil {
		t.Fatalf("the write-ahead log: %v", err)
	}
	if walInfo.Mode().Perm() != dbInfo.Mode().Perm() {
		t.Errorf("%s-wal has mode %v; want the database's %v", db, walInfo.Mode().Perm(), dbInfo.Mode().Perm())
	}
}
