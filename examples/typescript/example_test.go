//go:build integration

// Package typescript_test runs the TypeScript example against a real server and worker when node
// and npm are installed.
package typescript_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/agenttest"
)

func TestIntegrationTypeScriptExample(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("SANDBOXFLOW_REQUIRE_DOCKER") != "" {
				t.Fatalf("the TypeScript example needs %s on PATH (make setup installs nodejs and npm)", tool)
			}
			t.Skipf("the TypeScript example needs %s on PATH (.ci/run installs nodejs and npm)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"npm", "ci", "--no-audit", "--no-fund"}, {"node_modules/.bin/tsc"}} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	e := agenttest.Setup(t)
	cmd := exec.CommandContext(ctx, "node", "dist/run.js")
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+e.Address, "TEMPORAL_NAMESPACE="+e.Namespace, "SANDBOXFLOW_TASK_QUEUE="+e.TaskQueue)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(prefix string) string {
		t.Helper()
		for line := range lines {
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
		_ = cmd.Wait()
		t.Fatalf("the example ended without a line starting %q", prefix)
		return ""
	}

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
	next("sandboxflow-approval-statement v1")
	for _, field := range []string{"workflow_id: " + started.WorkflowID, "run_id: " + started.RunID, "digest: " + started.Digest, "decision: approve"} {
		if line := next(strings.SplitN(field, " ", 2)[0]); line != field {
			t.Errorf("statement line %q; want %q", line, field)
		}
	}
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
	if err := cmd.Wait(); err != nil {
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
