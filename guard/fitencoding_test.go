package guard

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestFitEncodingBoundsEscapedOutput: output that JSON escapes six bytes a byte ('<' and control
// characters) is cut, and flagged truncated, until the result encodes within the caps' bound;
// plain output within the caps is left as it is.
func TestFitEncodingBoundsEscapedOutput(t *testing.T) {
	l := Limits{MaxStdoutBytes: 64_000, MaxStderrBytes: 64_000}
	budget := WorstResultEncodingBytes(l)
	for _, tc := range []struct {
		name           string
		stdout, stderr []byte
		cut            bool
	}{
		{"plain", bytes.Repeat([]byte("o"), 64_000), bytes.Repeat([]byte("e"), 64_000), false},
		{"escaped", bytes.Repeat([]byte("<"), 64_000), bytes.Repeat([]byte{1}, 64_000), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Enforce(Result{Outcome: OutcomeSucceeded, OK: true, Stdout: tc.stdout, Stderr: tc.stderr}, l)
			if b, _ := json.Marshal(in); (int64(len(b)) > budget) != tc.cut {
				t.Fatalf("before: %d bytes, budget %d; the case is not what it says", len(b), budget)
			}
			got := fitEncoding(in, l)
			b, err := json.Marshal(got)
			if err != nil || int64(len(b)) > budget {
				t.Fatalf("after: %d bytes, %v; want at most %d", len(b), err, budget)
			}
			cut := got.StdoutTruncated || got.StderrTruncated
			if cut != tc.cut || (!tc.cut && (len(got.Stdout) != len(tc.stdout) || len(got.Stderr) != len(tc.stderr))) {
				t.Fatalf("truncated %t (stdout %d, stderr %d bytes); want truncated %t", cut, len(got.Stdout), len(got.Stderr), tc.cut)
			}
		})
	}
}
