package activities

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
)

// chunkBytes is how many bytes of output a heartbeat's details carry.
func chunkBytes(d contract.LiveOutput) int { return len(d.Stdout.Bytes) + len(d.Stderr.Bytes) }

// checkChunk fails unless c's bytes are the stream's bytes from c.Offset to c.Total.
func checkChunk(t *testing.T, what string, c contract.LiveChunk, stream []byte) {
	t.Helper()
	if c.Offset+int64(len(c.Bytes)) != c.Total || c.Total > int64(len(stream)) {
		t.Fatalf("%s: offset %d + %d bytes != total %d (stream has %d)", what, c.Offset, len(c.Bytes), c.Total, len(stream))
	}
	if !bytes.Equal(c.Bytes, stream[c.Offset:c.Total]) {
		t.Fatalf("%s: bytes at %d are not the stream's", what, c.Offset)
	}
}

func TestLiveRecorderKeepsTheNewestBytesWithinTheBound(t *testing.T) {
	const K = contract.MaxLiveChunkBytes
	for _, tc := range []struct {
		name         string
		stdout       int
		stderr       int
		wantA, wantB int
	}{
		{"nothing", 0, 0, 0, 0},
		{"small", 10, 3, 10, 3},
		{"stdout floods", 200 << 20, 0, K, 0},
		{"stderr floods", 0, 1 << 20, 0, K},
		{"both flood", 1 << 20, 1 << 20, K / 2, K / 2},
		{"stdout floods, a little stderr", 1 << 20, 100, K - 100, 100},
		{"exactly the bound", K, 0, K, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLiveRecorder(0)
			var out, errb []byte
			// Writes of odd sizes, so the ring wraps at every offset.
			for i, sizes := 0, []int{1, 7, 4093, 65536, 3}; len(out) < tc.stdout || len(errb) < tc.stderr; i++ {
				n := sizes[i%len(sizes)]
				if k := min(n, tc.stdout-len(out)); k > 0 {
					p := bytes.Repeat([]byte{byte('a' + i%26)}, k)
					p[0] = byte(i)
					out = append(out, p...)
					r.write(guard.StreamStdout, p)
				}
				if k := min(n, tc.stderr-len(errb)); k > 0 {
					p := bytes.Repeat([]byte{byte('A' + i%26)}, k)
					errb = append(errb, p...)
					r.write(guard.StreamStderr, p)
				}
			}
			d := r.snapshot()
			if d.Seq != 1 {
				t.Errorf("seq %d; want 1", d.Seq)
			}
			if chunkBytes(d) > K {
				t.Fatalf("%d bytes of chunk; want at most %d", chunkBytes(d), K)
			}
			if len(d.Stdout.Bytes) != tc.wantA || len(d.Stderr.Bytes) != tc.wantB {
				t.Errorf("stdout %d, stderr %d bytes; want %d, %d", len(d.Stdout.Bytes), len(d.Stderr.Bytes), tc.wantA, tc.wantB)
			}
			if d.Stdout.Total != int64(len(out)) || d.Stderr.Total != int64(len(errb)) {
				t.Errorf("totals %d, %d; want %d, %d", d.Stdout.Total, d.Stderr.Total, len(out), len(errb))
			}
			checkChunk(t, "stdout", d.Stdout, out)
			checkChunk(t, "stderr", d.Stderr, errb)
		})
	}
}

// streamBackend writes lines to the run's output tap, one every gap, as a backend's reading
// goroutine would, and returns them as its result.
type streamBackend struct {
	lines int
	gap   time.Duration
	// quiet is how long it then waits with no output.
	quiet time.Duration
}

func (b *streamBackend) Name() string { return "echo" }

func (b *streamBackend) Run(ctx context.Context, _ guard.Checked) (guard.Result, error) {
	out := guard.OutputOf(ctx)
	if out == nil {
		return guard.Result{}, fmt.Errorf("stream backend: the context has no output tap")
	}
	var all []byte
	for i := 1; i <= b.lines; i++ {
		line := fmt.Appendf(nil, "line %d\n", i)
		all = append(all, line...)
		out(guard.StreamStdout, line)
		time.Sleep(b.gap)
	}
	time.Sleep(b.quiet)
	return guard.Result{Stdout: all}, nil
}

type heartbeatLog struct {
	mu    sync.Mutex
	at    []time.Time
	beats []contract.LiveOutput
}

