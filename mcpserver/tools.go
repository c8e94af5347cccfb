package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/api/serviceerror"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// StillWaiting starts the text of a run_code call that returned before the run was decided.
const StillWaiting = "still waiting for approval"

// runCode starts a run and waits for it up to Config.Wait, sending progress meanwhile.
func (s *Server) runCode(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := s.parseArguments(req.Params.Arguments)
	if err != nil {
		return errorResult(err), nil
	}
	r, err := args.Request(s.cfg.Base)
	if err != nil {
		return errorResult(err), nil
	}
	started, err := s.cfg.Client.Start(ctx, r, client.StartOptions{SandboxTaskQueue: s.cfg.SandboxTaskQueue})
	if err != nil {
		return errorResult(err), nil
	}
	return s.wait(ctx, req, started.WorkflowID, started.Digest, s.waitLimit(req))
}

// wait waits for the run's result up to limit (zero: until it ends), notifying progress to a
// client that gave a progress token, and returns the result, the typed error or "still waiting".
func (s *Server) wait(ctx context.Context, req *mcp.CallToolRequest, id, digest string, limit time.Duration) (*mcp.CallToolResult, error) {
	return waitWithProgress(ctx, s, req, limit, waited[guard.Result]{
		await:        func(ctx context.Context) (guard.Result, error) { return s.cfg.Client.Result(ctx, id) },
		live:         &liveOutput{c: s.cfg.Client, id: id},
		progress:     func(ctx context.Context) string { return s.waitingMessage(ctx, id, digest) },
		stillWaiting: func(ctx context.Context) *mcp.CallToolResult { return s.stillWaiting(ctx, id, digest) },
		content:      func(_ context.Context, res guard.Result) *mcp.CallToolResult { return resultContent(id, res) },
		result:       func(res guard.Result) *guard.Result { return &res },
	})
}

// waitEnded reports whether err is the end of the wait rather than a failure of the run: the
// RPC's own deadline can fire a moment before the context's.
func waitEnded(waitCtx context.Context, err error) bool {
	var de *serviceerror.DeadlineExceeded
	return waitCtx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &de)
}

// waitingMessage says what the run waits for, with the inbox's address when one is configured.
func (s *Server) waitingMessage(ctx context.Context, id, digest string) string {
	state := contract.StatusAwaitingApproval
	if st, err := s.cfg.Client.Status(ctx, id); err == nil {
		state = st.State
	}
	waiting := state == contract.StatusAwaitingApproval || state == contract.StatusChecking
	return s.progressMessage("run "+id, digest, state, s.runPage(id), waiting)
}

// stillWaiting is what a call returns when the run outlived Config.Wait.
func (s *Server) stillWaiting(ctx context.Context, id, digest string) *mcp.CallToolResult {
	state := contract.StatusAwaitingApproval
	var (
		warnings []pysource.StartupWarning
		pkgs     []guard.Package
		policy   string
	)
	if st, err := s.cfg.Client.Status(ctx, id); err == nil {
		state, warnings, pkgs, policy = st.State, st.Request.Warnings, st.Request.Packages, policyText(st)
	}
	text := fmt.Sprintf("%s: run %s (digest %s) is %s. Call %s with {\"id\": %q, \"wait_seconds\": %d} for its result: it returns as soon as the run ends.",
		StillWaiting, id, digest, state, StatusToolName, id, MaxStatusWaitSeconds)
	structured := map[string]any{"id": id, "state": state, "digest": digest}
	if len(pkgs) > 0 {
		structured["packages"] = pkgs
	}
	return s.stillWaitingResult(text, s.runPage(id), startupWarningText(warnings)+policy+packagesText(pkgs), structured)
}

// packagesText tells the model which packages its reviewers approve with the code, each with
// its version and number of hashes. Empty for none.
func packagesText(pkgs []guard.Package) string {
	if len(pkgs) == 0 {
		return ""
	}
	parts := make([]string, 0, len(pkgs))
	for _, p := range pkgs {
		parts = append(parts, fmt.Sprintf("%s (%d hash(es))", p.Requirement(), len(p.Hashes)))
	}
	return " Packages reviewers approve with the code, installed before it runs: " + strings.Join(parts, ", ") + "."
}

