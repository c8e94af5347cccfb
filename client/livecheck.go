package client

import (
	"bytes"
	"crypto/sha256"
	"fmt"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Live output is heartbeat details, which any namespace writer can record for a running activity
// (RecordActivityHeartbeatByID): they are not signed. The result is (its receipt), so a reader
// that showed live output checks, once the result has come, that every byte it showed is the
// result's at the same offset.

// liveSpan is one chunk a LiveCursor handed out: where it sits in its stream and its hash.
type liveSpan struct {
	offset int64
	n      int
	sum    [sha256.Size]byte
}

// LiveMismatchError says that live output a reader showed is not what the run's result holds at
// the same place: a worker other than the run's sandbox host recorded heartbeat details for its
// activity (a namespace writer can), or the host recorded output it did not keep. What ran is
// the result.
type LiveMismatchError struct {
	Stream guard.Stream
	// Offset and Bytes say where the first chunk that differs sits in the stream.
	Offset int64
	Bytes  int
}

func (e *LiveMismatchError) Error() string {
	return fmt.Sprintf("client: the live %s shown at bytes %d to %d is not the result's: heartbeat details are not signed, and someone other than the run's sandbox host recorded them; the result (checked against its receipt) is what ran",
		e.Stream, e.Offset, e.Offset+int64(e.Bytes))
}

// note records a chunk handed out of stream s (0 stdout, 1 stderr).
func (c *LiveCursor) note(s int, ch Chunk) {
	if len(ch.Bytes) == 0 {
		return
	}
	c.shown[s] = append(c.shown[s], liveSpan{offset: ch.Offset, n: len(ch.Bytes), sum: sha256.Sum256(ch.Bytes)})
}

// Verify checks that every chunk Take handed out is res's bytes at the same offset, and returns
// a *LiveMismatchError for the first that is not. A stream the result holds as binary (not valid
// UTF-8) is not checked: its text no longer counts the same bytes.
func (c *LiveCursor) Verify(res guard.Result) error {
	for i, s := range []struct {
		stream guard.Stream
		b      []byte
		binary bool
	}{{guard.StreamStdout, res.Stdout, res.StdoutBinary}, {guard.StreamStderr, res.Stderr, res.StderrBinary}} {
		if s.binary {
			continue
		}
		for _, sp := range c.shown[i] {
			end := sp.offset + int64(sp.n)
			if sp.offset < 0 || end > int64(len(s.b)) || !bytes.Equal(hash(s.b[sp.offset:end]), sp.sum[:]) {
				return &LiveMismatchError{Stream: s.stream, Offset: sp.offset, Bytes: sp.n}
			}
		}
	}
	return nil
}

func hash(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}
