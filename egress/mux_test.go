package egress

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	frames := []Frame{
		{Kind: FrameOpen, ID: 1},
		{Kind: FrameData, ID: 1, Data: []byte("hello")},
		{Kind: FrameData, ID: 1 << 31, Data: bytes.Repeat([]byte{7}, MaxFrameData)},
		{Kind: FrameClose, ID: 1},
	}
	var b []byte
	for _, f := range frames {
		b = AppendFrame(b, f)
	}
	r := bytes.NewReader(b)
	for i, want := range frames {
		got, err := ReadFrame(r)
		if err != nil || got.Kind != want.Kind || got.ID != want.ID || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("frame %d: got %c %d %d bytes %v; want %c %d %d bytes", i, got.Kind, got.ID, len(got.Data), err, want.Kind, want.ID, len(want.Data))
		}
	}
	if _, err := ReadFrame(r); !errors.Is(err, io.EOF) {
		t.Errorf("after the last frame: got %v; want io.EOF", err)
	}
}

func TestReadFrameRefusesBadFrames(t *testing.T) {
	tests := map[string][]byte{
		"unknown kind":    AppendFrame(nil, Frame{Kind: 'X', ID: 1}),
		"too large":       {byte(FrameData), 0, 0, 0, 1, 0, 1, 0, 1},
		"open with data":  AppendFrame(nil, Frame{Kind: FrameOpen, ID: 1, Data: []byte("x")}),
		"truncated data":  AppendFrame(nil, Frame{Kind: FrameData, ID: 1, Data: []byte("abc")})[:FrameHeaderSize+1],
		"truncated head":  {byte(FrameData), 0, 0},
		"close with data": AppendFrame(nil, Frame{Kind: FrameClose, ID: 1, Data: []byte("x")}),
	}
	for name, b := range tests {
		if f, err := ReadFrame(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: got %+v; want an error", name, f)
		}
	}
}

// sentFrames collects what a Mux sends toward the sandbox.
type sentFrames struct {
	mu     sync.Mutex
	frames []Frame
}

func (s *sentFrames) send(f Frame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frames = append(s.frames, f)
	return nil
}

func (s *sentFrames) all() []Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Frame(nil), s.frames...)
}

func TestMuxConnLifecycle(t *testing.T) {
	sent := &sentFrames{}
	m := NewMux(sent.send)
	l := m.Listener()
	if err := m.Open(7); err != nil {
		t.Fatal(err)
	}
	if err := m.Open(7); err == nil {
		t.Error("Open of an open id: got nil; want an error")
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	m.Data(7, []byte("ping"))
	m.Close(7)
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "ping" {
		t.Errorf("read: got %q %v; want ping then EOF", got, err)
	}
	big := bytes.Repeat([]byte("x"), MaxFrameData+10)
	if n, err := c.Write(big); n != len(big) || err != nil {
		t.Errorf("write: got %d %v; want %d", n, err, len(big))
	}
	c.Close()
	if _, err := c.Write([]byte("late")); err == nil {
		t.Error("write after Close: got nil; want an error")
	}
	frames := sent.all()
	if len(frames) != 3 || len(frames[0].Data) != MaxFrameData || len(frames[1].Data) != 10 || frames[2].Kind != FrameClose || frames[2].ID != 7 {
		t.Errorf("sent %d frames; want two data frames split at MaxFrameData, then Close", len(frames))
	}
	if err := m.Data(7, []byte("dropped")); err != nil {
		t.Errorf("Data after Close: got %v; want nil (dropped)", err)
	}

	m.Open(8)
	c2, _ := l.Accept()
	c2.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past the deadline: got %v; want os.ErrDeadlineExceeded", err)
	}
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: got %v; want net.ErrClosed", err)
	}
	if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after the listener closed: got %v; want net.ErrClosed", err)
	}
	if err := m.Open(9); err == nil {
		t.Error("Open after Shutdown: got nil; want an error")
	}
}

// fakeSupervisor plays the in-container supervisor: it listens on loopback, relays every accepted
// connection as frames on out (the container's stdout) and applies the frames it reads from in
// (the container's stdin) to those connections.
type fakeSupervisor struct {
	l     net.Listener
	outMu sync.Mutex
	out   io.Writer
	mu    sync.Mutex
	conns map[uint32]*net.TCPConn
}

