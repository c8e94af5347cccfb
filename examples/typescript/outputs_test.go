//go:build integration

package typescript_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/httpservice"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
)

// TestIntegrationTypeScriptMCPOutputs runs mcp.ts (the official MCP SDK for TypeScript) against
// `starter mcp` over stdio, with a worker whose backend answers with what the code showed: a 5×3
// PNG figure and a table. run_code's result, as the TypeScript SDK read it, holds the figure as
// an image content block whose base64 data decodes to that PNG, and the table as text.
func TestIntegrationTypeScriptMCPOutputs(t *testing.T) {
	build(t)
	var fig bytes.Buffer
	if err := png.Encode(&fig, image.NewRGBA(image.Rect(0, 0, 5, 3))); err != nil {
		t.Fatal(err)
	}
	table := `{"columns":["name","score"],"rows":[["ada","10"],["bob","7"]]}`
	b, err := httpservice.New("outputs", func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		return guard.Result{Stdout: []byte("hello from an MCP client\n"), Outputs: []guard.Output{
			{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Data: fig.Bytes()},
			{Index: 2, Source: guard.OutputDisplay, MIME: guard.MIMETable, Data: []byte(table)},
		}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e := agenttest.Setup(t, agenttest.Options{Backend: b, Policy: &guard.Policy{ApprovalTimeout: time.Hour}})
	out := run(t, node(t, "dist/mcp.js", "stdio", e.Starter, "mcp", "--address", e.Address, "--namespace", e.Namespace,
		"--task-queue", e.TaskQueue, "--mcp-wait", "2m", "--progress-interval", "200ms"))
	var id, progress string
	for id == "" {
		out.value(t, "PROGRESS ", &progress)
		if m := runID.FindStringSubmatch(progress); m != nil {
			id = m[1]
		}
	}
	agenttest.Decide(t, e, id, true)
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Data     string `json:"data"`
			MIMEType string `json:"mimeType"`
		} `json:"content"`
		Structured struct {
			Outputs []guard.Output `json:"outputs"`
		} `json:"structuredContent"`
	}
	out.value(t, "RESULT ", &res)
	if res.IsError {
		t.Fatalf("run_code: %+v", res)
	}
	var images, tables int
	for _, c := range res.Content {
		switch {
		case c.Type == "image":
			images++
			raw, err := base64.StdEncoding.DecodeString(c.Data)
			if err != nil {
				t.Fatalf("the image block's data is not base64: %v", err)
			}
			cfg, err := png.DecodeConfig(bytes.NewReader(raw))
			if c.MIMEType != "image/png" || err != nil || cfg.Width != 5 || cfg.Height != 3 || !bytes.Equal(raw, fig.Bytes()) {
				t.Errorf("image block %s: %+v, %v; want the 5×3 PNG figure", c.MIMEType, cfg, err)
			}
		case c.Type == "text" && strings.Contains(c.Text, "table, 2 rows × 2 columns"):
			tables++
			if !strings.Contains(c.Text, "name  score\nada   10\nbob   7\n") {
				t.Errorf("the table as text:\n%s\nwant it aligned", c.Text)
			}
		}
	}
	if images != 1 || tables != 1 {
		t.Errorf("content %+v; want one image and one table as text", res.Content)
	}
	if len(res.Structured.Outputs) != 2 || res.Structured.Outputs[0].Data != nil {
		t.Errorf("structured outputs %+v; want both listed, without their data", res.Structured.Outputs)
	}
}
