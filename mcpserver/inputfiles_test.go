package mcpserver

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
)

func TestParseArgumentsReadsInputFiles(t *testing.T) {
	s := &Server{cfg: Config{Languages: []string{guard.Python}}}
	a, err := s.parseArguments([]byte(`{"code":"x","input_files":{"data.csv":"a,b\n1,2\n","raw.bin":{"base64":"AP8B"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(a.InputFiles["data.csv"]); got != "a,b\n1,2\n" {
		t.Errorf("data.csv %q; want the text", got)
	}
	if got := []byte(a.InputFiles["raw.bin"]); !bytes.Equal(got, []byte{0, 255, 1}) {
		t.Errorf("raw.bin %v; want the base64's bytes", got)
	}
	for name, raw := range map[string]string{
		"a number":                `{"code":"x","input_files":{"a":1}}`,
		"bad base64":              `{"code":"x","input_files":{"a":{"base64":"!!"}}}`,
		"an unknown field":        `{"code":"x","input_files":{"a":{"base64":"AA==","mode":"0755"}}}`,
		"no base64 in the object": `{"code":"x","input_files":{"a":{}}}`,
	} {
		if _, err := s.parseArguments([]byte(raw)); guard.TypeOf(err) != guard.TypeToolUsageError {
			t.Errorf("%s: %v; want a ToolUsageError", name, err)
		}
	}
}

func TestRunCodeSchemaOffersInputFiles(t *testing.T) {
	s := &Server{cfg: Config{Languages: []string{guard.Python}}}
	tool, err := s.runCodeTool()
	if err != nil {
		t.Fatal(err)
	}
	props := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
	if _, ok := props["input_files"]; !ok || props["code"] == nil {
		t.Errorf("properties %v; want code and input_files", props)
	}
	if tool.Name != client.ToolName {
		t.Errorf("name %q; want %q", tool.Name, client.ToolName)
	}
}

func TestLinksNameTheRunsOwnPage(t *testing.T) {
	s := &Server{cfg: Config{InboxURL: "https://inbox.example/"}}
	if got, want := s.runPage("sandbox-1"), "https://inbox.example/run/sandbox-1"; got != want {
		t.Errorf("run page %q; want %q", got, want)
	}
	if got, want := s.cellPage("session-1", 3), "https://inbox.example/session/session-1#cell-3"; got != want {
		t.Errorf("cell page %q; want %q", got, want)
	}
	if msg := s.progressMessage("run sandbox-1", "d", "awaiting_approval", s.runPage("sandbox-1"), true); !strings.Contains(msg, "https://inbox.example/run/sandbox-1") {
		t.Errorf("progress %q lacks the run's page", msg)
	}
	if (&Server{}).runPage("sandbox-1") != "" {
		t.Error("a run page without an inbox")
	}
}

func TestStatusWaitIsBounded(t *testing.T) {
	for _, tc := range []struct {
		seconds int
		want    time.Duration
		ok      bool
	}{{0, 0, true}, {50, 50 * time.Second, true}, {51, 0, false}, {-1, 0, false}} {
		got, err := statusWait(StatusToolName, tc.seconds)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("wait_seconds %d: got %v, %v; want %v, ok %t", tc.seconds, got, err, tc.want, tc.ok)
		}
	}
}

func TestWaitLimit(t *testing.T) {
	s := &Server{cfg: Config{Wait: 50 * time.Second}}
	plain := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}, Session: &mcp.ServerSession{}}
	if got := s.waitLimit(plain); got != 50*time.Second {
		t.Errorf("without a progress token: %v; want Config.Wait", got)
	}
	withToken := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}, Session: &mcp.ServerSession{}}
	withToken.Params.SetProgressToken("t")
	if got := s.waitLimit(withToken); got != 0 {
		t.Errorf("with a progress token: %v; want 0 (until the end)", got)
	}
}
