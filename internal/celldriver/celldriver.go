// Package celldriver is the persistent Python interpreter of a session's sandbox, for the
// backends that keep one without a supervisor of their own (e2b, local): Source, a small driver
// that reads cells from its stdin and runs each one in one module's globals, and Stream, which
// splits what the driver writes on stdout or stderr into cells by the end marker it writes after
// each.
//
// # The protocol
//
// The worker writes each cell to the driver's stdin as Command frames it: a line
// "<nonce> <index> <length>" and then length bytes of UTF-8 code. The nonce is fresh for every
// cell (NewNonce, 128 random bits), chosen by the worker when it sends the cell. The driver
// moves its stdin to a descriptor of its own and gives the cell /dev/null, compiles the code as
// "<cell N>" (so tracebacks show its lines), runs it in the globals of a fresh __main__ module
// kept for the whole session, and then writes the end marker, "\x1esandboxflow-cell-end <nonce>
// <status>\n", on copies of its stdout and stderr taken before any cell ran (a cell that closes
// or replaces fd 1 or 2 or sys.stdout does not stop it). Status is the cell's exit status: 0, the
// code of a SystemExit (the interpreter lives on), or 1 after an uncaught exception, whose
// traceback goes to stderr without the driver's frame.
//
// The worker counts as a cell's output everything the stream carried after the previous cell's
// end marker and before this cell's marker (its nonce), so output of an earlier cell's
// background thread, written between cells, is not lost: it is shown in the next cell's result.
// A cell whose interpreter dies (os._exit, a kill, a timeout) ends without a marker: its output
// is what came before the death.
//
// # What a cell's code can do to this
//
// The code runs in the driver's own process: it can read the driver's memory, so no secret of the
// driver is hidden from it. What it can do, and what follows:
//   - Write its own cell's marker early (it can read its nonce): its result ends there, with the
//     status it wrote; whatever it writes afterwards counts for the next cell, and so does the
//     driver's real marker of the cell when the code returns (plain output there: its nonce is
//     not the next cell's).
//   - Leave a thread (or a forked child) running into later cells: it can write a later cell's
//     marker once that cell was sent (ending that cell's result early, the rest of its output
//     then counting for the cell after it), read the driver's stdin (stealing a later cell, which
//     then times out), or change the driver, builtins and modules so that later cells run
//     otherwise than their code says.
//
// None of that reaches outside the session's sandbox or another session, or makes the worker
// attribute output to a cell before that cell's previous cell ended, and every later cell's
// reviewer has read the cell that did it and its result (the chain of the session binds them).
// A marker with any other nonce is plain output.
package celldriver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// Source is the driver, run as `python3 <pysource.Flags> -c Source` in the session's working
// folder (so sys.path[0] is that folder, as for a run's code read from stdin: cells import the
// input modules). The modules the driver itself uses are imported with that folder off the path,
// so an input file named like one of them (traceback.py) never runs in its place.
const Source = `import sys
# sys.path[0] is the working folder, where the input files are: the driver's own modules come
# from the standard library, never from there.
_p0 = sys.path.pop(0)
import builtins, linecache, os, traceback, types
try:
    raise ValueError
except ValueError as _e:
    # What formatting a traceback imports on first use, imported now.
    traceback.format_exception(type(_e), _e, _e.__traceback__)
sys.path.insert(0, _p0)
del _p0
def _sandboxflow_driver():
    ctl = os.fdopen(os.dup(0), "rb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out, err = os.dup(1), os.dup(2)
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    glob = main.__dict__
    write, run, comp, flush = os.write, builtins.exec, builtins.compile, (sys.stdout, sys.stderr)
    def status_of(code):
        if code is None:
            return 0
        if isinstance(code, int):
            return code & 0xFF
        try:
            print(code, file=sys.stderr)
        except BaseException:
            pass
        return 1
    while True:
        head = ctl.readline()
        if not head:
            os._exit(0)
        nonce, index, size = head.decode("ascii").split()
        src = ctl.read(int(size)).decode("utf-8")
        name = "<cell %s>" % index
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        status = 0
        try:
            run(comp(src, name, "exec"), glob)
        except SystemExit as e:
            status = status_of(e.code)
        except BaseException as e:
            status = 1
            try:
                traceback.print_exception(type(e), e, e.__traceback__.tb_next)
            except BaseException:
                pass
        for f in flush + (sys.stdout, sys.stderr):
            try:
                f.flush()
            except BaseException:
                pass
        mark = ("\x1esandboxflow-cell-end %s %d\n" % (nonce, status)).encode()
        write(err, mark)
        write(out, mark)
_sandboxflow_driver()
`

