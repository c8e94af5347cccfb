//go:build integration

package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
)

func starterArgs(e *agenttest.Env, extra ...string) []string {
	return append([]string{"mcp", "--address", e.Address, "--namespace", e.Namespace, "--task-queue", e.TaskQueue,
		"--mcp-wait", "4s", "--progress-interval", "200ms", "--inbox-url", "http://127.0.0.1:9/inbox"}, extra...)
}

// progress collects the progress messages a client receives.
type progress struct {
	mu   sync.Mutex
	msgs []string
}

var runIDPattern = regexp.MustCompile(`run (sandbox-[0-9a-f-]+)`)

// waitID returns the run id named by the first progress message that names one after skip
// messages.
func (p *progress) waitID(t *testing.T, skip int) string {
	t.Helper()
	// Notifications are periodic and asynchronous: one about an earlier call's run can arrive
	// after that call returned, so a run already named before skip is not this call's run.
	seen := map[string]bool{}
	p.mu.Lock()
	for _, m := range p.msgs[:min(skip, len(p.msgs))] {
		if sm := runIDPattern.FindStringSubmatch(m); sm != nil {
			seen[sm[1]] = true
		}
	}
	p.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		for _, m := range p.msgs[min(skip, len(p.msgs)):] {
			if sm := runIDPattern.FindStringSubmatch(m); sm != nil && !seen[sm[1]] {
				p.mu.Unlock()
				return sm[1]
			}
		}
		p.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no progress notification named a run")
	return ""
}

func (p *progress) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs)
}

func connect(t *testing.T, transport mcp.Transport) (*mcp.ClientSession, *progress) {
	t.Helper()
	p := &progress{}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			p.mu.Lock()
			p.msgs = append(p.msgs, r.Params.Message)
			p.mu.Unlock()
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, p
}

