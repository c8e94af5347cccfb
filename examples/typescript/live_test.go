//go:build integration

package typescript_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
)

var printedAt = regexp.MustCompile(`line (\d+) at ([0-9.]+)`)

// TestIntegrationTypeScriptMCPLiveOutput runs live.ts, built on the official MCP SDK for
// TypeScript, against `starter mcp` over stdio with a real Docker sandbox: while the approved code
// prints a line every 300 ms, the SDK's progress notifications carry the lines (line 1 within a
// second of its printing, long before the code ends), with the ANSI and OSC sequences the code
// printed as escaped text, never as raw control bytes; then the result.
func TestIntegrationTypeScriptMCPLiveOutput(t *testing.T) {
	build(t)
	e := sessionenv.Setup(t)
	out := run(t, node(t, "dist/live.js", e.Starter, "mcp", "--address", e.Address, "--namespace", e.Namespace,
		"--task-queue", e.TaskQueue, "--mcp-wait", "2m", "--progress-interval", "5s"))
	var p struct {
		At      float64 `json:"at"`
		Message string  `json:"message"`
	}
	out.value(t, "PROGRESS ", &p)
	m := runID.FindStringSubmatch(p.Message)
	if m == nil {
		t.Fatalf("first progress %q names no run", p.Message)
	}
	agenttest.Decide(t, e, m[1], true)
	var live []string
	firstLate := time.Duration(-1)
	for {
		line := out.next(t, "")
		if strings.HasPrefix(line, "RESULT ") {
			var res toolResult
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "RESULT ")), &res); err != nil || res.IsError || !strings.Contains(res.text(), "line 10 at") {
				t.Fatalf("result %s: %v", line, err)
			}
			break
		}
		if !strings.HasPrefix(line, "PROGRESS ") {
			continue
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "PROGRESS ")), &p); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p.Message, "live stdout (unsigned): ") && !strings.HasPrefix(p.Message, "live stderr (unsigned): ") {
			continue
		}
		live = append(live, p.Message)
		for _, lm := range printedAt.FindAllStringSubmatch(p.Message, -1) {
			if lm[1] == "1" {
				ts, _ := strconv.ParseFloat(lm[2], 64)
				firstLate = time.Duration((p.At - ts) * float64(time.Second))
			}
		}
	}
	all := strings.Join(live, "")
	t.Logf("%d output notifications; line 1 arrived %s after its printing", len(live), firstLate)
	if firstLate < 0 || firstLate > time.Second {
		t.Errorf("line 1 arrived %s after its printing; want a notification within 1 s", firstLate)
	}
	for i := 1; i <= 10; i++ {
		if !strings.Contains(all, "line "+strconv.Itoa(i)+" at") && i < 10 {
			t.Errorf("line %d was in no progress notification: %q", i, all)
		}
	}
	if !strings.Contains(all, `red \x1b[31mX\x1b[0m title \x1b]0;pwned\x07`) || strings.ContainsAny(all, "\x1b\x07") {
		t.Errorf("the escape sequences did not arrive as escaped text: %q", all)
	}
}
