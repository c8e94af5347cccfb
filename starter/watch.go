package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// `starter watch ID [--cell N]` and `starter result ID --follow` print a run's (or a cell's)
// output as it comes, escaped for the terminal as show escapes code (the model's code may print
// escape sequences, and never a raw control character), with a marker where the reader missed
// some, then the result as result prints it. watch prints the code's stdout on stdout and its
// stderr on stderr, its own markers on stderr and the result on stdout, each of its own lines
// after the ASCII record separator (0x1E, as a JSON text sequence, RFC 7464, frames the result):
// the code's output, escaped, never holds that byte, so it cannot print a line that reads as
// starter's. result --follow prints the output and the markers on stderr, so that its stdout
// stays the one JSON document.

// recordSeparator begins each line of watch's own.
const recordSeparator = "\x1e"

// addWatchFlags adds the flags of watch (--cell) and of result (--follow).
func (c *command) addWatchFlags(fs *flag.FlagSet) {
	if c.name == "watch" {
		fs.IntVar(&c.cell, "cell", 0, "watch cell N of a session instead of a run")
	} else {
		fs.BoolVar(&c.follow, "follow", false, "print the run's output (escaped, on stderr) as it comes, then the result")
	}
}

// watchCmd runs watch: the output as it comes, then the result after the record separator.
func watchCmd(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) error {
	res, err := followResult(ctx, sc, cmd, stdout, stderr)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(stdout, recordSeparator); err != nil {
		return err
	}
	return printResult(stdout, res)
}

// followResult prints the run's (or cell's) output as it comes, as watch and result --follow
// do, and returns its result once it ended.
func followResult(ctx context.Context, sc *client.Client, cmd *command, stdout, stderr io.Writer) (guard.Result, error) {
	if cmd.waitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.waitTimeout)
		defer cancel()
	}
	out, errOut := &liveWriter{w: stdout, name: "stdout"}, &liveWriter{w: stderr, name: "stderr"}
	if cmd.name != "watch" {
		out = &liveWriter{w: stderr, name: "stdout"} // each stream holds back its own split character
	}
	out.marks, errOut.marks = stderr, stderr
	for ev, err := range sc.Watch(ctx, cmd.id, client.WatchOptions{Cell: cmd.cell}) {
		if err != nil {
			out.flush()
			errOut.flush()
			var nr *client.NotRunCodeError
			if errors.As(err, &nr) && nr.Type == contract.SessionWorkflowName {
				return guard.Result{}, fmt.Errorf("starter: %s is a session: watch one of its cells with --cell N: %w", cmd.id, err)
			}
			if ctx.Err() != nil && cmd.waitTimeout > 0 {
				return guard.Result{}, &client.WaitTimeoutError{WorkflowID: cmd.id, Timeout: cmd.waitTimeout, Err: err}
			}
			return guard.Result{}, err
		}
		if ev.Result != nil {
			out.end()
			errOut.end()
			if ev.LiveMismatch != nil {
				fmt.Fprintf(stderr, "starter: warning: %v\n", ev.LiveMismatch)
			}
			return *ev.Result, nil
		}
		w := out
		if ev.Chunk.Stream == guard.StreamStderr {
			w = errOut
		}
		if err := w.write(*ev.Chunk); err != nil {
			return guard.Result{}, fmt.Errorf("starter: print output: %w", err)
		}
	}
	return guard.Result{}, fmt.Errorf("starter: watch %s ended without a result", cmd.id)
}

// liveWriter prints one stream's chunks escaped for a terminal. It holds back the bytes of a
// character split across two chunks, so that it is printed whole, not as two escapes.
type liveWriter struct {
	w, marks io.Writer // the stream's output, and where its markers go
	name     string    // the stream's name in markers
	held     []byte
	midLine  bool
	err      error
}

func (l *liveWriter) write(ch client.Chunk) error {
	if ch.Skipped > 0 {
		l.end()
		l.mark(fmt.Sprintf("[starter: %d bytes of the code's %s skipped]", ch.Skipped, l.name))
	}
	b, rest := client.SplitIncomplete(append(l.held, ch.Bytes...))
	l.held = append([]byte(nil), rest...)
	if len(b) > 0 {
		l.print(terminal(string(b)))
		l.midLine = b[len(b)-1] != '\n'
	}
	return l.err
}

// end flushes what write held back and ends the line the code left open, so that starter's own
// lines begin lines.
func (l *liveWriter) end() {
	l.flush()
	if l.midLine {
		l.print("\n")
		l.midLine = false
	}
}

// mark writes one line of starter's own, after the record separator.
func (l *liveWriter) mark(s string) {
	if l.err == nil {
		_, l.err = io.WriteString(l.marks, recordSeparator+s+"\n")
	}
}

// flush prints what write held back (escaped: it never became a whole character).
func (l *liveWriter) flush() {
	if len(l.held) > 0 {
		l.print(terminal(string(l.held)))
		l.held = nil
		l.midLine = true
	}
}

func (l *liveWriter) print(s string) {
	if l.err == nil {
		_, l.err = io.WriteString(l.w, s)
	}
}
