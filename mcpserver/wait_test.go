package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Live output a namespace writer recorded as heartbeat details, sent as progress, that the result
// does not hold is flagged in the answer: only the result is signed. Output the result holds is
// not.
func TestCheckedLiveFlagsOutputTheResultDoesNotHold(t *testing.T) {
	for _, tc := range []struct {
		shown, result string
		flagged       bool
	}{
		{"all 42 tests passed\n", "1 test failed\n", true},
		{"1 test", "1 test failed\n", false},
	} {
		w := waited[guard.Result]{
			live:    &liveOutput{},
			content: func(context.Context, guard.Result) *mcp.CallToolResult { return &mcp.CallToolResult{} },
			result:  func(res guard.Result) *guard.Result { return &res },
		}
		w.live.cur.Take("7", contract.LiveOutput{Seq: 1, Stdout: contract.LiveChunk{Offset: 0, Total: int64(len(tc.shown)), Bytes: []byte(tc.shown)}})
		out := w.checkedLive(context.Background(), guard.Result{Stdout: []byte(tc.result)})
		flagged := false
		for _, c := range out.Content {
			if tx, ok := c.(*mcp.TextContent); ok && strings.Contains(tx.Text, "WARNING: the live output sent as progress is not this result's") {
				flagged = true
			}
		}
		if flagged != tc.flagged {
			t.Errorf("live %q against result %q: flagged %v; want %v", tc.shown, tc.result, flagged, tc.flagged)
		}
	}
}

// TestWaitReturnsAnErrorAtOnce: an error that is not the end of one long poll (a denial) ends the
// call at once, and one that is (a deadline) is waited through until the end comes.
func TestWaitReturnsAnErrorAtOnce(t *testing.T) {
	s := &Server{cfg: Config{Wait: 100 * time.Millisecond, ProgressInterval: time.Second}}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}
	denied := &guard.ApprovalDenied{Reviewer: "alice"}
	calls := 0
	w := waited[int]{
		await: func(ctx context.Context) (int, error) {
			calls++
			if calls < 3 {
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return 0, denied
		},
		live:         &liveOutput{},
		progress:     func(context.Context) string { return "waiting" },
		stillWaiting: func(context.Context) *mcp.CallToolResult { return &mcp.CallToolResult{} },
		content:      func(context.Context, int) *mcp.CallToolResult { return &mcp.CallToolResult{} },
		result:       func(int) *guard.Result { return nil },
	}
	began := time.Now()
	res, err := waitWithProgress(context.Background(), s, req, 0, w)
	if err != nil || !res.IsError || calls != 3 {
		t.Fatalf("got %+v, %v after %d waits; want the denial after 3", res, err, calls)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("took %v; want the denial at once", took)
	}
}
