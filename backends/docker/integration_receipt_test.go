//go:build integration

package docker

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// TestDockerMeasuresWholeStreams: the supervisor hashes every byte the code writes, past the
// caps, so the host's receipt can sign the stream as written, not only as kept. The code writes
// 3 MiB of stdout (with bytes that are not UTF-8) and 100 KB of stderr against caps of 1000
// bytes; the measure must be the length and SHA-256 of exactly what it wrote.
func TestDockerMeasuresWholeStreams(t *testing.T) {
	const code = `import sys
out, err = sys.stdout.buffer, sys.stderr.buffer
for i in range(3 * 1024):
    out.write(bytes((i * 7 + j) % 256 for j in range(1024)))
err.write(b"e" * 100000)
`
	var want bytes.Buffer
	for i := range 3 * 1024 {
		for j := range 1024 {
			want.WriteByte(byte((i*7 + j) % 256))
		}
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		c := checked(t, guard.Python, code, func(r *guard.Request) {
			r.Limits.Timeout = 60 * time.Second
			r.Limits.MaxStdoutBytes, r.Limits.MaxStderrBytes = 1000, 1000
		})
		res := mustRun(t, b, c)
		if res.ExitCode != 0 || !res.StdoutTruncated || len(res.Stdout) != 1000 {
			t.Fatalf("exit %d, stdout %d bytes truncated=%t, stderr %q; want exit 0 and 1000 bytes kept", res.ExitCode, len(res.Stdout), res.StdoutTruncated, res.Stderr)
		}
		m := res.Measured
		if m == nil || m.Stdout == nil || m.Stderr == nil {
			t.Fatalf("measured %+v; want both streams measured", m)
		}
		if *m.Stdout != (guard.StreamMeasure{Bytes: int64(want.Len()), SHA256: sum(want.Bytes())}) {
			t.Errorf("stdout measured %+v; want %d bytes, sha256 %s", *m.Stdout, want.Len(), sum(want.Bytes()))
		}
		if *m.Stderr != (guard.StreamMeasure{Bytes: 100000, SHA256: sum(bytes.Repeat([]byte("e"), 100000))}) {
			t.Errorf("stderr measured %+v; want 100000 bytes of e", *m.Stderr)
		}
		if !bytes.Equal(res.Stdout, want.Bytes()[:1000]) {
			t.Errorf("stdout kept is not the first 1000 bytes written")
		}
		if m.Runtime != b.runtimeName() || (rt != "runc" && m.Runtime != rt) {
			t.Errorf("runtime %q; want %q", m.Runtime, rt)
		}
	})
}
