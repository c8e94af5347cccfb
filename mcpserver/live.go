package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// LivePoll is how often a waiting run_code or run_cell call reads the code's output while it
// runs, for a client that asked for progress: each new chunk is sent as a progress notification
// whose message is the chunk as escaped text (see liveMessage).
const LivePoll = 250 * time.Millisecond

// liveOutput follows one run's (cell 0) or one cell's live output for progress notifications.
type liveOutput struct {
	c    *client.Client
	id   string
	cell int
	cur  client.LiveCursor
}

// messages reads the output published since the last call and returns it as progress messages;
// none when nothing runs or reading failed (the result still carries all output).
func (l *liveOutput) messages(ctx context.Context) []string {
	read, err := l.c.ReadLive(ctx, l.id, l.cell)
	if err != nil || read.Output == nil {
		return nil
	}
	var out []string
	for _, ch := range l.cur.Take(read.ActivityID, *read.Output) {
		out = append(out, liveMessage(ch))
	}
	return out
}

// liveMessage is a chunk as a progress message: "live stdout (unsigned): " or "live stderr
// (unsigned): " (a worker's report while the code runs, which anyone who can write to the
// namespace can record; only the result is checked against its host's receipt) and the bytes as
// text in which every control character (an escape sequence the code printed) and every byte
// that is not UTF-8 is written as an escape (pysource.VisibleText), after "[N bytes skipped] "
// when the reader missed some.
func liveMessage(ch client.Chunk) string {
	msg := "live " + string(ch.Stream) + " (unsigned): "
	if ch.Skipped > 0 {
		msg += fmt.Sprintf("[%d bytes skipped] ", ch.Skipped)
	}
	return msg + pysource.VisibleText(string(ch.Bytes))
}
