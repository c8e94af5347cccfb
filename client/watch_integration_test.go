//go:build integration

package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
)

// heartbeatSpy sees every heartbeat the worker's activities record, with its encoded size.
type heartbeatSpy struct {
	interceptor.WorkerInterceptorBase
	mu       sync.Mutex
	beats    int
	maxChunk int
	maxBytes int
}

func (s *heartbeatSpy) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &spyInbound{spy: s}
	i.Next = next
	return i
}

type spyInbound struct {
	interceptor.ActivityInboundInterceptorBase
	spy *heartbeatSpy
}

func (i *spyInbound) Init(out interceptor.ActivityOutboundInterceptor) error {
	o := &spyOutbound{spy: i.spy}
	o.Next = out
	return i.Next.Init(o)
}

type spyOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	spy *heartbeatSpy
}

func (o *spyOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	p, err := converter.GetDefaultDataConverter().ToPayloads(details...)
	o.spy.mu.Lock()
	o.spy.beats++
	if err == nil {
		o.spy.maxBytes = max(o.spy.maxBytes, p.Size())
	}
	for _, d := range details {
		if lo, ok := d.(contract.LiveOutput); ok {
			o.spy.maxChunk = max(o.spy.maxChunk, len(lo.Stdout.Bytes)+len(lo.Stderr.Bytes))
		}
	}
	o.spy.mu.Unlock()
	o.Next.RecordHeartbeat(ctx, details...)
}

func dockerEnv(t *testing.T, spy *heartbeatSpy, keyFile string) *agenttest.Env {
	t.Helper()
	need.Need(t, need.Docker)
	img := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE")
	if img == "" {
		img = "sandboxflow-test-python:bookworm-full"
	}
	b, err := docker.New(docker.Config{Image: img, Deployment: "client-watch", Labels: map[string]string{"test.sandboxflow.suite": "client-watch"}})
	if err != nil {
		t.Fatalf("docker backend: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Close(ctx)
	})
	return agenttest.Setup(t, agenttest.Options{Backend: b, NoStarter: true, Interceptors: []interceptor.WorkerInterceptor{spy}, KeyFile: keyFile})
}

// watchAll runs Watch to its end and returns every chunk with when it came, and the result.
type seenChunk struct {
	client.Chunk
	at time.Time
}

func watchAll(t *testing.T, ctx context.Context, c *client.Client, id string, opts client.WatchOptions) ([]seenChunk, guard.Result, error) {
	t.Helper()
	var chunks []seenChunk
	for ev, err := range c.Watch(ctx, id, opts) {
		if err != nil {
			return chunks, guard.Result{}, err
		}
		if ev.Result != nil {
			if ev.LiveMismatch != nil {
				t.Errorf("an honest run's live output does not match its result: %v", ev.LiveMismatch)
			}
			return chunks, *ev.Result, nil
		}
		chunks = append(chunks, seenChunk{*ev.Chunk, time.Now()})
	}
	t.Fatal("Watch ended without a result or an error")
	return nil, guard.Result{}, nil
}

