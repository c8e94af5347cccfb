package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// Truncate returns at most max bytes of b, and whether anything was cut.
func Truncate(b []byte, max int64) ([]byte, bool) {
	if max < 0 {
		max = 0
	}
	if int64(len(b)) <= max {
		return b, false
	}
	return b[:max:max], true
}

// CapBuffer is an io.Writer that keeps the first Max bytes written to it and counts, but drops,
// the rest. Writes never fail, so a producer piping into it is drained to the end and never
// blocks on a full pipe. It is safe for concurrent use.
type CapBuffer struct {
	mu    sync.Mutex
	max   int64
	buf   []byte
	total int64
	// all hashes every byte written, kept or not (Measure).
	all hash.Hash
	// tee, when set, gets every kept byte as it is kept (see Tee).
	tee    OutputFunc
	stream Stream
}

// NewCapBuffer returns a CapBuffer that keeps up to max bytes.
func NewCapBuffer(max int64) *CapBuffer {
	if max < 0 {
		max = 0
	}
	return &CapBuffer{max: max, all: sha256.New()}
}

// Write keeps what fits under the cap and reports every byte as written.
func (c *CapBuffer) Write(p []byte) (int, error) {
	n := len(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(n)
	if c.all == nil {
		c.all = sha256.New()
	}
	c.all.Write(p)
	if room := c.max - int64(len(c.buf)); room > 0 {
		if int64(len(p)) > room {
			p = p[:room]
		}
		c.buf = append(c.buf, p...)
		if c.tee != nil && len(p) > 0 {
			c.tee(c.stream, p)
		}
	}
	return n, nil
}

// Bytes returns a copy of the kept bytes.
func (c *CapBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}

// Total is how many bytes were written, kept or not.
func (c *CapBuffer) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Truncated reports whether more was written than kept.
func (c *CapBuffer) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > int64(len(c.buf))
}

// Measure returns the length and SHA-256 of every byte written, kept or not: the whole stream, for
// the sandbox host's receipt.
func (c *CapBuffer) Measure() StreamMeasure {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.all == nil {
		c.all = sha256.New()
	}
	return StreamMeasure{Bytes: c.total, SHA256: hex.EncodeToString(c.all.Sum(nil))}
}

// MeasuredOf is the receipt's measure of the whole stdout and stderr written to two buffers.
func MeasuredOf(stdout, stderr *CapBuffer) *Measured {
	o, e := stdout.Measure(), stderr.Measure()
	return &Measured{Stdout: &o, Stderr: &e}
}
