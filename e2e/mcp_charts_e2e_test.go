//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// tsExamples is examples/typescript installed and compiled in a folder of this test binary's own:
// the examples' own tests install into examples/typescript meanwhile, and npm ci empties
// node_modules before it fills it.
var tsExamples struct {
	once sync.Once
	dir  string
	err  error
}

// typescriptExamples returns the folder that holds examples/typescript's compiled dist/, built
// from its package.json, lock file, tsconfig.json and sources once per test binary.
func typescriptExamples(t *testing.T) string {
	t.Helper()
	need.Need(t, need.Node)
	tsExamples.once.Do(func() {
		tsExamples.dir, tsExamples.err = buildTypeScriptExamples()
	})
	if tsExamples.err != nil {
		t.Fatal(tsExamples.err)
	}
	return tsExamples.dir
}

func buildTypeScriptExamples() (string, error) {
	dir, err := os.MkdirTemp("", "sandboxflow-ts-")
	if err != nil {
		return "", err
	}
	src := filepath.Join("..", "examples", "typescript")
	entries, err := os.ReadDir(src)
	if err != nil {
		return dir, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(name, ".ts") || name == "package.json" || name == "package-lock.json" || name == "tsconfig.json") {
			b, err := os.ReadFile(filepath.Join(src, name))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
			}
			if err != nil {
				return dir, err
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"npm", "ci", "--no-audit", "--no-fund", "--prefer-offline"}, {"node_modules/.bin/tsc"}} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return dir, fmt.Errorf("examples/typescript: %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return dir, nil
}

// nodeExample is a running example's stdout, line by line.
type nodeExample struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
}

// startNode runs `node ARGS...` in dir with env added to the test's, killed when ctx ends or
// the test does.
func startNode(t *testing.T, ctx context.Context, dir string, env []string, args ...string) *nodeExample {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &nodeExample{t: t, cmd: cmd, lines: make(chan string, 16)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		defer close(n.lines)
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				n.lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				_, _ = io.Copy(io.Discard, r)
				return
			}
		}
	}()
	return n
}

// next returns the next line that starts with prefix, skipping the others.
func (n *nodeExample) next(prefix string) string {
	n.t.Helper()
	for line := range n.lines {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	n.t.Fatalf("node %v ended (%v) without a line starting %q", n.cmd.Args[1:2], n.cmd.Wait(), prefix)
	return ""
}

// value decodes the JSON after prefix on the next line that starts with it.
func (n *nodeExample) value(prefix string, v any) {
	n.t.Helper()
	if err := json.Unmarshal([]byte(strings.TrimPrefix(n.next(prefix), prefix)), v); err != nil {
		n.t.Fatalf("%s: %v", prefix, err)
	}
}

// mcpContent is an MCP content block as the TypeScript SDK read it, in part.
type mcpContent struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Data     string `json:"data"`
	MIMEType string `json:"mimeType"`
}

// mcpResult is a run's or a cell's result as run_code's and run_cell's structured content carry
// it, in part.
type mcpResult struct {
	OK      bool           `json:"ok"`
	Stdout  string         `json:"stdout"`
	Stderr  string         `json:"stderr"`
	Outputs []guard.Output `json:"outputs"`
}

// waitingRun is run_code's progress while the run waits: its id and its digest.
var waitingRun = regexp.MustCompile(`run (sandbox-[0-9a-f-]+) \(digest ([^)\s]+)\)`)

