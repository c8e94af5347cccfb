package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// FrameKind says what a frame does.
type FrameKind byte

// Frame kinds. The sandbox sends Open, Data and Close; the worker sends Data and Close.
const (
	// FrameOpen announces a new connection id (sandbox to worker only). It has no data.
	FrameOpen FrameKind = 'O'
	// FrameData carries bytes of a connection.
	FrameData FrameKind = 'D'
	// FrameClose says its sender will send nothing more on the id (a half-close, like TCP's FIN).
	// A connection is over once both sides sent Close; data arriving for an id a side has closed
	// is dropped.
	FrameClose FrameKind = 'C'
)

// MaxFrameData is the most data one frame carries; Write splits larger writes.
const MaxFrameData = 32 * 1024

// FrameHeaderSize is the size of a frame's header: kind (1 byte), id (4 bytes, big-endian) and
// data length (4 bytes, big-endian), followed by that many bytes of data.
const FrameHeaderSize = 9

// Frame is one unit of the connection multiplexer between the sandbox's supervisor and the worker.
type Frame struct {
	Kind FrameKind
	ID   uint32
	Data []byte
}

// AppendFrame appends f's wire form to b.
func AppendFrame(b []byte, f Frame) []byte {
	b = append(b, byte(f.Kind))
	b = binary.BigEndian.AppendUint32(b, f.ID)
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.Data)))
	return append(b, f.Data...)
}

// ReadFrame reads one frame from r. A frame of an unknown kind, or with more than MaxFrameData
// bytes, is an error: the stream cannot be trusted after it.
func ReadFrame(r io.Reader) (Frame, error) {
	var h [FrameHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Kind: FrameKind(h[0]), ID: binary.BigEndian.Uint32(h[1:5])}
	n := binary.BigEndian.Uint32(h[5:9])
	switch {
	case f.Kind != FrameOpen && f.Kind != FrameData && f.Kind != FrameClose:
		return Frame{}, fmt.Errorf("egress: frame kind %#x is unknown", h[0])
	case n > MaxFrameData:
		return Frame{}, fmt.Errorf("egress: frame of %d bytes is over %d", n, MaxFrameData)
	case n > 0 && f.Kind != FrameData:
		return Frame{}, fmt.Errorf("egress: %c frame carries data", f.Kind)
	}
	if n > 0 {
		f.Data = make([]byte, n)
		if _, err := io.ReadFull(r, f.Data); err != nil {
			return Frame{}, fmt.Errorf("egress: read frame data: %w", io.ErrUnexpectedEOF)
		}
	}
	return f, nil
}

// DefaultMaxBuffered is how many bytes from the sandbox a connection holds before Data waits.
const DefaultMaxBuffered = 1 << 20

// maxPending bounds connections opened but not yet accepted.
const maxPending = 128

// Mux turns connections relayed as frames into net.Conn values that its Listener returns. The
// worker calls Open, Data and Close (or Handle) for each frame read from the sandbox, from one
// goroutine; the Mux writes outgoing frames through the send callback, one call at a time.
//
// Data waits while the connection already holds DefaultMaxBuffered unread bytes, so a sandbox
// that sends faster than the proxy reads slows down the frame reader: back-pressure, shared by
// all connections of the sandbox.
type Mux struct {
	sendMu sync.Mutex
	send   func(Frame) error

	mu      sync.Mutex
	conns   map[uint32]*muxConn
	pending chan *muxConn
	closed  bool
	done    chan struct{}
}

// NewMux returns a multiplexer that writes frames toward the sandbox with send. send is never
// called concurrently; an error from it ends the connection whose frame it was.
func NewMux(send func(Frame) error) *Mux {
	return &Mux{send: send, conns: map[uint32]*muxConn{}, pending: make(chan *muxConn, maxPending), done: make(chan struct{})}
}

// Handle dispatches one frame read from the sandbox to Open, Data or Close.
func (m *Mux) Handle(f Frame) error {
	switch f.Kind {
	case FrameOpen:
		return m.Open(f.ID)
	case FrameData:
		return m.Data(f.ID, f.Data)
	case FrameClose:
		return m.Close(f.ID)
	}
	return fmt.Errorf("egress: frame kind %#x is unknown", byte(f.Kind))
}

// Open registers a new connection from the sandbox; Accept returns it. An id already open, or a
// queue of unaccepted connections that is full, is an error, and the id is closed toward the
// sandbox.
func (m *Mux) Open(id uint32) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.sendFrame(Frame{Kind: FrameClose, ID: id})
		return net.ErrClosed
	}
	if _, ok := m.conns[id]; ok {
		m.mu.Unlock()
		return fmt.Errorf("egress: connection %d is already open", id)
	}
	c := &muxConn{m: m, id: id, notify: make(chan struct{})}
	select {
	case m.pending <- c:
		m.conns[id] = c
		m.mu.Unlock()
		return nil
	default:
		m.mu.Unlock()
		m.sendFrame(Frame{Kind: FrameClose, ID: id})
		return fmt.Errorf("egress: connection %d refused: %d connections wait to be accepted", id, maxPending)
	}
}

