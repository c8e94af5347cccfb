package client

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/api/enums/v1"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Live output (issue 29): while the code runs, its sandbox activity records contract.LiveOutput
// as heartbeat details. This file reads them through the Temporal API only
// (DescribeWorkflowExecution's pending activities, decoded with the client's data converter so the
// payload codec applies), for every door: Watch for programs and the starter, ReadLive and
// LiveCursor for a door that polls on its own (the inbox, the MCP server).

// DefaultWatchPoll is how often Watch reads a running run's output unless WatchOptions says.
const DefaultWatchPoll = 200 * time.Millisecond

// Chunk is a piece of one stream of a run's output, in order: Bytes are the stream's bytes from
// Offset on. Skipped counts the bytes of the stream just before Offset that the reader missed
// (more output came between two reads than a heartbeat holds); they are in the result, up to
// its caps.
type Chunk struct {
	// Seq is the heartbeat that carried the chunk (contract.LiveOutput.Seq); 0 for the last
	// bytes, read from the result.
	Seq     int64
	Stream  guard.Stream
	Offset  int64
	Bytes   []byte
	Skipped int64
}

// LiveCursor is where a reader is in each stream of one activity's output. The zero value starts
// at the beginning.
type LiveCursor struct {
	// ActivityID is the activity whose output the offsets count; another one starts them again.
	ActivityID     string
	Stdout, Stderr int64
	// shown are the chunks Take handed out of each stream, for Verify (livecheck.go).
	shown [2][]liveSpan
	// raw is each stream's bytes handed out, from its start, while no chunk was skipped (gapped
	// says one was): Rest finds where they end in a result that holds the stream as text.
	raw    [2][]byte
	gapped [2]bool
}

// Take returns the chunks of lo past the cursor and moves the cursor past them. lo is what a
// worker recorded: a chunk whose offsets do not add up is ignored, and of one longer than
// contract.MaxLiveChunkBytes only its newest bytes are taken (the rest counted as skipped).
func (c *LiveCursor) Take(activityID string, lo contract.LiveOutput) []Chunk {
	if activityID != c.ActivityID {
		*c = LiveCursor{ActivityID: activityID}
	}
	var out []Chunk
	for i, s := range []struct {
		stream guard.Stream
		chunk  contract.LiveChunk
		pos    *int64
	}{{guard.StreamStdout, lo.Stdout, &c.Stdout}, {guard.StreamStderr, lo.Stderr, &c.Stderr}} {
		ch := s.chunk
		if ch.Offset < 0 || ch.Offset+int64(len(ch.Bytes)) != ch.Total || ch.Total <= *s.pos {
			continue
		}
		if cut := len(ch.Bytes) - contract.MaxLiveChunkBytes; cut > 0 {
			ch.Bytes, ch.Offset = ch.Bytes[cut:], ch.Offset+int64(cut)
		}
		start := max(*s.pos, ch.Offset)
		out = append(out, Chunk{Seq: lo.Seq, Stream: s.stream, Offset: start, Bytes: ch.Bytes[start-ch.Offset:], Skipped: ch.Offset - min(*s.pos, ch.Offset)})
		c.note(i, out[len(out)-1])
		if last := out[len(out)-1]; last.Skipped > 0 || c.gapped[i] || int64(len(c.raw[i])) != last.Offset {
			c.gapped[i], c.raw[i] = true, nil
		} else {
			c.raw[i] = append(c.raw[i], last.Bytes...)
		}
		*s.pos = ch.Total
	}
	return out
}