// TestMCPChartsThroughTheBinaries runs the official MCP SDK for TypeScript (examples/typescript's
// mcp.ts and session.ts, given the code to run) against `starter mcp` and worker --dev with the
// Docker backend (runc) in the data image. run_code of pandas and matplotlib code that shows a
// 6x4-inch, 100-dpi line chart with plt.show(), approved with `starter approve`, answers with an
// image content block whose base64 decodes to a 600x400 PNG; a session's cell that ends with a
// DataFrame answers with the table as text and lists the table output in its structured result.
func TestMCPChartsThroughTheBinaries(t *testing.T) {
	dir := typescriptExamples(t)
	w := startChartWorker(t, "e2e-mcp-charts")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mcp := []string{w.starter.bin, "mcp", "--address", w.addr, "--task-queue", w.queue, "--mcp-wait", "3m", "--progress-interval", "500ms"}

	code := revenueFrame + revenueChart + "plt.show()\nprint(\"total=%.2f\" % df[\"revenue\"].sum())\n"
	run := startNode(t, ctx, dir, []string{"SANDBOXFLOW_EXAMPLE_CODE=" + code}, append([]string{"dist/mcp.js", "stdio"}, mcp...)...)
	var waiting []string
	for waiting == nil {
		var progress string
		run.value("PROGRESS ", &progress)
		waiting = waitingRun.FindStringSubmatch(progress)
	}
	waitPending(t, w.starter, waiting[1])
	var decided struct{ State string }
	w.starter.mustJSON(&decided, "approve", waiting[1], "--digest", waiting[2])
	var res struct {
		IsError    bool         `json:"isError"`
		Content    []mcpContent `json:"content"`
		Structured mcpResult    `json:"structuredContent"`
	}
	run.value("RESULT ", &res)
	if res.IsError || !res.Structured.OK || !strings.Contains(res.Structured.Stdout, "total=95.25") {
		t.Fatalf("run_code: isError %t, ok %t, stdout %q, stderr %q; want the chart code's output", res.IsError, res.Structured.OK, res.Structured.Stdout, res.Structured.Stderr)
	}
	var images int
	for _, c := range res.Content {
		if c.Type != "image" {
			continue
		}
		images++
		raw, err := base64.StdEncoding.DecodeString(c.Data)
		if err != nil {
			t.Fatalf("the image block's data is not base64: %v", err)
		}
		img, err := png.Decode(bytes.NewReader(raw))
		if c.MIMEType != "image/png" || err != nil {
			t.Fatalf("image block of type %s (%d bytes): %v; want a PNG", c.MIMEType, len(raw), err)
		}
		if size := img.Bounds().Size(); size.X != chartWidth || size.Y != chartHeight {
			t.Errorf("the chart is %dx%d pixels; want %dx%d (6x4 inches at 100 dpi)", size.X, size.Y, chartWidth, chartHeight)
		}
	}
	if images != 1 || len(res.Structured.Outputs) != 1 || res.Structured.Outputs[0].Source != guard.OutputFigure {
		t.Errorf("%d image blocks, structured outputs %+v; want the one figure plt.show() showed", images, res.Structured.Outputs)
	}
	if err := run.cmd.Wait(); err != nil {
		t.Errorf("mcp.js exited with %v", err)
	}

	cells, err := json.Marshal([]map[string]string{{"language": guard.Python, "code": revenueFrame + "df\n"}})
	if err != nil {
		t.Fatal(err)
	}
	session := startNode(t, ctx, dir, []string{"SANDBOXFLOW_EXAMPLE_CELLS=" + string(cells)}, append([]string{"dist/session.js"}, mcp...)...)
	var opened struct {
		SessionID string `json:"session_id"`
	}
	session.value("SESSION ", &opened)
	w.waitCell(opened.SessionID, 1, time.Minute)
	w.starter.mustJSON(&decided, "approve", opened.SessionID, "--cell", "1")
	var cell struct {
		IsError bool         `json:"isError"`
		Content []mcpContent `json:"content"`
		Result  mcpResult    `json:"result"`
	}
	session.value("CELL 1 ", &cell)
	if cell.IsError || !cell.Result.OK {
		t.Fatalf("run_cell: isError %t, %+v; want the cell's result", cell.IsError, cell)
	}
	var table string
	for _, c := range cell.Content {
		if c.Type == "text" && strings.Contains(c.Text, "table, 6 rows") {
			table = c.Text
		}
	}
	for _, want := range []string{"revenue", "Jun", "21.0"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table as text lacks %q:\n%s\n(content %+v)", want, table, cell.Content)
		}
	}
	var tables int
	for _, o := range cell.Result.Outputs {
		if o.MIME == guard.MIMETable && o.Source == guard.OutputValue {
			tables++
		}
	}
	if tables != 1 {
		t.Errorf("structured outputs %+v; want the DataFrame as one %s output", cell.Result.Outputs, guard.MIMETable)
	}
	var closed struct{ End string }
	session.value("CLOSED ", &closed)
	if err := session.cmd.Wait(); err != nil || closed.End != "closed" {
		t.Errorf("session.js: closed %+v, exit %v; want the session closed", closed, err)
	}
}
