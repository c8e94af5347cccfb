package celldriver

import (
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// feed writes s to st in chunks of n bytes.
func feed(st *Stream, s string, n int) {
	for len(s) > 0 {
		k := min(n, len(s))
		_, _ = st.Write([]byte(s[:k]))
		s = s[k:]
	}
}

func TestStreamSplitsAtTheCellsMarker(t *testing.T) {
	const nonce = "0123456789abcdef0123456789abcdef"
	for _, chunk := range []int{1, 2, 7, 1 << 20} {
		st := NewStream(100)
		_, _ = st.Write([]byte("between "))
		var cell bytes.Buffer
		if cut := st.Begin(nonce, &cell); cut {
			t.Fatalf("chunk %d: idle output cut", chunk)
		}
		other := markerPrefix + "ffffffffffffffffffffffffffffffff 0\n"
		feed(st, "out "+other+markerPrefix+nonce+" 123456789012345 not a status\n"+"more "+markerPrefix+nonce+" 3\nnext", chunk)
		ended, status := st.Ended()
		want := "between out " + other + markerPrefix + nonce + " 123456789012345 not a status\nmore "
		if !ended || status != "3" || cell.String() != want {
			t.Fatalf("chunk %d: ended %t status %q cell %q; want 3 and %q", chunk, ended, status, cell.String(), want)
		}
		var next bytes.Buffer
		st.Begin("fedcba9876543210fedcba9876543210", &next)
		if next.String() != "next" {
			t.Fatalf("chunk %d: next cell got %q; want what came after the marker", chunk, next.String())
		}
	}
}

func TestStreamIdleOutputIsBounded(t *testing.T) {
	st := NewStream(4)
	_, _ = st.Write([]byte("0123456789"))
	var cell bytes.Buffer
	if cut := st.Begin(NewNonce(), &cell); !cut || cell.String() != "0123" {
		t.Fatalf("got %q cut %t; want 0123 and cut", cell.String(), cut)
	}
}

func TestStreamAbandonKeepsHeldBackBytes(t *testing.T) {
	st := NewStream(10)
	var cell bytes.Buffer
	nonce := NewNonce()
	st.Begin(nonce, &cell)
	_, _ = st.Write([]byte("bye" + markerPrefix[:5]))
	st.Abandon()
	if ended, _ := st.Ended(); ended || cell.String() != "bye"+markerPrefix[:5] {
		t.Fatalf("got %q ended %t; want every byte and no end", cell.String(), ended)
	}
}

// The driver under the real python3: cells share globals, SystemExit and exceptions are
// statuses, and the markers come on both streams.
func TestDriverRunsCellsInOneInterpreter(t *testing.T) {
	cmd := exec.Command("python3", "-E", "-s", "-B", "-u", "-c", Source)
	stdout, stderr := NewStream(1<<10), NewStream(1<<10)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); _ = cmd.Wait() }()
	run := func(index int, code string) (string, string, int) {
		var out, errb syncBuffer
		nonce := NewNonce()
		stdout.Begin(nonce, &out)
		stderr.Begin(nonce, &errb)
		if _, err := in.Write(Command(nonce, index, code)); err != nil {
			t.Fatal(err)
		}
		for {
			o, status := stdout.Ended()
			if e, _ := stderr.Ended(); o && e {
				return out.String(), errb.String(), ExitStatus(status)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if o, e, st := run(1, "x = 'é'\nimport sys\nprint(sys.stdin.read() == '', __name__)\n"); o != "True __main__\n" || st != 0 {
		t.Fatalf("cell 1: %q %q %d", o, e, st)
	}
	if o, _, st := run(2, "print(x)\nraise SystemExit(4)\n"); o != "é\n" || st != 4 {
		t.Fatalf("cell 2: %q %d; want é and 4", o, st)
	}
	if _, e, st := run(3, "def f():\n    1/0\nf()\n"); st != 1 || !strings.Contains(e, "ZeroDivisionError") || !strings.Contains(e, "1/0") || strings.Contains(e, "_sandboxflow_driver") {
		t.Fatalf("cell 3: stderr %q status %d; want the cell's traceback alone, 1", e, st)
	}
	if o, _, st := run(4, "import os\nos.close(1)\nos.close(2)\n"); o != "" || st != 0 {
		t.Fatalf("cell 4 closing fds 1 and 2: %q %d; want its marker all the same", o, st)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
