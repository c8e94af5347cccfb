package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/mcpserver"
)

// mcpCmd serves the run_code and run_status tools over MCP: on stdin/stdout by default, or as
// streamable HTTP with --http ADDR. Every setting but the code and its language is a flag here.
func mcpCmd(ctx context.Context, args []string, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("starter mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addConnFlags(fs)
	var (
		httpAddr  = fs.String("http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio")
		wait      = fs.Duration("mcp-wait", mcpserver.DefaultWait, "how long one run_code call waits before returning the run's id")
		progress  = fs.Duration("progress-interval", 5*time.Second, "how often a waiting call sends a progress notification")
		inboxURL  = fs.String("inbox-url", os.Getenv("SANDBOXFLOW_INBOX_URL"), "where reviewers decide, named in progress messages")
		langs     = fs.String("languages", guard.Python, "languages offered to the model, comma-separated")
		backend   = fs.String("backend", "", "the workers' backend, for the tool's description (local adds a warning)")
		timeout   = fs.Duration("timeout", 0, "each run's time limit (default: the policy's)")
		network   = fs.Bool("network", false, "ask for an open network (the workers' policy must allow it)")
		capture   = fs.Bool("capture-content", false, "let events carry code and output")
		agent     = fs.String("agent", "mcp", "metadata: the agent's name")
		sandboxTQ = fs.String("sandbox-task-queue", "", "task queue of the sandbox activity (default: the workers')")
		egress    multiFlag
		secrets   multiFlag
		envs      multiFlag
	)
	fs.Var(&egress, "allow-host", "a host the code may reach through the egress proxy (repeatable)")
	fs.Var(&secrets, "secret", "a worker secret the proxy adds for its host (repeatable)")
	fs.Var(&envs, "env", "env var NAME=VALUE every run gets (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2, nil
	}
	base := guard.Request{
		Limits: guard.Limits{Timeout: *timeout}, Network: *network, Egress: egress, Secrets: secrets,
		CaptureContent: *capture, Metadata: guard.Metadata{Agent: *agent, RequestedBy: os.Getenv("USER")},
	}
	for _, e := range envs {
		name, value, ok := strings.Cut(e, "=")
		if !ok {
			return 2, fmt.Errorf("--env %q: want NAME=VALUE", e)
		}
		if base.Env == nil {
			base.Env = map[string]string{}
		}
		base.Env[name] = value
	}
	tc, sc, err := cf.dial(ctx)
	if err != nil {
		return 1, err
	}
	defer tc.Close()
	srv, err := mcpserver.New(mcpserver.Config{
		Client: sc, Base: base, Languages: strings.Split(*langs, ","), Backend: *backend,
		SandboxTaskQueue: *sandboxTQ, Wait: *wait, ProgressInterval: *progress, InboxURL: *inboxURL,
	})
	if err != nil {
		return 2, err
	}
	if *httpAddr == "" {
		return exitCode(srv.RunStdio(ctx))
	}
	return exitCode(serveMCPHTTP(ctx, srv, *httpAddr, stderr))
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
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, nil)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "starter mcp: streamable HTTP on http://%s/mcp\n", ln.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("mcp: serve: %w", err)
	}
	return nil
}

func exitCode(err error) (int, error) {
	if err != nil {
		return 1, err
	}
	return 0, nil
}
