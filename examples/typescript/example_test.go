//go:build integration

// Package typescript_test runs the TypeScript examples against a real server and worker: the
// Temporal client example, the MCP client example with the official MCP SDK over stdio and
// streamable HTTP, and the three-cell session through the same SDK.
package typescript_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
)

var built struct {
	once sync.Once
	err  error
}

// build installs the examples' packages and compiles them, once per test binary.
func build(t *testing.T) {
	t.Helper()
	need.Need(t, need.Node)
	built.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		for _, args := range [][]string{{"npm", "ci", "--no-audit", "--no-fund"}, {"node_modules/.bin/tsc"}} {
			if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
				built.err = fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
}

// output is the stdout of a running example, line by line.
type output struct {
	cmd   *exec.Cmd
	lines chan string
}

// node returns the command `node ARGS...`, killed after five minutes at the latest.
func node(t *testing.T, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return exec.CommandContext(ctx, "node", args...)
}

// run starts cmd and reads its stdout; the test's end kills it.
func run(t *testing.T, cmd *exec.Cmd) *output {
	t.Helper()
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &output{cmd: cmd, lines: make(chan string, 64)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		defer close(o.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			o.lines <- sc.Text()
		}
	}()
	return o
}

// next returns the next line that starts with prefix, skipping the others.
func (o *output) next(t *testing.T, prefix string) string {
	t.Helper()
	for line := range o.lines {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	_ = o.cmd.Wait()
	t.Fatalf("the example ended without a line starting %q", prefix)
	return ""
}

// value decodes the JSON after prefix on the next line that starts with it.
func (o *output) value(t *testing.T, prefix string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(strings.TrimPrefix(o.next(t, prefix), prefix)), v); err != nil {
		t.Fatalf("%s: %v", prefix, err)
	}
}

func TestIntegrationTypeScriptExample(t *testing.T) {
	build(t)
	e := agenttest.Setup(t)
	cmd := node(t, "dist/run.js")
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+e.Address, "TEMPORAL_NAMESPACE="+e.Namespace, "SANDBOXFLOW_TASK_QUEUE="+e.TaskQueue)
	out := run(t, cmd)
	next := func(prefix string) string { t.Helper(); return out.next(t, prefix) }

	var started struct {
		WorkflowID string `json:"workflow_id"`
		RunID      string `json:"run_id"`
		State      string `json:"state"`
		Digest     string `json:"digest"`
		Timeout    string `json:"timeout"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(next("STARTED "), "STARTED ")), &started); err != nil {
		t.Fatal(err)
	}
	if started.State != "awaiting_approval" || started.Timeout != "20s" {
		t.Errorf("started %+v; want awaiting_approval with the timeout \"20s\"", started)
	}
	next("sandboxflow-approval-statement v2")
	for _, field := range []string{"workflow_id: " + started.WorkflowID, "run_id: " + started.RunID, "digest: " + started.Digest, "decision: approve"} {
		if line := next(strings.SplitN(field, " ", 2)[0]); line != field {
			t.Errorf("statement line %q; want %q", line, field)
		}
	}
	next("reviewer: ")
	next("expires: ")
	agenttest.Decide(t, e, started.WorkflowID, true)

	var res struct {
		OK         bool   `json:"ok"`
		Stdout     string `json:"stdout"`
		Duration   string `json:"duration"`
		DurationMS *int64 `json:"duration_ms"`
		Files      []struct {
			Name, Content, Encoding string
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(next("RESULT "), "RESULT ")), &res); err != nil {
		t.Fatal(err)
	}
	if err := out.cmd.Wait(); err != nil {
		t.Errorf("the example exited with %v", err)
	}
	if !res.OK || res.Stdout != "hello from typescript\n" || res.DurationMS == nil {
		t.Errorf("result %+v; want ok, the output as text and duration_ms", res)
	}
	if _, err := time.ParseDuration(res.Duration); err != nil {
		t.Errorf("duration %q is not a Go duration string: %v", res.Duration, err)
	}
	if len(res.Files) != 1 || res.Files[0].Content != "NDI=" || res.Files[0].Encoding != "base64" {
		t.Errorf("files %+v; want answer.txt as base64 \"NDI=\" with its encoding", res.Files)
	}
}

var runID = regexp.MustCompile(`run (sandbox-[0-9a-f-]+)`)

// TestIntegrationTypeScriptMCPClient runs mcp.ts, an agent's host built on the official MCP SDK
// for TypeScript (not the Go SDK the server uses), against `starter mcp` over stdio and over
// streamable HTTP: it lists the tools, calls run_code, is told by progress where the run waits,
// and receives the approved run's output and files; a language that is not offered is refused.
func TestIntegrationTypeScriptMCPClient(t *testing.T) {
	build(t)
	e := agenttest.Setup(t)
	args := []string{"mcp", "--address", e.Address, "--namespace", e.Namespace, "--task-queue", e.TaskQueue,
		"--mcp-wait", "2m", "--progress-interval", "200ms", "--inbox-url", "http://127.0.0.1:9/inbox"}
	schema := e.ToolInputSchema(t)
	t.Run("stdio", func(t *testing.T) {
		exerciseMCP(t, e, schema, node(t, append([]string{"dist/mcp.js", "stdio", e.Starter}, args...)...))
	})
	t.Run("http", func(t *testing.T) {
		addr := e.ServeMCPHTTP(t, args...)
		exerciseMCP(t, e, schema, node(t, "dist/mcp.js", "http", "http://"+addr+"/mcp"))
	})
}

// toolResult is an MCP CallToolResult as JSON, in part.
type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Resource struct {
			URI, MIMEType, Text string
		} `json:"resource"`
	} `json:"content"`
}

func (r toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func exerciseMCP(t *testing.T, e *agenttest.Env, wantSchema any, cmd *exec.Cmd) {
	out := run(t, cmd)
	var server struct{ Name string }
	out.value(t, "SERVER ", &server)
	if server.Name == "" {
		t.Error("the server did not name itself in initialize")
	}
	var tools []struct {
		Name  string
		Input any
	}
	out.value(t, "TOOLS ", &tools)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		if tool.Name != "run_code" {
			continue
		}
		// tool-schema's, input_files included.
		props, _ := tool.Input.(map[string]any)["properties"].(map[string]any)
		if props["input_files"] == nil {
			t.Errorf("run_code's input schema as the TypeScript SDK read it lacks input_files: %v", tool.Input)
		}
		if !reflect.DeepEqual(tool.Input, wantSchema) {
			t.Errorf("run_code's input schema as the TypeScript SDK read it: %v; want tool-schema's %v", tool.Input, wantSchema)
		}
	}
	slices.Sort(names)
	if want := "cell_status,close_session,open_session,run_cell,run_code,run_status"; strings.Join(names, ",") != want {
		t.Errorf("tools %v; want %s", names, want)
	}

	var id, progress string
	for id == "" {
		out.value(t, "PROGRESS ", &progress)
		if m := runID.FindStringSubmatch(progress); m != nil {
			id = m[1]
		}
	}
	if !strings.Contains(progress, "http://127.0.0.1:9/inbox/run/"+id) {
		t.Errorf("progress %q does not link to the run's page in the inbox", progress)
	}
	agenttest.Decide(t, e, id, true)
	var res toolResult
	out.value(t, "RESULT ", &res)
	if res.IsError || !strings.Contains(res.text(), "hello from an MCP client") {
		t.Errorf("run_code: isError %t, text %q; want the approved run's output", res.IsError, res.text())
	}
	var report bool
	for _, c := range res.Content {
		report = report || c.Type == "resource" && strings.HasSuffix(c.Resource.URI, "/report.txt") && c.Resource.Text == "a report\n"
	}
	if !report {
		t.Errorf("content %+v; want report.txt as a text resource", res.Content)
	}

	var refused toolResult
	out.value(t, "REFUSED ", &refused)
	if !refused.IsError || !strings.Contains(refused.text(), "ToolUsageError") {
		t.Errorf("a language that is not offered: isError %t, text %q; want a ToolUsageError", refused.IsError, refused.text())
	}
	if err := out.cmd.Wait(); err != nil {
		t.Errorf("mcp.js exited with %v", err)
	}
}

// TestIntegrationTypeScriptSession runs session.ts, a three-cell session driven through the
// official MCP SDK for TypeScript against `starter mcp` over stdio, with the real Docker backend:
// each cell is approved while its run_cell call waits; the second prints the first's variable,
// the third (sh) reads the file the first wrote; close_session lists the three.
func TestIntegrationTypeScriptSession(t *testing.T) {
	build(t)
	e := sessionenv.Setup(t)
	out := run(t, node(t, "dist/session.js", e.Starter, "mcp", "--address", e.Address, "--namespace", e.Namespace, "--task-queue", e.TaskQueue,
		"--mcp-wait", "2m", "--progress-interval", "200ms", "--languages", "python,sh"))
	var opened struct {
		SessionID string `json:"session_id"`
		MaxCells  int    `json:"max_cells"`
	}
	out.value(t, "SESSION ", &opened)
	if opened.SessionID == "" || opened.MaxCells != 5 {
		t.Fatalf("open_session gave %+v; want a session id and max_cells 5", opened)
	}
	want := []string{"", "42\n", "forty-two\n"}
	for i := range want {
		if got := sessionenv.Decide(t, e, opened.SessionID, true); got != i+1 {
			t.Fatalf("cell %d waited; want cell %d", got, i+1)
		}
		var cell struct {
			IsError bool `json:"isError"`
			Result  struct {
				OK     bool   `json:"ok"`
				Stdout string `json:"stdout"`
			} `json:"result"`
		}
		out.value(t, fmt.Sprintf("CELL %d ", i+1), &cell)
		if cell.IsError || !cell.Result.OK || cell.Result.Stdout != want[i] {
			t.Errorf("cell %d: %+v; want ok and stdout %q", i+1, cell, want[i])
		}
	}
	var closed struct {
		End   string `json:"end"`
		Cells []struct {
			State string `json:"state"`
		} `json:"cells"`
	}
	out.value(t, "CLOSED ", &closed)
	if closed.End != "closed" || len(closed.Cells) != 3 {
		t.Errorf("close_session: %+v; want closed with three cells", closed)
	}
	if err := out.cmd.Wait(); err != nil {
		t.Errorf("session.js exited with %v", err)
	}
}
