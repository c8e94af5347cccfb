package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// TestMCPProgressWaitFlag: --progress-wait reaches the MCP server's ProgressWait (zero, its
// default, waits until the run ends), and a negative one is a usage error that says what to give.
func TestMCPProgressWaitFlag(t *testing.T) {
	var stderr bytes.Buffer
	f, code, ok := parseMCPFlags(nil, &stderr)
	if !ok || f.cfg.ProgressWait != 0 {
		t.Fatalf("no flags: ProgressWait %s, code %d, ok %t (%s); want 0 (until the run ends)", f.cfg.ProgressWait, code, ok, stderr.String())
	}
	f, code, ok = parseMCPFlags([]string{"--progress-wait", "10m", "--mcp-wait", "20s"}, &stderr)
	if !ok || f.cfg.ProgressWait != 10*time.Minute || f.cfg.Wait != 20*time.Second {
		t.Fatalf("--progress-wait 10m --mcp-wait 20s: ProgressWait %s, Wait %s, code %d, ok %t (%s); want 10m0s and 20s", f.cfg.ProgressWait, f.cfg.Wait, code, ok, stderr.String())
	}
	stderr.Reset()
	_, code, ok = parseMCPFlags([]string{"--progress-wait", "-1s"}, &stderr)
	if ok || code != cli.ExitUsage || !strings.Contains(stderr.String(), "--progress-wait -1s is negative") {
		t.Errorf("--progress-wait -1s: code %d, ok %t, stderr %q; want a usage error saying it is negative", code, ok, stderr.String())
	}
}
