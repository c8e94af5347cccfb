package mcpserver

import (
	"context"
	"fmt"
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

// waitWithProgress waits for w up to Config.Wait, notifying progress (and live output) to a
// client that gave a progress token, and returns its content, the typed error or "still
// waiting".
func waitWithProgress[T any](ctx context.Context, s *Server, req *mcp.CallToolRequest, w waited[T]) (*mcp.CallToolResult, error) {
	waitCtx, cancel := context.WithTimeout(ctx, s.cfg.Wait)
	defer cancel()
	type outcome struct {
		end T
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		end, err := w.await(waitCtx)
		done <- outcome{end, err}
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

// progressMessage says what label (a run, a cell of a session) in state waits for, with the
// inbox's address when one is configured. waiting says the state is a wait for a reviewer.
func (s *Server) progressMessage(label, digest, state string, waiting bool) string {
	switch {
	case waiting:
		msg := fmt.Sprintf("waiting for a reviewer to approve %s (digest %s)", label, digest)
		if s.cfg.InboxURL != "" {
			msg += "; review it at " + s.cfg.InboxURL
		}
		return msg
	case state == contract.StatusRunning:
		return fmt.Sprintf("approved; %s is running", label)
	default:
		return fmt.Sprintf("%s is %s", label, state)
	}
}

// stillWaitingResult is a call's answer when what it waited for outlived Config.Wait: text, the
// inbox's address when one is configured, then tail; structured as its structured content.
func (s *Server) stillWaitingResult(text, tail string, structured map[string]any) *mcp.CallToolResult {
	if s.cfg.InboxURL != "" {
		text += " Reviewers decide at " + s.cfg.InboxURL + "."
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