// startupWarningText tells the model, in the words reviewers read, which input files of its
// request may run without the code calling them (pysource.StartupWarnings): reviewers are warned of
// them, and a run that needs none is easier to approve. Empty for none.
func startupWarningText(warnings []pysource.StartupWarning) string {
	if len(warnings) == 0 {
		return ""
	}
	parts := make([]string, 0, len(warnings))
	for _, w := range warnings {
		parts = append(parts, w.String())
	}
	return fmt.Sprintf(" WARNING shown to reviewers: %d input file(s) may run without the code calling them: %s.", len(warnings), strings.Join(parts, "; "))
}

// policyText tells the model what the operators' policy rules warn reviewers of and which
// group approvals the run still waits for; empty for none.
func policyText(st contract.Status) string {
	if st.Rules == nil {
		return ""
	}
	var b strings.Builder
	for _, w := range st.Rules.Warnings {
		fmt.Fprintf(&b, " WARNING shown to reviewers (policy rule): %s.", w)
	}
	if len(st.Missing) > 0 {
		fmt.Fprintf(&b, " The policy rules still need %s.", strings.Join(st.Missing, " and "))
	}
	return b.String()
}

// runStatus returns a run's state while it waits or runs, and its result or typed error once it
// ended; with wait_seconds it first waits that long for the end, with progress.
func (s *Server) runStatus(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		ID          string `json:"id"`
		WaitSeconds int    `json:"wait_seconds"`
	}
	dec := json.NewDecoder(strings.NewReader(string(req.Params.Arguments)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.ID == "" {
		return errorResult(&guard.ToolUsageError{Msg: fmt.Sprintf("run_status arguments: want {\"id\": \"<the id run_code returned>\", \"wait_seconds\": 0..%d}", MaxStatusWaitSeconds)}), nil
	}
	if !strings.HasPrefix(in.ID, client.WorkflowIDPrefix) {
		return errorResult(&guard.ToolUsageError{Msg: fmt.Sprintf("%q is not a run id: run ids start with %q", in.ID, client.WorkflowIDPrefix)}), nil
	}
	wait, err := statusWait(StatusToolName, in.WaitSeconds)
	if err != nil {
		return errorResult(err), nil
	}
	st, err := s.cfg.Client.Status(ctx, in.ID)
	if err != nil {
		return errorResult(fmt.Errorf("mcpserver: status of %s: %w", in.ID, err)), nil
	}
	switch st.State {
	case contract.StatusChecking, contract.StatusAwaitingApproval, contract.StatusRunning:
		if wait > 0 {
			return s.wait(ctx, req, in.ID, st.Request.Digest, wait)
		}
		if st.State == contract.StatusAwaitingApproval {
			return s.stillWaiting(ctx, in.ID, st.Request.Digest), nil
		}
		return askAgainLater("run "+in.ID, st.State, map[string]any{"id": in.ID, "state": st.State, "digest": st.Request.Digest}), nil
	}
	res, err := s.cfg.Client.Result(ctx, in.ID)
	if err != nil {
		return errorResult(err), nil
	}
	return resultContent(in.ID, res), nil
}

// MaxStatusWaitSeconds bounds the wait_seconds of run_status and cell_status: under the 60 s a
// client waits by default for an answer that sends no progress.
const MaxStatusWaitSeconds = 50

// statusWait is a status tool's wait_seconds as a duration, refused outside 0..MaxStatusWaitSeconds.
func statusWait(tool string, seconds int) (time.Duration, error) {
	if seconds < 0 || seconds > MaxStatusWaitSeconds {
		return 0, &guard.ToolUsageError{Msg: fmt.Sprintf("%s: wait_seconds %d: want 0 to %d", tool, seconds, MaxStatusWaitSeconds)}
	}
	return time.Duration(seconds) * time.Second, nil
}

// waitSecondsProp is the schema of wait_seconds.
func waitSecondsProp(what string) map[string]any {
	return map[string]any{"type": "integer", "minimum": 0, "maximum": MaxStatusWaitSeconds, "default": 0,
		"description": fmt.Sprintf("Optional: wait up to this many seconds (at most %d) for %s to end, returning as soon as it does, instead of answering at once. Use it rather than calling again and again.", MaxStatusWaitSeconds, what)}
}

// errorResult is a tool error the model reads: isError, the error's type and message as text, and
// the same as structured content.
func errorResult(err error) *mcp.CallToolResult {
	out := client.NewErrorOutput(err)
	text := out.Error.Type + ": " + out.Error.Message
	var (
		ad *guard.ApprovalDenied
		ar *guard.ApprovalRefused
	)
	switch {
	case errors.As(err, &ad) && ad.Reason == guard.DeniedExpired:
		text += " (nobody decided in time; the code did not run)"
	case errors.As(err, &ar):
		text += " (the sandbox host refused the approval; the code did not run, and asking again needs a new approval)"
	}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: out,
	}
}

