package celldriver

import (
	"context"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Cell is one cell's output on an interpreter's two streams: each stream's part of the cell goes
// to a buffer capped by the cell's limits that also feeds the cell's live output.
type Cell struct {
	// Nonce is the cell's fresh nonce, for Command.
	Nonce          string
	streams        [2]*Stream
	stdout, stderr *guard.CapBuffer
	outCut, errCut bool
}

// BeginCell makes a new cell, with a fresh nonce, current on stdout and stderr, keeping at most
// the limits' stream caps and feeding guard.OutputOf(ctx).
func BeginCell(ctx context.Context, stdout, stderr *Stream, l guard.Limits) *Cell {
	out := guard.OutputOf(ctx)
	c := &Cell{
		Nonce:   NewNonce(),
		streams: [2]*Stream{stdout, stderr},
		stdout:  guard.NewCapBuffer(l.MaxStdoutBytes).Tee(out, guard.StreamStdout),
		stderr:  guard.NewCapBuffer(l.MaxStderrBytes).Tee(out, guard.StreamStderr),
	}
	c.outCut = stdout.Begin(c.Nonce, c.stdout)
	c.errCut = stderr.Begin(c.Nonce, c.stderr)
	return c
}

// Ended reports whether the cell's end marker came on both streams, and then the exit status the
// marker on stdout carried.
func (c *Cell) Ended() (bool, int) {
	outEnded, status := c.streams[0].Ended()
	if errEnded, _ := c.streams[1].Ended(); outEnded && errEnded {
		return true, ExitStatus(status)
	}
	return false, 0
}

// Abandon ends the cell on both streams without its markers (its interpreter died).
func (c *Cell) Abandon() {
	c.streams[0].Abandon()
	c.streams[1].Abandon()
}

// Result is the cell's output so far, measured whole; stateReset says the cell ran in a fresh
// interpreter.
func (c *Cell) Result(stateReset bool) guard.Result {
	return guard.Result{Stdout: c.stdout.Bytes(), Stderr: c.stderr.Bytes(), StateReset: stateReset,
		StdoutTruncated: c.outCut || c.stdout.Truncated(), StderrTruncated: c.errCut || c.stderr.Truncated(),
		Measured: guard.MeasuredOf(c.stdout, c.stderr)}
}
