package mcpserver

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// waited is what a tool call waits for, a run or a cell: how to wait for its end, follow its
// output and say how it stands, and what to return once it ended or outlived Config.Wait.
type waited[T any] struct {
	// await waits for the end, within the context it is given (bounded by Config.Wait).
	await func(ctx context.Context) (T, error)
	// live follows its output.
	live *liveOutput
	// progress says what it waits for.
	progress func(ctx context.Context) string
	// stillWaiting is the answer when it outlived Config.Wait.
	stillWaiting func(ctx context.Context) *mcp.CallToolResult
	// content is the answer once it ended.
	content func(ctx context.Context, end T) *mcp.CallToolResult
	// result is the result end holds (nil when none), which the live output sent as progress
	// must match.
	result func(end T) *guard.Result
}

// checkedLive is w's content for end, with a warning when the live output sent as progress is not
// what its result holds (client.LiveCursor.Verify): heartbeat details are not signed.
func (w waited[T]) checkedLive(ctx context.Context, end T) *mcp.CallToolResult {
	out := w.content(ctx, end)
	if res := w.result(end); res != nil && out != nil {
		if err := w.live.cur.Verify(*res); err != nil {
			out.Content = append(out.Content, &mcp.TextContent{Text: "WARNING: the live output sent as progress is not this result's: " + err.Error()})
		}
	}
	return out
}

// waitLimit is how long a tool call waits for what it started: Config.Wait when the client sent
// no progress token (it may time the call out without hearing from us), Config.ProgressWait when
// it did (progress keeps it alive; zero is until the run or cell ends, which its approval deadline
// bounds).
func (s *Server) waitLimit(req *mcp.CallToolRequest) time.Duration {
	if req.Params.GetProgressToken() == nil || req.Session == nil {
		return s.cfg.Wait
	}
	return s.cfg.ProgressWait
}

// minRetry is the least time between two waits of one call when the first ended early with a
// deadline error, so an RPC that keeps failing at once does not spin.
const minRetry = time.Second

// waitWithProgress waits for w up to limit (zero: until it ends or the client cancels the call),
// notifying progress (and live output) to a client that gave a progress token, and returns its
// content, the typed error or "still waiting". Each wait for the end is bounded by Config.Wait
// and repeated, so a long poll that the server or an RPC deadline ends is not the call's end.
func waitWithProgress[T any](ctx context.Context, s *Server, req *mcp.CallToolRequest, limit time.Duration, w waited[T]) (*mcp.CallToolResult, error) {
	waitCtx, cancel := context.WithCancel(ctx)
	if limit > 0 {
		waitCtx, cancel = context.WithTimeout(ctx, limit)
	}
	defer cancel()
	type outcome struct {
		end T
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		for {
			began := time.Now()
			attempt, stop := context.WithTimeout(waitCtx, s.cfg.Wait)
			end, err := w.await(attempt)
			ended := err != nil && waitEnded(attempt, err)
			stop()
			if !ended || waitCtx.Err() != nil {
				done <- outcome{end, err}
				return
			}
			if d := time.Since(began); d < minRetry {
				select {
				case <-waitCtx.Done():
					done <- outcome{end, err}
					return
				case <-time.After(minRetry - d):
				}
			}
		}
	}()
	token := req.Params.GetProgressToken()
	tick := time.NewTicker(s.cfg.ProgressInterval)
	defer tick.Stop()
	liveTick := time.NewTicker(LivePoll)
	defer liveTick.Stop()
	step := 0
	notify := func(msg string) {
		if token == nil || req.Session == nil {
			return
		}
		step++
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: float64(step), Message: msg,
		})
	}
	notify(w.progress(ctx))
	for {
		select {
		case <-liveTick.C:
			if token != nil && req.Session != nil {
				for _, m := range w.live.messages(ctx) {
					notify(m)
				}
			}
		case o := <-done:
			if o.err != nil && ctx.Err() == nil && waitEnded(waitCtx, o.err) {
				return w.stillWaiting(ctx), nil
			}
			if o.err != nil {
				return errorResult(o.err), nil
			}
			return w.checkedLive(ctx, o.end), nil
		case <-tick.C:
			notify(w.progress(ctx))
		}
	}
}

// progressMessage says what label (a run, a cell of a session) in state waits for, with its
// page in the inbox (page) when one is configured. waiting says the state is a wait for a
// reviewer.
func (s *Server) progressMessage(label, digest, state, page string, waiting bool) string {
	switch {
	case waiting:
		msg := fmt.Sprintf("waiting for a reviewer to approve %s (digest %s)", label, digest)
		if page != "" {
			msg += "; review it at " + page
		}
		return msg
	case state == contract.StatusRunning:
		return fmt.Sprintf("approved; %s is running", label)
	default:
		return fmt.Sprintf("%s is %s", label, state)
	}
}

// stillWaitingResult is a call's answer when what it waited for outlived its wait: text, its
// page in the inbox (page) when one is configured, then tail; structured as its structured
// content.
func (s *Server) stillWaitingResult(text, page, tail string, structured map[string]any) *mcp.CallToolResult {
	if page != "" {
		text += " Reviewers decide at " + page + "."
		structured["review_url"] = page
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text + tail}},
		StructuredContent: structured,
	}
}

// askAgainLater is a status call's answer for label that neither waits for a reviewer nor ended.
func askAgainLater(label, state string, structured map[string]any) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s is %s; ask again later", label, state)}},
		StructuredContent: structured,
	}
}

// runPage is the run's page in the inbox, or "" when no inbox is configured.
func (s *Server) runPage(id string) string {
	if s.cfg.InboxURL == "" {
		return ""
	}
	return strings.TrimRight(s.cfg.InboxURL, "/") + "/run/" + url.PathEscape(id)
}

// cellPage is the cell's place on its session's page in the inbox, or "" when no inbox is
// configured.
func (s *Server) cellPage(sessionID string, cell int) string {
	if s.cfg.InboxURL == "" {
		return ""
	}
	return fmt.Sprintf("%s/session/%s#cell-%d", strings.TrimRight(s.cfg.InboxURL, "/"), url.PathEscape(sessionID), cell)
}
