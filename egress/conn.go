package egress

// The connections the proxy wraps: upstream byte accounting, a replayed ClientHello, and the
// recording of one.

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// errByteCap is returned by a counting connection once the run's byte cap is spent.
var errByteCap = errors.New("egress: byte cap reached")

// countingConn counts an upstream connection's bytes against the run's cap and the attempt, and
// cuts it when the cap is spent.
type countingConn struct {
	net.Conn
	p *Proxy
	a *Attempt
}

// take reserves up to n bytes of the budget and returns how many it may move; settle returns
// what was reserved but not moved, so concurrent connections never overshoot the cap.
func (c *countingConn) take(n int) int {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	left := c.p.cfg.MaxBytes - c.p.used
	if left <= 0 {
		return 0
	}
	if int64(n) > left {
		n = int(left)
	}
	c.p.used += int64(n)
	return n
}

func (c *countingConn) settle(reserved, out, in int) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.used -= int64(reserved - out - in)
	c.a.BytesOut += int64(out)
	c.a.BytesIn += int64(in)
	c.p.report.BytesOut += int64(out)
	c.p.report.BytesIn += int64(in)
}

func (c *countingConn) cut() error {
	c.p.mu.Lock()
	c.p.report.ByteCapReached = true
	if c.a.Reason == "" {
		c.a.Reason = fmt.Sprintf("cut: byte cap reached (%d bytes per run)", c.p.cfg.MaxBytes)
	}
	c.p.mu.Unlock()
	c.p.cfg.Logger.Warn("egress cut", "host", c.a.Host, "port", c.a.Port, "reason", "byte cap")
	c.Conn.Close()
	return errByteCap
}

func (c *countingConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return c.Conn.Read(b)
	}
	allow := c.take(len(b))
	if allow == 0 {
		return 0, c.cut()
	}
	n, err := c.Conn.Read(b[:allow])
	c.settle(allow, 0, n)
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		allow := c.take(len(b) - written)
		if allow == 0 {
			return written, c.cut()
		}
		n, err := c.Conn.Write(b[written : written+allow])
		c.settle(allow, n, 0)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// CloseWrite half-closes the upstream connection when it can.
func (c *countingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// prefixConn reads from r (bytes already read from Conn, then the rest) and writes to Conn.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// peekClientHello reads a TLS ClientHello from r and returns its SNI (as sent) and every byte it
// read, to be replayed. crypto/tls does the parsing; the handshake is abandoned at once.
func peekClientHello(r io.Reader) (string, []byte, error) {
	rec := &recordingConn{r: r}
	var sni string
	seen := false
	err := tls.Server(rec, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, seen = h.ServerName, true
			return nil, errHelloRead
		},
	}).Handshake()
	if !seen {
		return "", rec.buf.Bytes(), fmt.Errorf("egress: read ClientHello: %w", err)
	}
	return sni, rec.buf.Bytes(), nil
}

var errHelloRead = errors.New("egress: ClientHello read")

// recordingConn is a read-only net.Conn that keeps what it reads and drops what is written.
type recordingConn struct {
	r   io.Reader
	buf bytes.Buffer
}

func (c *recordingConn) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.buf.Write(b[:n])
	return n, err
}
func (c *recordingConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *recordingConn) Close() error                     { return nil }
func (c *recordingConn) LocalAddr() net.Addr              { return stubAddr{} }
func (c *recordingConn) RemoteAddr() net.Addr             { return stubAddr{} }
func (c *recordingConn) SetDeadline(time.Time) error      { return nil }
func (c *recordingConn) SetReadDeadline(time.Time) error  { return nil }
func (c *recordingConn) SetWriteDeadline(time.Time) error { return nil }

type stubAddr struct{}

func (stubAddr) Network() string { return "egress" }
func (stubAddr) String() string  { return "egress" }