func TestIntegrationMCP(t *testing.T) {
	e := agenttest.Setup(t)
	t.Run("stdio", func(t *testing.T) {
		cmd := exec.Command(e.Starter, starterArgs(e)...)
		cmd.Stderr = os.Stderr
		cs, p := connect(t, &mcp.CommandTransport{Command: cmd})
		exercise(t, e, cs, p)
	})
	t.Run("http", func(t *testing.T) {
		addr := e.ServeMCPHTTP(t, starterArgs(e)...)
		cs, p := connect(t, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"})
		exercise(t, e, cs, p)
		refusesWebPages(t, addr)
	})
}

// refusesWebPages sends what a browser sends for a web page that posts to the endpoint: from
// another origin, or through a name of the attacker's that resolves to 127.0.0.1 (DNS
// rebinding). Both are refused before any MCP message is read; the same request without them is
// served.
func refusesWebPages(t *testing.T, addr string) {
	t.Helper()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`
	for _, tc := range []struct {
		name   string
		header map[string]string
		host   string
		want   int
	}{
		{"another origin", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, "", http.StatusForbidden},
		{"another origin, Origin only", map[string]string{"Origin": "https://evil.example"}, "", http.StatusForbidden},
		{"DNS rebinding", nil, "evil.example:" + strings.Split(addr, ":")[1], http.StatusForbidden},
		{"an MCP client", nil, "", http.StatusOK},
	} {
		req, err := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(initialize))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: HTTP %d; want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}

// call calls a tool with a progress token in the background and returns a channel of its result.
func call(cs *mcp.ClientSession, name string, args any) <-chan *mcp.CallToolResult {
	return callWith(cs, name, args, true)
}

// callWith is call, with a progress token or without one.
func callWith(cs *mcp.ClientSession, name string, args any, progressToken bool) <-chan *mcp.CallToolResult {
	ch := make(chan *mcp.CallToolResult, 1)
	go func() {
		// Generous: under a loaded `make test` a sandbox attempt's heartbeat can be lost and the
		// run's result come late; a call that hangs still fails, after callTimeout.
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		params := &mcp.CallToolParams{Name: name, Arguments: args}
		if progressToken {
			params.SetProgressToken(fmt.Sprintf("tok-%d", time.Now().UnixNano()))
		}
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "call failed: " + err.Error()}}}
		}
		ch <- res
	}()
	return ch
}

func texts(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	return b.String()
}

func exercise(t *testing.T, e *agenttest.Env, cs *mcp.ClientSession, p *progress) {
	ctx := context.Background()
	t.Run("tools/list shows run_code with the schema of tool-schema", func(t *testing.T) {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// tool-schema's, input_files included.
		schema := e.ToolInputSchema(t).(map[string]any)
		props := schema["properties"].(map[string]any)
		if _, ok := props["input_files"]; !ok {
			t.Fatal("tool-schema lacks input_files")
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
			if tool.Name != client.ToolName {
				continue
			}
			got := tool.InputSchema.(map[string]any)
			gotProps := got["properties"].(map[string]any)
			if gotProps["input_files"] == nil {
				t.Errorf("run_code input schema %v lacks input_files", got)
			}
			if !reflect.DeepEqual(got, schema) {
				t.Errorf("run_code input schema %v; want tool-schema's %v", got, schema)
			}
		}
		slices.Sort(names)
		if want := []string{"cell_status", "close_session", "open_session", "run_cell", "run_code", "run_status"}; !reflect.DeepEqual(names, want) {
			t.Errorf("tools %v; want %v", names, want)
		}
	})
	t.Run("approved while the call waits", func(t *testing.T) {
		skip := p.count()
		code := "print('hello from mcp')\nopen('report.txt','w').write('a report\\n')\nopen('data.bin','wb').write(bytes([0,255,1]))\n"
		ch := call(cs, "run_code", map[string]any{"code": code})
		id := p.waitID(t, skip)
		agenttest.Decide(t, e, id, true)
		res := <-ch
		if res.IsError {
			t.Fatalf("isError: %s", texts(res))
		}
		if !strings.Contains(texts(res), "hello from mcp") {
			t.Errorf("text %q lacks the output", texts(res))
		}
		var sawText, sawBlob bool
		for _, c := range res.Content {
			er, ok := c.(*mcp.EmbeddedResource)
			if !ok {
				continue
			}
			switch {
			case strings.HasSuffix(er.Resource.URI, "/report.txt"):
				sawText = er.Resource.Text == "a report\n" && strings.HasPrefix(er.Resource.MIMEType, "text/plain")
			case strings.HasSuffix(er.Resource.URI, "/data.bin"):
				sawBlob = bytes.Equal(er.Resource.Blob, []byte{0, 255, 1}) && er.Resource.MIMEType == "application/octet-stream"
			}
		}
		if !sawText || !sawBlob {
			t.Errorf("resources: text %t, blob %t; want report.txt as text and data.bin as a blob in %+v", sawText, sawBlob, res.Content)
		}
		p.mu.Lock()
		msgs := strings.Join(p.msgs[skip:], "\n")
		p.mu.Unlock()
		if !strings.Contains(msgs, "waiting for a reviewer") || !strings.Contains(msgs, "http://127.0.0.1:9/inbox/run/"+id) {
			t.Errorf("progress %q; want \"waiting for a reviewer\" and the run's page in the inbox", msgs)
		}
	})
	t.Run("a call with a progress token outlives --mcp-wait, kept alive by progress, and returns the result", func(t *testing.T) {
		skip := p.count()
		ch := call(cs, "run_code", map[string]any{"code": "print(6*7)"})
		id := p.waitID(t, skip)
		select {
		case res := <-ch:
			t.Fatalf("the call returned while the run waited: %s", texts(res))
		case <-time.After(6 * time.Second): // --mcp-wait is 4s
		}
		if n := p.count() - skip; n < 10 {
			t.Errorf("%d progress notifications in 6 s at a 200 ms interval; want 10 or more", n)
		}
		agenttest.Decide(t, e, id, true)
		if res := <-ch; res.IsError || !strings.Contains(texts(res), "stdout:\n42\n") {
			t.Errorf("isError %t, text %q; want the result in the same call", res.IsError, texts(res))
		}
	})
	t.Run("input files reach the run", func(t *testing.T) {
		var csv strings.Builder
		csv.WriteString("region,amount\n")
		want := 0
		for i := 0; csv.Len() < 100<<10; i++ {
			fmt.Fprintf(&csv, "region-%d,%d\n", i%7, i)
			want += i
		}
		code := "import csv\nrows = list(csv.DictReader(open('data/sales.csv')))\n" +
			"print(len(rows), sum(int(r['amount']) for r in rows), open('raw.bin', 'rb').read().hex())\n"
		skip := p.count()
		ch := call(cs, "run_code", map[string]any{"code": code, "input_files": map[string]any{
			"data/sales.csv": csv.String(), "raw.bin": map[string]any{"base64": "AP8B"},
		}})
		id := p.waitID(t, skip)
		agenttest.Decide(t, e, id, true)
		res := <-ch
		rows := strings.Count(csv.String(), "\n") - 1
		if wantOut := fmt.Sprintf("stdout:\n%d %d 00ff01\n", rows, want); res.IsError || !strings.Contains(texts(res), wantOut) {
			t.Errorf("isError %t, text %q; want %q", res.IsError, texts(res), wantOut)
		}
		st, err := e.Client.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(st.Request); !strings.Contains(string(b), "sales.csv") {
			t.Errorf("the request reviewers read does not name sales.csv: %s", b)
		}
		bad := <-call(cs, "run_code", map[string]any{"code": "print(1)", "input_files": map[string]any{"../escape": "x"}})
		if !bad.IsError || !strings.Contains(texts(bad), "ToolUsageError") {
			t.Errorf("a name outside the folder: isError %t, text %q; want a ToolUsageError", bad.IsError, texts(bad))
		}
	})
	t.Run("denied returns isError naming ApprovalDenied", func(t *testing.T) {
		skip := p.count()
		ch := call(cs, "run_code", map[string]any{"code": "print('never')"})
		agenttest.Decide(t, e, p.waitID(t, skip), false)
		res := <-ch
		if !res.IsError || !strings.Contains(texts(res), "ApprovalDenied") {
			t.Errorf("isError %t, text %q; want isError naming ApprovalDenied", res.IsError, texts(res))
		}
	})
	t.Run("without a progress token a long wait returns the id, and run_status with wait_seconds returns on approval", func(t *testing.T) {
		res := <-callWith(cs, "run_code", map[string]any{"code": "print(6*7)"}, false)
		sm := runIDPattern.FindStringSubmatch(texts(res))
		if res.IsError || !strings.Contains(texts(res), mcpserverStillWaiting) || sm == nil {
			t.Fatalf("isError %t, text %q; want %q with the run's id", res.IsError, texts(res), mcpserverStillWaiting)
		}
		id := sm[1]
		if !strings.Contains(texts(res), "wait_seconds") || !strings.Contains(texts(res), "http://127.0.0.1:9/inbox/run/"+id) {
			t.Errorf("text %q; want wait_seconds suggested and the run's page", texts(res))
		}
		st := <-callWith(cs, "run_status", map[string]any{"id": id}, false)
		if st.IsError || !strings.Contains(texts(st), "awaiting_approval") {
			t.Errorf("run_status before the decision: %q", texts(st))
		}
		began := time.Now()
		ch := callWith(cs, "run_status", map[string]any{"id": id, "wait_seconds": 45}, false)
		time.Sleep(time.Second)
		agenttest.Decide(t, e, id, true)
		st = <-ch
		if took := time.Since(began); st.IsError || !strings.Contains(texts(st), "stdout:\n42\n") || took > 30*time.Second {
			t.Errorf("run_status with wait_seconds: isError %t after %v, text %q; want the result soon after the approval", st.IsError, took, texts(st))
		}
		if bad := <-callWith(cs, "run_status", map[string]any{"id": id, "wait_seconds": 3600}, false); !bad.IsError || !strings.Contains(texts(bad), "ToolUsageError") {
			t.Errorf("wait_seconds 3600: isError %t, text %q; want a ToolUsageError", bad.IsError, texts(bad))
		}
	})
	t.Run("run_status of a waiting run names the start-up warnings reviewers see", func(t *testing.T) {
		started, err := e.Client.Start(ctx, guard.Request{Code: "import json\n", Settings: guard.Settings{
			Files: map[string][]byte{
				"json.py": []byte("loads = eval\n"), "sitecustomize.py": []byte("import os\n"),
			},
		}}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		var st *mcp.CallToolResult
		for time.Now().Before(deadline) {
			if st = <-call(cs, "run_status", map[string]any{"id": started.WorkflowID}); strings.Contains(texts(st), mcpserverStillWaiting) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, want := range []string{"WARNING shown to reviewers: 2 input file(s)", "input file json.py: module json shadows", "input file sitecustomize.py: module sitecustomize: site imports it"} {
			if !strings.Contains(texts(st), want) {
				t.Errorf("run_status text %q lacks %q", texts(st), want)
			}
		}
		agenttest.Decide(t, e, started.WorkflowID, false)
	})
	t.Run("a coding declaration other than UTF-8 is a ToolUsageError naming the line", func(t *testing.T) {
		res := <-call(cs, "run_code", map[string]any{"code": "# -*- coding: unicode_escape -*-\n# \\u000aimport os\nprint('hi')\n"})
		if !res.IsError || !strings.Contains(texts(res), "ToolUsageError") || !strings.Contains(texts(res), "code line 1: coding declaration") {
			t.Errorf("isError %t, text %q; want a ToolUsageError naming code line 1", res.IsError, texts(res))
		}
	})
	t.Run("a language that is not offered is a ToolUsageError", func(t *testing.T) {
		res := <-call(cs, "run_code", map[string]any{"code": "echo", "language": "sh"})
		if !res.IsError || !strings.Contains(texts(res), "ToolUsageError") {
			t.Errorf("isError %t, text %q; want a ToolUsageError", res.IsError, texts(res))
		}
	})
}

const mcpserverStillWaiting = "still waiting for approval"

// callTimeout bounds one tool call of these tests.
const callTimeout = 3 * time.Minute