// Rest returns the bytes of res's streams past the cursor: what the run printed after the last
// heartbeat the reader saw. A stream the result holds as text because it was not valid UTF-8
// (each run of invalid bytes one U+FFFD) counts other bytes than the live output: its rest is the
// text past the bytes shown so far, made text the same way, when the reader saw them all (a split
// character at their end is taken again from the text); after a gap it has none. Nor has a stream
// the result cut shorter than the live output.
func (c *LiveCursor) Rest(res guard.Result) []Chunk {
	var out []Chunk
	for i, s := range []struct {
		stream guard.Stream
		b      []byte
		binary bool
		pos    *int64
	}{{guard.StreamStdout, res.Stdout, res.StdoutBinary, &c.Stdout}, {guard.StreamStderr, res.Stderr, res.StderrBinary, &c.Stderr}} {
		if s.binary {
			if c.gapped[i] || int64(len(c.raw[i])) != *s.pos {
				continue // the reader did not see every byte before the cursor
			}
			whole, _ := SplitIncomplete(c.raw[i])
			text := strings.ToValidUTF8(string(whole), "\uFFFD")
			at := len(text)
			if at >= len(s.b) || !bytes.HasPrefix(s.b, []byte(text)) {
				continue
			}
			out = append(out, Chunk{Stream: s.stream, Offset: *s.pos, Bytes: s.b[at:]})
			continue
		}
		if int64(len(s.b)) <= *s.pos {
			continue
		}
		out = append(out, Chunk{Stream: s.stream, Offset: *s.pos, Bytes: s.b[*s.pos:]})
		*s.pos = int64(len(s.b))
	}
	return out
}

// LiveRead is one read of a run's (or a cell's) live output.
type LiveRead struct {
	// Open says the workflow is still open.
	Open bool
	// Running says its sandbox (or cell) activity is pending; then ActivityID names it and
	// Output is its last heartbeat's details (nil before the first).
	Running    bool
	ActivityID string
	Output     *contract.LiveOutput
}

// ReadLive reads the live output of workflowID's current run: of its sandbox activity when cell
// is 0 (a RunCode run), or of its cell activity for cell when the workflow is a Session.
func (c *Client) ReadLive(ctx context.Context, workflowID string, cell int) (LiveRead, error) {
	resp, err := c.tc.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return LiveRead{}, fmt.Errorf("client: describe %s: %w", workflowID, err)
	}
	info := resp.GetWorkflowExecutionInfo()
	wantType, activityType := contract.WorkflowName, contract.RunActivityName
	if cell > 0 {
		wantType, activityType = contract.SessionWorkflowName, contract.SessionCellActivityName
	}
	if typ := info.GetType().GetName(); typ != wantType {
		if cell > 0 {
			return LiveRead{}, &NotSessionError{WorkflowID: workflowID, Type: typ}
		}
		return LiveRead{}, &NotRunCodeError{WorkflowID: workflowID, Type: typ}
	}
	read := LiveRead{Open: info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING}
	for _, pa := range resp.GetPendingActivities() {
		if pa.GetActivityType().GetName() != activityType {
			continue
		}
		var lo *contract.LiveOutput
		if d := pa.GetHeartbeatDetails(); len(d.GetPayloads()) > 0 {
			lo = new(contract.LiveOutput)
			if err := c.dc.FromPayloads(d, lo); err != nil {
				return LiveRead{}, fmt.Errorf("client: decode the live output of %s: %w", workflowID, err)
			}
		}
		if cell > 0 && (lo == nil || lo.Cell != cell) {
			continue
		}
		read.Running, read.ActivityID, read.Output = true, pa.GetActivityId(), lo
	}
	return read, nil
}

// WatchOptions adjust Watch.
type WatchOptions struct {
	// Cell watches cell Cell of a session instead of a RunCode run. Optional: 0 watches a run.
	Cell int
	// Poll is how often the output is read while the code runs. Optional: defaults to
	// DefaultWatchPoll (200 ms, as often as output is published; reading more often only
	// lowers the delay a little). The result comes when the run ends, whatever Poll is.
	Poll time.Duration
}

// WatchEvent is one step of Watch: a chunk of output, or (the last one) the result.
type WatchEvent struct {
	Chunk  *Chunk
	Result *guard.Result
	// LiveMismatch, with the result, says that output Watch yielded while the code ran is not
	// the result's (a *LiveMismatchError): someone other than the run's sandbox host recorded it.
	LiveMismatch error
}

