//go:build integration

package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/receipt"
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

// TestDockerEgressAuditInReceipt: a real run's egress audit (an allowed and a refused attempt
// through the proxy) goes into the receipt entry by entry, and a result whose audit was changed
// afterwards (bytes, host, an attempt hidden) no longer matches it.
func TestDockerEgressAuditInReceipt(t *testing.T) {
	needDocker(t)
	plain := newUpstream(t, nil)
	h := plain.port()
	b := newTestBackend(t, "runc", func(c *Config) {
		c.Egress = EgressConfig{PrivateOK: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, MaxBytes: 1 << 20, Resolver: egressResolver}
	})
	code := `import urllib.request, urllib.error
for host in ("allowed.test", "denied.test"):
    try:
        print(urllib.request.urlopen("http://%s:` + h + `/" % host, timeout=20).read().decode())
    except urllib.error.HTTPError as e:
        print("http", e.code)
`
	c := egressChecked(t, code, []string{"allowed.test:" + h}, nil)
	started := time.Now()
	res, err := guard.New(b, guard.Policy{Languages: []string{guard.Python}, EgressAllow: []string{"allowed.test:" + h},
		MaxStdoutBytes: 1_200_000, MaxFileBytes: 10_000, MaxTotalFileBytes: 10_000}).Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Egress == nil || len(res.Egress.Attempts) != 2 {
		t.Fatalf("egress %+v, stdout %q; want two attempts", res.Egress, res.Stdout)
	}
	host := hosttest.New(t, "docker-host")
	rec, err := receipt.Sign(host.Signer, receipt.New(receipt.Run{WorkflowID: c.Owner.WorkflowID, RunID: c.Owner.RunID, Digest: c.Digest,
		Host: host.Receipt(), Backend: Name, Started: started, Ended: time.Now()}, res))
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := receipt.LoadHosts(host.File)
	if err != nil {
		t.Fatal(err)
	}
	st, err := receipt.Verify(hosts, &rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := receipt.CheckResult(st, res); err != nil {
		t.Fatalf("the real result does not match its receipt: %v", err)
	}
	if len(st.Egress) != 2 || !st.Egress[0].Allowed || st.Egress[0].BytesIn == 0 || st.Egress[1].Allowed || st.Egress[1].Host != "denied.test" {
		t.Errorf("receipt egress %+v; want allowed.test allowed with bytes, denied.test refused", st.Egress)
	}
	if st.Runtime != "default" || st.Stdout.Written == nil {
		t.Errorf("runtime %q, stdout written %v; want the daemon's default runtime and the whole stream measured", st.Runtime, st.Stdout.Written)
	}
	for name, change := range map[string]func(a []guard.EgressAttempt) []guard.EgressAttempt{
		"bytes":  func(a []guard.EgressAttempt) []guard.EgressAttempt { a[0].BytesIn--; return a },
		"host":   func(a []guard.EgressAttempt) []guard.EgressAttempt { a[1].Host = "innocent.test"; return a },
		"hidden": func(a []guard.EgressAttempt) []guard.EgressAttempt { return a[:1] },
	} {
		forged := res
		eg := *res.Egress
		eg.Attempts = change(append([]guard.EgressAttempt(nil), res.Egress.Attempts...))
		forged.Egress = &eg
		var rr *guard.ReceiptRefused
		if err := receipt.CheckResult(st, forged); !errors.As(err, &rr) || !strings.HasPrefix(rr.Field, "egress") {
			t.Errorf("egress %s changed: %v; want an egress refusal", name, err)
		}
	}
}