// Data delivers bytes the sandbox sent on id. Data for an unknown or closed id is dropped.
func (m *Mux) Data(id uint32, p []byte) error {
	m.mu.Lock()
	c := m.conns[id]
	m.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.deliver(p)
}

// Close records that the sandbox will send no more on id: reads return io.EOF once the buffer is
// drained.
func (m *Mux) Close(id uint32) error {
	m.mu.Lock()
	c := m.conns[id]
	m.mu.Unlock()
	if c != nil {
		c.remoteEOF()
	}
	return nil
}

// Listener returns the net.Listener whose Accept yields the sandbox's connections. Closing it
// shuts the whole Mux down: every connection is closed.
func (m *Mux) Listener() net.Listener { return muxListener{m} }

// Shutdown closes every connection and makes Accept return net.ErrClosed.
func (m *Mux) Shutdown() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.done)
	conns := make([]*muxConn, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (m *Mux) sendFrame(f Frame) error {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	return m.send(f)
}

func (m *Mux) forget(id uint32, c *muxConn) {
	m.mu.Lock()
	if m.conns[id] == c {
		delete(m.conns, id)
	}
	m.mu.Unlock()
}

type muxListener struct{ m *Mux }

func (l muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.m.pending:
		return c, nil
	case <-l.m.done:
		return nil, net.ErrClosed
	}
}

func (l muxListener) Close() error   { l.m.Shutdown(); return nil }
func (l muxListener) Addr() net.Addr { return muxAddr("listener") }

type muxAddr string

func (a muxAddr) Network() string { return "sandbox" }
func (a muxAddr) String() string  { return "sandbox:" + string(a) }

// muxConn is one relayed connection.
type muxConn struct {
	m  *Mux
	id uint32

	mu           sync.Mutex
	buf          []byte
	eof          bool // the sandbox sent Close
	closed       bool // Close was called here
	wroteClose   bool // a Close frame went to the sandbox
	readDeadline time.Time
	notify       chan struct{} // closed and replaced on every change
}

func (c *muxConn) signal() {
	close(c.notify)
	c.notify = make(chan struct{})
}

func (c *muxConn) deliver(p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.buf) >= DefaultMaxBuffered && !c.closed {
		ch := c.notify
		c.mu.Unlock()
		<-ch
		c.mu.Lock()
	}
	if c.closed || c.eof {
		return nil
	}
	c.buf = append(c.buf, p...)
	c.signal()
	return nil
}

func (c *muxConn) remoteEOF() {
	c.mu.Lock()
	c.eof = true
	c.signal()
	done := c.closed
	c.mu.Unlock()
	if done {
		c.m.forget(c.id, c)
	}
}

func (c *muxConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.closed:
			return 0, net.ErrClosed
		case len(c.buf) > 0:
			n := copy(b, c.buf)
			c.buf = c.buf[n:]
			if len(c.buf) == 0 {
				c.buf = nil
			}
			c.signal()
			return n, nil
		case c.eof:
			return 0, io.EOF
		}
		var timer *time.Timer
		var timeout <-chan time.Time
		if !c.readDeadline.IsZero() {
			d := time.Until(c.readDeadline)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			timer = time.NewTimer(d)
			timeout = timer.C
		}
		ch := c.notify
		c.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
		}
		if timer != nil {
			timer.Stop()
		}
		c.mu.Lock()
	}
}

func (c *muxConn) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		c.mu.Lock()
		stop := c.closed || c.wroteClose
		c.mu.Unlock()
		if stop {
			return written, net.ErrClosed
		}
		n := min(len(b)-written, MaxFrameData)
		chunk := append([]byte(nil), b[written:written+n]...)
		if err := c.m.sendFrame(Frame{Kind: FrameData, ID: c.id, Data: chunk}); err != nil {
			c.Close()
			return written, fmt.Errorf("egress: send frame: %w", err)
		}
		written += n
	}
	return written, nil
}

// CloseWrite sends Close to the sandbox: the worker will send nothing more on this connection.
func (c *muxConn) CloseWrite() error {
	if !c.once(&c.wroteClose) {
		return nil
	}
	return c.m.sendFrame(Frame{Kind: FrameClose, ID: c.id})
}

// Close sends Close to the sandbox (if not sent yet) and drops whatever still arrives.
func (c *muxConn) Close() error {
	if !c.once(&c.closed, func() {
		c.buf = nil
		c.signal()
	}) {
		return nil
	}
	c.m.forget(c.id, c)
	err := c.CloseWrite()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// once sets *flag under the lock and runs then (still under it), unless the flag was already
// set: it reports whether this call set it.
func (c *muxConn) once(flag *bool, then ...func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *flag {
		return false
	}
	*flag = true
	for _, f := range then {
		f()
	}
	return true
}

func (c *muxConn) LocalAddr() net.Addr  { return muxAddr("worker") }
func (c *muxConn) RemoteAddr() net.Addr { return muxAddr(strconv.FormatUint(uint64(c.id), 10)) }

func (c *muxConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *muxConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDeadline = t
	c.signal()
	c.mu.Unlock()
	return nil
}

// SetWriteDeadline is accepted and ignored: a write blocks only while send does.
func (c *muxConn) SetWriteDeadline(time.Time) error { return nil }
