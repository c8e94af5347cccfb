package guard

import "context"

// Stream names one of the code's output streams, for an OutputFunc.
type Stream string

// The two output streams.
const (
	StreamStdout Stream = "stdout"
	StreamStderr Stream = "stderr"
)

// OutputFunc receives the code's output while it runs, in the order each stream was written: every
// byte a backend keeps for the result (the part within the stream's cap), as it keeps it. It is
// called from the backend's reading goroutines, so it must not block and must copy p if it keeps
// it. The Docker (runs and cells), local and E2B backends report output as it comes; a backend that
// learns its output only when the run ends (the HTTP and callable backends) reports none: its
// result carries it.
type OutputFunc func(s Stream, p []byte)

type outputKey struct{}

// WithOutput returns a context whose runs and cells report their output to f as it is written
// (see OutputFunc). The sandbox activity uses it for live output.
func WithOutput(ctx context.Context, f OutputFunc) context.Context {
	return context.WithValue(ctx, outputKey{}, f)
}

// OutputOf returns the OutputFunc of ctx, or nil when it has none.
func OutputOf(ctx context.Context) OutputFunc {
	f, _ := ctx.Value(outputKey{}).(OutputFunc)
	return f
}

// Tee makes c pass every byte it keeps to f(s, kept), under c's lock, so that f sees each
// stream's kept bytes in order and exactly once. A nil f changes nothing. It returns c.
func (c *CapBuffer) Tee(f OutputFunc, s Stream) *CapBuffer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tee, c.stream = f, s
	return c
}