// Code in a real Docker sandbox prints a numbered line with its time every 200 ms: Watch, through
// the Temporal API only, yields each line within a second of its printing (well under the 4 s
// the SDK's default heartbeat throttle would hold it back), every line in order, stderr apart,
// and then the result. A 200 MiB flood then keeps every heartbeat's details within 16 KiB and a small header, and
// the watcher sees the bytes it missed counted, and a truncated result.
func TestIntegrationWatchRunLiveAndFlood(t *testing.T) {
	spy := &heartbeatSpy{}
	e := dockerEnv(t, spy, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	code := "import sys, time\nfor i in range(1, 16):\n    print('line', i, repr(time.time()))\n    time.sleep(0.2)\nprint('done', file=sys.stderr)\n"
	started, err := e.Client.Start(ctx, guard.Request{Code: code}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Decide(t, e, started.WorkflowID, true)
	chunks, res, err := watchAll(t, ctx, e.Client, started.WorkflowID, client.WatchOptions{Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr []byte
	var worst time.Duration
	for _, ch := range chunks {
		if ch.Skipped != 0 {
			t.Errorf("chunk at %d skipped %d bytes", ch.Offset, ch.Skipped)
		}
		if ch.Stream == guard.StreamStderr {
			stderr = append(stderr, ch.Bytes...)
			continue
		}
		if int64(len(stdout)) != ch.Offset {
			t.Fatalf("stdout chunk at %d after %d bytes", ch.Offset, len(stdout))
		}
		stdout = append(stdout, ch.Bytes...)
		for line := range strings.Lines(string(ch.Bytes)) {
			f := strings.Fields(line)
			if len(f) != 3 || ch.Seq == 0 {
				continue // from the result, or split across chunks
			}
			ts, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			printed := time.Unix(0, int64(ts*1e9))
			if late := ch.at.Sub(printed); late > worst {
				worst = late
			}
		}
	}
	t.Logf("%d chunks; the latest line came %s after its printing", len(chunks), worst)
	if worst > time.Second {
		t.Errorf("a line came %s after its printing; want within 1 s", worst)
	}
	if !bytes.Equal(stdout, res.Stdout) || string(stderr) != "done\n" || string(res.Stderr) != "done\n" {
		t.Errorf("watched stdout %q, stderr %q; result %q, %q", stdout, stderr, res.Stdout, res.Stderr)
	}
	for i := 1; i <= 15; i++ {
		if !strings.Contains(string(stdout), "line "+strconv.Itoa(i)+" ") {
			t.Errorf("line %d missing from %q", i, stdout)
		}
	}

	flood := "import sys\nb = b'x' * 65536\nfor _ in range(3200):\n    sys.stdout.buffer.write(b)\nsys.stdout.flush()\nimport time\ntime.sleep(1.5)  # still running: the watcher reads the flood's tail\n"
	started, err = e.Client.Start(ctx, guard.Request{Code: flood}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Decide(t, e, started.WorkflowID, true)
	chunks, res, err = watchAll(t, ctx, e.Client, started.WorkflowID, client.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var skipped, got int64
	for _, ch := range chunks {
		skipped += ch.Skipped
		got += int64(len(ch.Bytes))
	}
	if !res.StdoutTruncated || skipped == 0 || skipped+got != int64(len(res.Stdout)) {
		t.Errorf("flood: truncated %t, watcher skipped %d and got %d of %d kept bytes; want truncated and a skip that adds up", res.StdoutTruncated, skipped, got, len(res.Stdout))
	}
	// The result comes when the run ends, not at the watcher's next read.
	started, err = e.Client.Start(ctx, guard.Request{Code: "print('quick')"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Decide(t, e, started.WorkflowID, true)
	begin := time.Now()
	if _, res, err = watchAll(t, ctx, e.Client, started.WorkflowID, client.WatchOptions{Poll: time.Minute}); err != nil || string(res.Stdout) != "quick\n" {
		t.Fatalf("quick run: %q, %v", res.Stdout, err)
	}
	if d := time.Since(begin); d > 20*time.Second {
		t.Errorf("Watch with a 1 min poll gave the result %s after the approval; want it when the run ends", d)
	}

	spy.mu.Lock()
	defer spy.mu.Unlock()
	t.Logf("%d heartbeats; largest chunk %d bytes, largest payload %d bytes", spy.beats, spy.maxChunk, spy.maxBytes)
	if spy.maxChunk > contract.MaxLiveChunkBytes || spy.maxBytes > contract.MaxLiveEncodedBytes+512 {
		t.Errorf("a heartbeat carried %d bytes of output in a %d-byte payload; want at most %d, in at most 16 KiB and a small header",
			spy.maxChunk, spy.maxBytes, contract.MaxLiveChunkBytes)
	}
}

// A session's cell streams the same way: Watch with its index yields its lines, then its result.
func TestIntegrationWatchCell(t *testing.T) {
	e := sessionenv.Setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := e.Client.OpenSession(ctx, guard.SessionRequest{Languages: []string{guard.Python}, MaxCells: 4}, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.Client.SubmitCell(ctx, s.WorkflowID, contract.CellRequest{Code: "import time\nfor i in range(5):\n    print('cell line', i, flush=True)\n    time.sleep(0.3)\n", Language: guard.Python})
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		chunks []seenChunk
		res    guard.Result
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		chunks, res, err := watchAll(t, ctx, e.Client, s.WorkflowID, client.WatchOptions{Cell: sub.Cell})
		done <- outcome{chunks, res, err}
	}()
	sessionenv.Decide(t, e, s.WorkflowID, true)
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	var live int
	var out []byte
	for _, ch := range o.chunks {
		if ch.Seq > 0 {
			live++
		}
		out = append(out, ch.Bytes...)
	}
	if want := "cell line 0\ncell line 1\ncell line 2\ncell line 3\ncell line 4\n"; string(out) != want || string(o.res.Stdout) != want || live < 2 {
		t.Errorf("watched %q in %d live chunks, result %q; want %q in several chunks", out, live, o.res.Stdout, want)
	}
	if _, err := e.Client.CloseSession(ctx, s.WorkflowID, "done"); err != nil {
		t.Fatal(err)
	}
}

// With payload encryption the live output is encrypted like every other payload: the worker's
// heartbeat details reach the server sealed (a client without the keys reads the metadata
// "binary/encrypted" and not one byte of what the code printed), and Watch, with the keys, reads
// them.
func TestIntegrationWatchEncrypted(t *testing.T) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte("k1:"+base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := dockerEnv(t, &heartbeatSpy{}, keyFile)
	ring, err := codec.LoadKeyRing(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	keyed, err := client.New(client.Options{Temporal: e.Temporal, TaskQueue: e.TaskQueue, Reviewer: e.Reviewer.Principal,
		DataConverter: codec.ClientOptions(tclient.Options{}, ring).DataConverter})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const secret = "s3cret-live-marker"
	started, err := keyed.Start(ctx, guard.Request{Code: "import time\nfor i in range(20):\n    print('" + secret + "', i, flush=True)\n    time.sleep(0.2)\n"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keyed.Approve(ctx, client.Run(started.WorkflowID), started.Digest, e.Reviewer.Signer, ""); err != nil {
		t.Fatal(err)
	}
	raw, err := tclient.Dial(tclient.Options{HostPort: e.Address, Namespace: e.Namespace}) // no codec
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var sealed int
	deadline := time.Now().Add(30 * time.Second)
	for sealed < 3 && time.Now().Before(deadline) {
		resp, err := raw.DescribeWorkflowExecution(ctx, started.WorkflowID, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, pa := range resp.GetPendingActivities() {
			for _, p := range pa.GetHeartbeatDetails().GetPayloads() {
				if bytes.Contains(p.GetData(), []byte(secret)) || bytes.Contains(p.GetData(), []byte(base64.StdEncoding.EncodeToString([]byte(secret))[:12])) {
					t.Fatalf("the server holds the live output in the clear: %q", p.GetData())
				}
				if string(p.GetMetadata()["encoding"]) != "binary/encrypted" {
					t.Fatalf("heartbeat details encoded %q; want binary/encrypted", p.GetMetadata()["encoding"])
				}
				sealed++
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sealed == 0 {
		t.Fatal("no heartbeat details seen while the code ran")
	}
	// Without the keys a reader cannot decode them.
	noKeys, err := client.New(client.Options{Temporal: raw, TaskQueue: e.TaskQueue})
	if err != nil {
		t.Fatal(err)
	}
	if read, err := noKeys.ReadLive(ctx, started.WorkflowID, 0); err == nil {
		t.Errorf("a client without the keys read the live output: %+v; want a decode error", read)
	}
	chunks, res, err := watchAll(t, ctx, keyed, started.WorkflowID, client.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var live int
	for _, ch := range chunks {
		if ch.Seq > 0 && bytes.Contains(ch.Bytes, []byte(secret)) {
			live++
		}
	}
	if live == 0 || !bytes.Contains(res.Stdout, []byte(secret+" 19")) {
		t.Errorf("Watch with the keys read %d live chunks with the output, result %q", live, res.Stdout)
	}
}