// Watch follows a run (or a session's cell, WatchOptions.Cell) as it runs: it yields its output
// in chunks as the sandbox publishes it, then the last bytes from the result, then the result
// itself; or, as the last step, the error that ended it (the run's typed error, as Result returns
// it, a CellNotRunError for a cell that did not run, or a failure to read). A run that waits for
// its decision yields nothing until it runs. It reads the Temporal API only.
func (c *Client) Watch(ctx context.Context, workflowID string, opts WatchOptions) iter.Seq2[WatchEvent, error] {
	poll := opts.Poll
	if poll <= 0 {
		poll = DefaultWatchPoll
	}
	return func(yield func(WatchEvent, error) bool) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// A run's result is waited for beside the polls (a long poll), so that it is yielded as
		// soon as the run ends, not at the next poll; a cell's end is seen by polling.
		var ended chan watchOutcome
		if opts.Cell == 0 {
			ended = make(chan watchOutcome, 1)
			go func() {
				res, err := c.Result(wctx, workflowID)
				ended <- watchOutcome{res, err}
			}()
		}
		var cur LiveCursor
		var out *watchOutcome
		for out == nil {
			read, err := c.ReadLive(wctx, workflowID, opts.Cell)
			if err != nil {
				yield(WatchEvent{}, err)
				return
			}
			if read.Output != nil {
				for _, ch := range cur.Take(read.ActivityID, *read.Output) {
					if !yield(WatchEvent{Chunk: &ch}, nil) {
						return
					}
				}
			}
			wait := poll
			if !read.Running {
				wait = max(poll, 500*time.Millisecond) // waiting for a decision, a worker or the result
				if opts.Cell > 0 {
					done, err := c.cellDone(wctx, workflowID, opts.Cell, read)
					if err != nil {
						yield(WatchEvent{}, err)
						return
					}
					if done {
						res, err := c.cellResult(wctx, workflowID, opts.Cell)
						out = &watchOutcome{res, err}
						break
					}
				}
			}
			select {
			case <-ctx.Done():
				yield(WatchEvent{}, fmt.Errorf("client: watch %s: %w", workflowID, ctx.Err()))
				return
			case o := <-ended:
				out = &o
			case <-time.After(wait):
			}
		}
		if out.err != nil {
			yield(WatchEvent{}, out.err)
			return
		}
		for _, ch := range cur.Rest(out.res) {
			if !yield(WatchEvent{Chunk: &ch}, nil) {
				return
			}
		}
		yield(WatchEvent{Result: &out.res, LiveMismatch: cur.Verify(out.res)}, nil)
	}
}

// watchOutcome is how what Watch follows ended.
type watchOutcome struct {
	res guard.Result
	err error
}

// cellDone reports whether cell of session workflowID has ended (or the session has), when read
// shows it not running.
func (c *Client) cellDone(ctx context.Context, workflowID string, cell int, read LiveRead) (bool, error) {
	st, err := c.SessionStatus(ctx, workflowID)
	if err != nil {
		return false, err
	}
	cs, ok := sessionCell(st, cell)
	return ok && cs.Final() || !read.Open, nil
}

// cellResult is the result of cell of session workflowID, once it ended.
func (c *Client) cellResult(ctx context.Context, workflowID string, cell int) (guard.Result, error) {
	st, err := c.SessionStatus(ctx, workflowID)
	if err != nil {
		return guard.Result{}, err
	}
	cs, ok := sessionCell(st, cell)
	if !ok {
		return guard.Result{}, fmt.Errorf("client: session %s has no cell %d", workflowID, cell)
	}
	return c.CellResult(ctx, workflowID, cs)
}

// SplitIncomplete splits b before the bytes at its end that start a UTF-8 character b does not
// finish (at most 3), so that a door printing chunks as text holds them for the next chunk
// instead of showing one character as two broken halves.
func SplitIncomplete(b []byte) (whole, rest []byte) {
	for n := 1; n <= min(3, len(b)); n++ {
		c := b[len(b)-n]
		if c < utf8.RuneSelf {
			return b, nil
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-n:]) {
				return b, nil
			}
			return b[:len(b)-n], b[len(b)-n:]
		}
	}
	return b, nil
}