func (l *heartbeatLog) listen(t *testing.T) func(*activity.Info, converter.EncodedValues) {
	return func(_ *activity.Info, details converter.EncodedValues) {
		var d contract.LiveOutput
		if err := details.Get(&d); err != nil {
			t.Errorf("heartbeat details: %v", err)
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.at = append(l.at, time.Now())
		l.beats = append(l.beats, d)
	}
}

// The heartbeat loop publishes output as it comes: every line is in a heartbeat within about
// LiveInterval of its writing, in order, heartbeats with output are at least LiveInterval apart,
// and while no output comes it heartbeats only every third of the heartbeat timeout.
func TestBeatPublishesOutputAsItComes(t *testing.T) {
	const lines, gap, quiet = 10, 100 * time.Millisecond, 1500 * time.Millisecond
	rec := newLiveRecorder(7)
	var log heartbeatLog
	stop := beat(context.Background(), 3*time.Second, rec, func(d contract.LiveOutput) {
		log.mu.Lock()
		defer log.mu.Unlock()
		log.at = append(log.at, time.Now())
		log.beats = append(log.beats, d)
	})
	var written []time.Time
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		time.Sleep(gap)
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		written = append(written, time.Now())
		rec.write(guard.StreamStdout, []byte(line))
	}
	time.Sleep(quiet)
	stop()

	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.beats) == 0 || log.beats[0].Stdout.Total != 0 {
		t.Fatalf("no heartbeat at once, before any output: %v", log.beats)
	}
	var seen []byte
	for i, d := range log.beats {
		if d.Seq != int64(i+1) || d.Cell != 7 {
			t.Errorf("heartbeat %d has seq %d, cell %d; want %d, 7", i+1, d.Seq, d.Cell, i+1)
		}
		checkChunk(t, fmt.Sprint("heartbeat ", i+1), d.Stdout, []byte(want.String()))
		if d.Stdout.Total > int64(len(seen)) {
			seen = append(seen, d.Stdout.Bytes[int64(len(seen))-d.Stdout.Offset:]...)
		}
		if i > 1 && log.at[i].Sub(log.at[i-1]) < LiveInterval-20*time.Millisecond {
			t.Errorf("heartbeats %d and %d are %s apart; want at least %s", i, i+1, log.at[i].Sub(log.at[i-1]), LiveInterval)
		}
	}
	if string(seen) != want.String() {
		t.Fatalf("heartbeats carried %q; want %q", seen, want.String())
	}
	// Each line reached a heartbeat within LiveInterval of its writing (and a little scheduling).
	var lastOutput time.Time
	for n, w := range written {
		end := int64(len(fmt.Sprintf("line %d\n", n+1)))
		for k := range n {
			end += int64(len(fmt.Sprintf("line %d\n", k+1)))
		}
		for i, d := range log.beats {
			if d.Stdout.Total >= end {
				if late := log.at[i].Sub(w); late > LiveInterval+100*time.Millisecond {
					t.Errorf("line %d reached a heartbeat %s after it was written; want within ~%s", n+1, late, LiveInterval)
				}
				lastOutput = log.at[i]
				break
			}
		}
	}
	// 1.5 s without output, with a 3 s heartbeat timeout: one idle heartbeat (every 1 s).
	var idle int
	for i := range log.beats {
		if log.at[i].After(lastOutput) {
			idle++
		}
	}
	if idle != 1 {
		t.Errorf("%d heartbeats in 1.5 s without output; want 1 (every 1 s)", idle)
	}
}

// SandboxRun gives the backend an output tap and heartbeats LiveOutput details.
func TestRunGivesTheBackendAnOutputTap(t *testing.T) {
	b := &streamBackend{lines: 3, gap: 10 * time.Millisecond}
	a, err := New(Config{Backend: b, ReviewersFile: reviewersFile(t), History: &historytest.Log{ScheduleCaller: true}})
	if err != nil {
		t.Fatal(err)
	}
	c := checked(t, a, guard.Request{Code: "print(1)"})
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	var log heartbeatLog
	env.SetOnActivityHeartbeatListener(log.listen(t))
	a.Register(env)
	v, err := env.ExecuteActivity(contract.RunActivityName, approved(t, c, fields(c.Digest)))
	if err != nil {
		t.Fatal(err) // the stream backend fails without a tap
	}
	var res guard.Result
	if err := v.Get(&res); err != nil || string(res.Stdout) != "line 1\nline 2\nline 3\n" {
		t.Fatalf("result %q, %v", res.Stdout, err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.beats) == 0 || log.beats[0].Seq != 1 {
		t.Errorf("heartbeats %v; want LiveOutput details from seq 1", log.beats)
	}
}

func TestWorkerOptionsThrottleHeartbeatsBelowTheLiveInterval(t *testing.T) {
	o := WorkerOptions(worker.Options{MaxConcurrentActivityExecutionSize: 3})
	if o.MaxHeartbeatThrottleInterval != HeartbeatThrottleInterval || o.DefaultHeartbeatThrottleInterval != HeartbeatThrottleInterval {
		t.Errorf("throttle %s / %s; want %s", o.MaxHeartbeatThrottleInterval, o.DefaultHeartbeatThrottleInterval, HeartbeatThrottleInterval)
	}
	if o.MaxConcurrentActivityExecutionSize != 3 {
		t.Errorf("WorkerOptions dropped the caller's options")
	}
	if HeartbeatThrottleInterval >= LiveInterval {
		t.Errorf("throttle %s is not under the live interval %s: the SDK would hold back live output", HeartbeatThrottleInterval, LiveInterval)
	}
}

// The backend's writes never wait for a heartbeat: while the heartbeat call hangs (a slow
// server), 20 MiB of output still go through the tap at once.
func TestLiveWritesNeverWaitForAHeartbeat(t *testing.T) {
	rec := newLiveRecorder(0)
	release := make(chan struct{})
	var calls sync.WaitGroup
	calls.Add(1)
	var once sync.Once
	stop := beat(context.Background(), 3*time.Second, rec, func(contract.LiveOutput) {
		once.Do(calls.Done)
		<-release
	})
	calls.Wait() // the first heartbeat hangs from here on
	done := make(chan struct{})
	go func() {
		defer close(done)
		p := bytes.Repeat([]byte("z"), 64<<10)
		for range 320 {
			rec.write(guard.StreamStdout, p)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("writes blocked while a heartbeat hung")
	}
	close(release)
	stop()
	if d := rec.snapshot(); d.Stdout.Total != 320*64<<10 || len(d.Stdout.Bytes) != contract.MaxLiveChunkBytes {
		t.Errorf("after the flood: total %d, chunk %d; want %d and %d", d.Stdout.Total, len(d.Stdout.Bytes), 320*64<<10, contract.MaxLiveChunkBytes)
	}
}
