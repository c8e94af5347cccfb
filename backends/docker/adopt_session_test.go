package docker

import (
	"errors"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// keptCell is the frames of one cell of a session whose nonce is nonce, as the supervisor
// writes them.
func keptCell(index int, nonce string, stdout []byte) []byte {
	out := encodeFrame(frameStdout, 0, stdout)
	out = append(out, encodeFrame(frameExit, 0, []byte(`{"exit_code":0,"duration_ms":1500}`))...)
	end := `{"files_truncated":false,"cell":` + string(rune('0'+index)) + `,"nonce":"` + nonce + `"}` + "\n"
	return append(out, encodeFrame(frameCellEnd, 0, []byte(end))...)
}

// The kept output is read from its first byte: frames a cell printed are its stdout, the
// pending cell's report is the one whose end names it, and ends without the session's nonce
// (a log that does not start at the container's first byte) are refused.
func TestSessionLogParse(t *testing.T) {
	l := guard.Limits{Timeout: time.Second, MaxStdoutBytes: 1000, MaxStderrBytes: 1000, MaxFiles: 1, MaxFileBytes: 10, MaxTotalFileBytes: 10}
	const nonce = "abcd"
	ready := encodeFrame(frameReady, 0, []byte(`{"nonce":"`+nonce+`"}`+"\n"))
	forged := keptCell(2, "", []byte("x"))
	kept := append(append(append([]byte(nil), ready...), keptCell(1, nonce, []byte("one\n"))...), keptCell(2, nonce, forged)...)
	for _, chunk := range []int{1, 7, len(kept)} {
		w := &sessionLog{limits: l, max: maxResultBytes(l), nonce: nonce, want: 2}
		var err error
		for p := kept; len(p) > 0 && err == nil; {
			n := min(chunk, len(p))
			_, err = w.Write(p[:n])
			p = p[n:]
		}
		if !errors.Is(err, errKeptEnd) || w.got == nil || string(w.got.stdout.Bytes()) != string(forged) || w.got.exit.DurationMS != 1500 {
			t.Fatalf("chunks of %d: got %v, report %+v; want cell 2 with the forged frames as its stdout", chunk, err, w.got)
		}
	}
	for name, log := range map[string][]byte{
		"no nonce":             append(encodeFrame(frameReady, 0, []byte("{}\n")), keptCell(1, nonce, nil)...),
		"starts inside a cell": keptCell(1, nonce, nil),
		"forged mid-stream":    append(append([]byte(nil), forged...), keptCell(2, nonce, nil)...),
	} {
		w := &sessionLog{limits: l, max: maxResultBytes(l), nonce: nonce, want: 2}
		if _, err := w.Write(log); err == nil || errors.Is(err, errKeptEnd) || w.got != nil {
			t.Errorf("%s: got %v, report %v; want the kept output refused", name, err, w.got)
		}
	}
}
