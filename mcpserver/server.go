// Package mcpserver offers sandboxflow to agents as a Model Context Protocol server: the tool
// run_code starts a RunCode run, reports progress while a person reviews it, and returns the
// output as text, what the code showed as image and text blocks (outputs.go) and produced files
// as embedded resources; the tool run_status reads a run that
// outlived one call. The session tools keep one sandbox for a task: open_session opens it,
// run_cell runs one cell in it (each approved by a person, state kept between cells), cell_status
// reads a cell that outlived one call, and close_session removes it and lists every cell. Everything but the code and its language (limits, egress, env, secrets, the
// agent's name, the task queue and the languages offered) is the operator's, set in Config.
//
// The server never decides on a run: approvals come from reviewers, through their own tools.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
)

// StatusToolName is the name of the tool that reads a run by id.
const StatusToolName = "run_status"

// DefaultWait is how long one run_code call waits for its run before returning the run's id.
const DefaultWait = 50 * time.Second

// Config configures the server.
type Config struct {
	// Client starts and reads runs. Required.
	Client *client.Client
	// Base is the operator's request: limits, network, egress, env, secrets, capture_content and
	// metadata. The model's code and language replace only Base.Code and Base.Language.
	Base guard.Request
	// Languages are the languages offered to the model. Optional: defaults to ["python"].
	Languages []string
	// Backend names the workers' backend, for the tool's description. Optional.
	Backend string
	// SandboxTaskQueue is the sandbox activity's task queue. Optional: the workers' setting.
	SandboxTaskQueue string
	// Wait bounds how long a run_code or run_cell call from a client that sent no progress token
	// waits before it returns "still waiting for approval" with the run's id, and each long poll
	// of any wait. Optional: defaults to DefaultWait.
	Wait time.Duration
	// ProgressWait bounds how long a run_code or run_cell call from a client that sent a
	// progress token waits, sending progress every ProgressInterval meanwhile. Optional: zero
	// waits until the run or cell ends, which its approval deadline bounds (or the client
	// cancels the call).
	ProgressWait time.Duration
	// ProgressInterval is how often a waiting call sends a progress notification (to clients
	// that asked for progress). Optional: defaults to 5 s.
	ProgressInterval time.Duration
	// InboxURL is where reviewers decide (`starter inbox`); progress messages and "still
	// waiting" answers link to the run's page under it (/run/{id}, /session/{id}#cell-{n}).
	// Optional.
	InboxURL string
	// Version is reported to clients. Optional.
	Version string
}

// Server is the sandboxflow MCP server. Create it with New.
type Server struct {
	cfg Config
	mcp *mcp.Server
}

// New returns a server with the tools run_code, run_status and the session tools, or an error when the
// configuration is incomplete.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("mcpserver: Config.Client is required")
	}
	if len(cfg.Languages) == 0 {
		cfg.Languages = []string{guard.Python}
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 5 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{cfg: cfg}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "sandboxflow", Version: cfg.Version}, nil)
	tool, err := s.runCodeTool()
	if err != nil {
		return nil, err
	}
	s.mcp.AddTool(tool, s.runCode)
	s.mcp.AddTool(&mcp.Tool{
		Name: StatusToolName,
		Description: "Read a run_code run that was still waiting for approval when run_code returned: " +
			"its state, or its result once it ran.",
		InputSchema: object(map[string]any{
			"id":           map[string]any{"type": "string", "description": "The run's id, as run_code returned it."},
			"wait_seconds": waitSecondsProp("the run"),
		}, []string{"id"}),
	}, s.runStatus)
	s.sessionTools()
	return s, nil
}

// MCP returns the underlying go-sdk server, to run it on any transport.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// RunStdio serves one client on stdin and stdout until ctx ends or the client goes away.
func (s *Server) RunStdio(ctx context.Context) error {
	if err := s.mcp.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcpserver: stdio: %w", err)
	}
	return nil
}

// runCodeTool is run_code with the input schema of `starter tool-schema` (Anthropic's
// input_schema, which is also what OpenAI calls parameters) and input_files, which only MCP
// clients give.
func (s *Server) runCodeTool() (*mcp.Tool, error) {
	raw, err := client.ToolSchema(client.FormatAnthropic, client.ToolOptions{
		Languages: s.cfg.Languages, Timeout: s.cfg.Base.Limits.Timeout, Backend: s.cfg.Backend,
	})
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	var def struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(raw, &def); err != nil {
		return nil, fmt.Errorf("mcpserver: read the tool schema: %w", err)
	}
	var schema map[string]any
	if err := json.Unmarshal(def.InputSchema, &schema); err != nil {
		return nil, fmt.Errorf("mcpserver: read the tool's input schema: %w", err)
	}
	props, ok := schema["properties"].(map[string]any)
	if !ok {
		return nil, errors.New("mcpserver: the tool's input schema has no properties")
	}
	if _, ok := props["input_files"]; !ok {
		return nil, errors.New("mcpserver: the tool's input schema has no input_files")
	}
	return &mcp.Tool{Name: def.Name, Description: def.Description, InputSchema: schema}, nil
}

// parseArguments reads the model's arguments strictly: unknown fields and a language that is not
// offered are a ToolUsageError the model can correct.
func (s *Server) parseArguments(raw json.RawMessage) (RunCodeArguments, error) {
	var args RunCodeArguments
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return args, &guard.ToolUsageError{Msg: "run_code arguments: " + err.Error() + " (want {\"code\": ..." + s.languageHint() + ", \"input_files\": {\"name\": \"text\"}})"}
	}
	if args.Language == "" && len(s.cfg.Languages) == 1 {
		args.Language = s.cfg.Languages[0]
	}
	for _, l := range s.cfg.Languages {
		if args.Language == l {
			return args, nil
		}
	}
	return args, &guard.ToolUsageError{Msg: fmt.Sprintf("language %q is not offered; use one of %s", args.Language, strings.Join(s.cfg.Languages, ", "))}
}

func (s *Server) languageHint() string {
	if len(s.cfg.Languages) > 1 {
		return ", \"language\": " + strings.Join(s.cfg.Languages, "|")
	}
	return ""
}
