//go:build integration

package typescript_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
)

// reviewDelay is how long the reviewer takes in TestIntegrationTypeScriptMCPWaitsForTheReviewer:
// longer than the SDK's default request timeout (60 s), so only progress keeps the call alive.
const reviewDelay = 90 * time.Second

// TestIntegrationTypeScriptMCPWaitsForTheReviewer runs wait.ts with the official MCP SDK for
// TypeScript against `starter mcp` over stdio: one run_code call gives a 100 KB CSV as an input
// file, the reviewer approves 90 s later, and the same call returns the run's sums of the CSV,
// with the SDK's default request timeout, kept alive by the server's progress notifications
// (every 5 s, the default) and resetTimeoutOnProgress. --mcp-wait is 10 s: it bounds only calls
// without a progress token. About 100 s.
func TestIntegrationTypeScriptMCPWaitsForTheReviewer(t *testing.T) {
	build(t)
	e := agenttest.Setup(t)
	out := run(t, node(t, "dist/wait.js", e.Starter, "mcp", "--address", e.Address, "--namespace", e.Namespace,
		"--task-queue", e.TaskQueue, "--mcp-wait", "10s", "--inbox-url", "http://127.0.0.1:9/inbox"))
	var expect struct {
		Rows, Total, Bytes int
	}
	out.value(t, "EXPECT ", &expect)
	if expect.Bytes < 100<<10 {
		t.Fatalf("the CSV is %d bytes; want 100 KB or more", expect.Bytes)
	}
	var id, progress string
	for id == "" {
		out.value(t, "PROGRESS ", &progress)
		if m := runID.FindStringSubmatch(progress); m != nil {
			id = m[1]
		}
	}
	if want := "http://127.0.0.1:9/inbox/run/" + id; !strings.Contains(progress, want) {
		t.Errorf("progress %q does not link to the run's page %s", progress, want)
	}
	time.Sleep(reviewDelay)
	agenttest.Decide(t, e, id, true)
	var got struct {
		Calls, Progress int
		Seconds         float64
		Result          toolResult
	}
	out.value(t, "RESULT ", &got)
	t.Logf("one call of %.0f s, %d progress notifications", got.Seconds, got.Progress)
	if got.Result.IsError || !strings.Contains(got.Result.text(), "stdout:\n"+strconv.Itoa(expect.Rows)+" "+strconv.Itoa(expect.Total)+"\n") {
		t.Errorf("run_code: isError %t, text %q; want the CSV's %d rows summing to %d", got.Result.IsError, got.Result.text(), expect.Rows, expect.Total)
	}
	if got.Calls != 1 || got.Seconds < reviewDelay.Seconds() || got.Progress < 10 {
		t.Errorf("%d call(s) of %.0f s with %d progress notifications; want one call outlasting the review, kept alive by progress", got.Calls, got.Seconds, got.Progress)
	}
	if err := out.cmd.Wait(); err != nil {
		t.Errorf("wait.js exited with %v", err)
	}
}