// markerPrefix starts every end marker; the nonce, a space, the status and a newline follow.
const markerPrefix = "\x1esandboxflow-cell-end "

// maxStatusBytes bounds the status of a marker: a longer text before the newline is no marker.
const maxStatusBytes = 12

// NewNonce returns a fresh cell nonce: 32 hex digits from crypto/rand.
func NewNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(b)
}

// Command frames one cell for the driver's stdin.
func Command(nonce string, index int, code string) []byte {
	return fmt.Appendf(nil, "%s %d %d\n%s", nonce, index, len(code), code)
}

// Stream splits one output stream of the driver (stdout or stderr) into cells. Output written
// while no cell is current is kept, up to idleMax bytes, for the next cell. Its methods may be
// called from several goroutines.
type Stream struct {
	mu      sync.Mutex
	idleMax int
	idle    []byte
	idleCut bool
	marker  []byte // nil when no cell is current
	pending []byte // held back: it may start a marker
	cell    io.Writer
	ended   bool
	status  string
}

// NewStream returns a stream that keeps up to idleMax bytes written between cells.
func NewStream(idleMax int) *Stream { return &Stream{idleMax: idleMax} }

// Begin makes the cell with nonce current: what was written since the previous cell ended goes
// to cell first, then everything up to the cell's marker. It reports whether some of what was
// written between cells was dropped (over idleMax).
func (s *Stream) Begin(nonce string, cell io.Writer) (cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = cell.Write(s.idle)
	cut = s.idleCut
	s.idle, s.idleCut = nil, false
	s.marker, s.pending, s.cell, s.ended, s.status = []byte(markerPrefix+nonce+" "), nil, cell, false, ""
	return cut
}

// Ended reports whether the current cell's marker came, and the status it carried.
func (s *Stream) Ended() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended, s.status
}

// Abandon ends the current cell without its marker (its interpreter died): what was held back
// goes to the cell.
func (s *Stream) Abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.marker != nil && !s.ended {
		_, _ = s.cell.Write(s.pending)
	}
	s.marker, s.pending = nil, nil
}

// Write takes the next bytes of the stream.
func (s *Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.marker == nil || s.ended {
		s.toIdle(p)
		return len(p), nil
	}
	s.pending = append(s.pending, p...)
	from := 0
	for {
		i := bytes.Index(s.pending[from:], s.marker)
		if i < 0 {
			break
		}
		i += from
		after := s.pending[i+len(s.marker):]
		nl := bytes.IndexByte(after, '\n')
		if nl < 0 && len(after) <= maxStatusBytes {
			// Perhaps a marker still arriving: hold it back.
			_, _ = s.cell.Write(s.pending[:i])
			s.pending = append([]byte(nil), s.pending[i:]...)
			return len(p), nil
		}
		if nl < 0 || nl > maxStatusBytes {
			from = i + len(s.marker) // not a marker: plain output
			continue
		}
		_, _ = s.cell.Write(s.pending[:i])
		s.ended, s.status = true, string(after[:nl])
		rest := after[nl+1:]
		s.pending = nil
		s.toIdle(rest)
		return len(p), nil
	}
	// No marker: keep back only what could start one.
	if keep := len(s.marker) - 1; len(s.pending) > keep {
		_, _ = s.cell.Write(s.pending[:len(s.pending)-keep])
		s.pending = append([]byte(nil), s.pending[len(s.pending)-keep:]...)
	}
	return len(p), nil
}

func (s *Stream) toIdle(p []byte) {
	room := s.idleMax - len(s.idle)
	if len(p) > room {
		s.idleCut = true
		p = p[:max(room, 0)]
	}
	s.idle = append(s.idle, p...)
}

// ExitStatus reads a marker's status: the cell's exit status, or 1 when it is not a number
// (a forged marker's).
func ExitStatus(status string) int {
	n, err := strconv.Atoi(status)
	if err != nil || n < 0 || n > 255 {
		return 1
	}
	return n
}
