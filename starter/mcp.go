package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
	"github.com/sandboxflow/sandboxflow/internal/httpserve"
	"github.com/sandboxflow/sandboxflow/mcpserver"
)

// mcpMain serves the run_code and run_status tools, and the session tools (open_session,
// run_cell, cell_status, close_session), over MCP until ctx ends: on stdin/stdout by
// default, or as streamable HTTP with --http ADDR. Every setting but the code and its language is
// a flag here, never the model's. It returns the exit code: 2 for a usage error, 1 for a failure.
func mcpMain(ctx context.Context, args []string, _, stderr io.Writer) int {
	f, code, ok := parseMCPFlags(args, stderr)
	if !ok {
		return code
	}
	sc, err := client.Connect(ctx, f.c.conn, f.c.keyFile, f.c.taskQueue)
	if err != nil {
		fmt.Fprintln(stderr, "starter mcp:", err)
		return 1
	}
	defer sc.Close()
	sc = sc.WithReviewersFile(os.Getenv("SANDBOXFLOW_REVIEWERS"), os.Getenv("SANDBOXFLOW_PASSKEY_ORIGIN"))
	cfg := f.cfg
	cfg.Client = sc
	srv, err := mcpserver.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "starter mcp:", err)
		return cli.ExitUsage
	}
	if f.httpAddr == "" {
		err = srv.RunStdio(ctx)
	} else {
		err = serveMCPHTTP(ctx, srv, f.httpAddr, stderr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "starter mcp:", err)
		return 1
	}
	return 0
}

// mcpFlags is what starter mcp's flags say: the connection, where to serve, and the MCP
// server's configuration but its client.
type mcpFlags struct {
	c        *command
	httpAddr string
	cfg      mcpserver.Config
}

// parseMCPFlags parses starter mcp's flags; when it returns false the command ends with code
// (0 after -h, 2 for a usage error, which it printed).
func parseMCPFlags(args []string, stderr io.Writer) (f mcpFlags, code int, ok bool) {
	fs, c := serverFlags("mcp", stderr)
	var (
		httpAddr     = fs.String("http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio")
		wait         = fs.Duration("mcp-wait", mcpserver.DefaultWait, "how long a run_code or run_cell call without a progress token waits before returning the run's id (a call with one waits, sending progress, for --progress-wait)")
		progressWait = fs.Duration("progress-wait", 0, "how long a run_code or run_cell call with a progress token waits, sending progress, before returning the run's id (0: until the run or cell ends, which its approval deadline bounds)")
		progress     = fs.Duration("progress-interval", 5*time.Second, "how often a waiting call sends a progress notification")
		inboxURL     = fs.String("inbox-url", os.Getenv("SANDBOXFLOW_INBOX_URL"), "where reviewers decide, named in progress messages")
		langs        = fs.String("languages", guard.Python, "languages offered to the model, comma-separated")
		backend      = fs.String("backend", "", "the workers' backend, for the tool's description (local adds a warning)")
		timeout      = fs.Duration("timeout", 0, "each run's time limit (default: the policy's)")
		network      = fs.Bool("network", false, "ask for an open network (the workers' policy must allow it)")
		capture      = fs.Bool("capture-content", false, "let events carry code and output")
		agent        = fs.String("agent", "mcp", "metadata: the agent's name")
		sandboxTQ    = fs.String("sandbox-task-queue", "", "task queue of the sandbox activity (default: the workers')")
		egress       cli.Strings
		secrets      cli.Strings
		envs         = cli.Pairs{Flag: "--env"}
	)
	fs.Var(&egress, "allow-host", "a host the code may reach through the egress proxy (repeatable)")
	fs.Var(&secrets, "secret", "a worker secret the proxy adds for its host (repeatable)")
	fs.Var(&envs, "env", "env var NAME=VALUE every run gets (repeatable)")
	if code, ok := parseServerFlags(fs, args, stderr, "key-file", "inbox-url", "backend", "sandbox-task-queue", "http"); !ok {
		return f, code, false
	}
	if *progressWait < 0 {
		fmt.Fprintf(stderr, "starter mcp: --progress-wait %s is negative; give 0 (until the run ends) or a duration such as 10m\n", *progressWait)
		return f, cli.ExitUsage, false
	}
	languages, err := cli.List("languages", *langs)
	if err != nil {
		fmt.Fprintln(stderr, "starter mcp:", err)
		return f, cli.ExitUsage, false
	}
	base := guard.Request{Settings: guard.Settings{
		Limits: guard.Limits{Timeout: *timeout}, Network: *network, Egress: egress, Secrets: secrets, Env: envs.Map,
		CaptureContent: *capture, Metadata: guard.Metadata{Agent: *agent, RequestedBy: os.Getenv("USER")},
	}}
	return mcpFlags{c: c, httpAddr: *httpAddr, cfg: mcpserver.Config{
		Base: base, Languages: languages, Backend: *backend, SandboxTaskQueue: *sandboxTQ,
		Wait: *wait, ProgressWait: *progressWait, ProgressInterval: *progress, InboxURL: *inboxURL,
	}}, 0, true
}

// serveMCPHTTP serves streamable HTTP at /mcp (and /) until ctx ends.
func serveMCPHTTP(ctx context.Context, srv *mcpserver.Server, addr string, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp: listen on %s: %w", addr, err)
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
		slog.New(slog.NewTextHandler(stderr, nil)).Warn("the MCP endpoint has no authentication: anyone who reaches " +
			ln.Addr().String() + " can start runs (a reviewer still approves each); prefer 127.0.0.1")
	}
	// The SDK refuses a Host that is not loopback on a loopback listener (DNS rebinding); a web
	// page of another origin is refused too (its browser says so in Sec-Fetch-Site or Origin),
	// while MCP clients, which are not browsers, send neither.
	h := http.NewCrossOriginProtection().Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, nil))
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "starter mcp: streamable HTTP on http://%s/mcp\n", ln.Addr())
	if err := httpserve.Serve(ctx, hs, ln); err != nil {
		return fmt.Errorf("mcp: serve: %w", err)
	}
	return nil
}
