//go:build integration

package client_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
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

func dockerEnv(t *testing.T, spy *heartbeatSpy) *agenttest.Env {
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
	return agenttest.Setup(t, agenttest.Options{Backend: b, NoStarter: true, Interceptors: []interceptor.WorkerInterceptor{spy}})
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
// and then the result. A 200 MiB flood then keeps every heartbeat within 16 KiB of output, and
// the watcher sees the bytes it missed counted, and a truncated result.
func TestIntegrationWatchRunLiveAndFlood(t *testing.T) {
	spy := &heartbeatSpy{}
	e := dockerEnv(t, spy)
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

	flood := "import sys\nb = b'x' * 65536\nfor _ in range(3200):\n    sys.stdout.buffer.write(b)\nsys.stdout.flush()\n"
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
	spy.mu.Lock()
	defer spy.mu.Unlock()
	t.Logf("%d heartbeats; largest chunk %d bytes, largest payload %d bytes", spy.beats, spy.maxChunk, spy.maxBytes)
	if spy.maxChunk > contract.MaxLiveChunkBytes || spy.maxBytes > contract.MaxLiveChunkBytes*4/3+512 {
		t.Errorf("a heartbeat carried %d bytes of output in a %d-byte payload; want at most %d (base64: %d and a small header)",
			spy.maxChunk, spy.maxBytes, contract.MaxLiveChunkBytes, contract.MaxLiveChunkBytes*4/3)
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