// resultContent is a run's result: a summary line, stdout and stderr as text, what the code
// showed (outputContent), produced files as embedded resources, and the whole result (without
// file contents or output data) as structured content.
func resultContent(id string, r guard.Result) *mcp.CallToolResult {
	return resultContentAt("run "+id, runURI(id), r)
}

// runURI is where a run's produced files are named.
func runURI(id string) string { return "sandboxflow://runs/" + url.PathEscape(id) }

// resultContentAt is resultContent for what label names, with the produced files named under
// base.
func resultContentAt(label, base string, r guard.Result) *mcp.CallToolResult {
	summary := fmt.Sprintf("%s: %s, exit code %d, %d ms", label, r.Outcome, r.ExitCode, r.Duration.Milliseconds())
	if r.TimedOut {
		summary += " (timed out: try faster code)"
	}
	if r.FilesTruncated {
		summary += "; some produced files were dropped (limits or names)"
	}
	if len(r.Outputs) > 0 || r.OutputsTruncated {
		summary += fmt.Sprintf("; %d output(s) shown by the code, after stdout", shownThings(r.Outputs))
	}
	if e := r.Edit; e != nil {
		summary += fmt.Sprintf("; the code that ran is reviewer %s's edit of yours (digest %s, yours %s), not what you sent", e.Editor, e.Digest, e.OriginalDigest)
	}
	if rc := r.Recovered; rc != nil {
		summary += fmt.Sprintf("; recovered late (after a %s timeout): the sandbox host delivered it after the server lost its activity, and its receipt verified", rc.Timeout)
	}
	content := []mcp.Content{&mcp.TextContent{Text: summary}}
	content = append(content, &mcp.TextContent{Text: streamText("stdout", r.Stdout, r.StdoutTruncated)})
	if len(r.Stderr) > 0 || r.StderrTruncated {
		content = append(content, &mcp.TextContent{Text: streamText("stderr", r.Stderr, r.StderrTruncated)})
	}
	content = append(content, outputContent(r.Outputs, r.OutputsTruncated)...)
	for _, f := range r.Files {
		content = append(content, &mcp.EmbeddedResource{Resource: fileResourceAt(base, f)})
	}
	return &mcp.CallToolResult{Content: content, StructuredContent: withoutData(r)}
}

func streamText(name string, b []byte, truncated bool) string {
	text := name + ":\n" + strings.ToValidUTF8(string(b), "\uFFFD")
	if truncated {
		text += "\n[" + name + " truncated]"
	}
	return text
}

// fileResource is a produced file: text when it is valid UTF-8 of a text type, a blob otherwise,
// with a MIME type from its extension.
func fileResource(id string, f guard.File) *mcp.ResourceContents {
	return fileResourceAt(runURI(id), f)
}

// fileResourceAt is fileResource for a file named under base.
func fileResourceAt(base string, f guard.File) *mcp.ResourceContents {
	uri := base + "/files/" + (&url.URL{Path: f.Name}).EscapedPath()
	mt := mime.TypeByExtension(path.Ext(f.Name))
	isText := utf8.Valid(f.Content) && (mt == "" || strings.HasPrefix(mt, "text/") || strings.Contains(mt, "json") || strings.Contains(mt, "xml"))
	if mt == "" {
		mt = "application/octet-stream"
		if isText {
			mt = "text/plain; charset=utf-8"
		}
	}
	rc := &mcp.ResourceContents{URI: uri, MIMEType: mt}
	if isText {
		rc.Text = string(f.Content)
	} else {
		rc.Blob = f.Content
		if rc.Blob == nil {
			rc.Blob = []byte{}
		}
	}
	return rc
}