func (s *fakeSupervisor) write(f Frame) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.out.Write(AppendFrame(nil, f))
}

func (s *fakeSupervisor) acceptLoop() {
	for id := uint32(1); ; id++ {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[id] = c.(*net.TCPConn)
		s.mu.Unlock()
		s.write(Frame{Kind: FrameOpen, ID: id})
		go func() {
			buf := make([]byte, 16<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					s.write(Frame{Kind: FrameData, ID: id, Data: append([]byte(nil), buf[:n]...)})
				}
				if err != nil {
					s.write(Frame{Kind: FrameClose, ID: id})
					return
				}
			}
		}()
	}
}

func (s *fakeSupervisor) readLoop(in io.Reader) {
	for {
		f, err := ReadFrame(in)
		if err != nil {
			return
		}
		s.mu.Lock()
		c := s.conns[f.ID]
		s.mu.Unlock()
		if c == nil {
			continue
		}
		switch f.Kind {
		case FrameData:
			c.Write(f.Data)
		case FrameClose:
			c.CloseWrite()
		}
	}
}

func TestProxyOverMux(t *testing.T) {
	up := newUpstream(t)
	res := newResolver(map[string]string{"plain.test": "127.0.0.1", "api.test": "127.0.0.1"})
	stdoutR, stdoutW := io.Pipe() // container → worker
	stdinR, stdinW := io.Pipe()   // worker → container
	t.Cleanup(func() { stdoutW.Close(); stdinW.Close() })

	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sl.Close() })
	sup := &fakeSupervisor{l: sl, out: stdoutW, conns: map[uint32]*net.TCPConn{}}
	go sup.acceptLoop()
	go sup.readLoop(stdinR)

	var wmu sync.Mutex
	m := NewMux(func(f Frame) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := stdinW.Write(AppendFrame(nil, f))
		return err
	})
	go func() { // the worker's frame reader
		for {
			f, err := ReadFrame(stdoutR)
			if err != nil {
				return
			}
			if err := m.Handle(f); err != nil {
				t.Errorf("Handle: %v", err)
			}
		}
	}()
	p, err := New(Config{
		Allow:     patterns(t, "plain.test:"+up.plainPort, "api.test:"+up.tlsPort),
		PrivateOK: loopbackOK,
		Resolver:  res,
		Dial:      (&loopbackDialer{}).Dial,
	})
	if err != nil {
		t.Fatal(err)
	}
	l := m.Listener()
	go p.Serve(l)
	t.Cleanup(func() { l.Close(); p.Close() })

	c := client(&url.URL{Scheme: "http", Host: sl.Addr().String()}, up.pool())
	for _, u := range []string{"http://plain.test:" + up.plainPort + "/", "https://api.test:" + up.tlsPort + "/big"} {
		code, body, _, err := get(t, c, u)
		if err != nil || code != 200 || (strings.HasSuffix(u, "/") && !strings.Contains(body, "hello")) || (strings.HasSuffix(u, "big") && len(body) != 1<<20) {
			t.Errorf("GET %s over the mux: got %d, %d bytes, %v; want 200 with the upstream's body", u, code, len(body), err)
		}
	}
	if code, _, _, _ := get(t, c, "http://elsewhere.test/"); code != 403 {
		t.Errorf("refused host over the mux: got %d; want 403", code)
	}
	if n := len(p.Report().Attempts); n != 3 {
		t.Errorf("got %d attempts; want 3", n)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, Frame{Kind: FrameData, ID: 3, Data: []byte("abc")}))
	f.Add(AppendFrame(nil, Frame{Kind: FrameOpen, ID: 1}))
	f.Add([]byte{'C', 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ReadFrame(bytes.NewReader(b))
		if err != nil {
			return
		}
		again := AppendFrame(nil, fr)
		if !bytes.Equal(again, b[:len(again)]) {
			t.Fatalf("re-encoding %+v gives %x; want the input's prefix %x", fr, again, b[:len(again)])
		}
	})
}
