package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// Live output (issue 29): the sandbox activity and the cell activity run the backend with a
// guard.OutputFunc that feeds a bounded recorder, and their heartbeat goroutine records the
// recorder's newest bytes as contract.LiveOutput heartbeat details as soon as new output exists
// (at most every LiveInterval) and otherwise every third of the heartbeat timeout.

// LiveInterval is the shortest time between two heartbeats that carry new output.
const LiveInterval = 200 * time.Millisecond

// HeartbeatThrottleInterval is the most the Temporal SDK may hold back a heartbeat's details
// before it sends them (its default is 0.8 × the heartbeat timeout, which would keep live output
// from readers for seconds): every worker that runs SandboxRun or SessionCell sets it through
// WorkerOptions, so details reach the server within LiveInterval of being recorded.
const HeartbeatThrottleInterval = 100 * time.Millisecond

// WorkerOptions returns opts with the heartbeat throttle set to HeartbeatThrottleInterval (both
// the SDK's default and its maximum), for the workers that poll the sandbox and host task queues.
func WorkerOptions(opts worker.Options) worker.Options {
	opts.DefaultHeartbeatThrottleInterval = HeartbeatThrottleInterval
	opts.MaxHeartbeatThrottleInterval = HeartbeatThrottleInterval
	return opts
}

// liveTail keeps the newest MaxLiveChunkBytes of one stream and counts all of it.
type liveTail struct {
	buf   []byte // a ring: byte i of the stream is at buf[i % len(buf)]
	total int64
}

func (t *liveTail) write(p []byte) {
	if t.buf == nil {
		t.buf = make([]byte, contract.MaxLiveChunkBytes)
	}
	if n := len(t.buf); len(p) > n {
		t.total += int64(len(p) - n)
		p = p[len(p)-n:]
	}
	for len(p) > 0 {
		n := copy(t.buf[int(t.total%int64(len(t.buf))):], p)
		p = p[n:]
		t.total += int64(n)
	}
}

// kept is how many of the newest bytes the ring holds.
func (t *liveTail) kept() int { return int(min(t.total, int64(len(t.buf)))) }

// chunk copies the newest k bytes (k <= kept()).
func (t *liveTail) chunk(k int) contract.LiveChunk {
	c := contract.LiveChunk{Offset: t.total - int64(k), Total: t.total}
	if k == 0 {
		return c
	}
	c.Bytes = make([]byte, k)
	for j := 0; j < k; {
		j += copy(c.Bytes[j:], t.buf[int((c.Offset+int64(j))%int64(len(t.buf))):])
	}
	return c
}

// liveRecorder is fed by the backend's reading goroutines (write never blocks on anything but a
// short copy under mu) and read by the heartbeat goroutine.
type liveRecorder struct {
	cell    int
	changed chan struct{} // holds a token when output came since the last snapshot

	mu             sync.Mutex
	stdout, stderr liveTail
	seq            int64
}

func newLiveRecorder(cell int) *liveRecorder {
	return &liveRecorder{cell: cell, changed: make(chan struct{}, 1)}
}

// write is the recorder's guard.OutputFunc.
func (r *liveRecorder) write(s guard.Stream, p []byte) {
	if len(p) == 0 {
		return
	}
	r.mu.Lock()
	if s == guard.StreamStderr {
		r.stderr.write(p)
	} else {
		r.stdout.write(p)
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// snapshot returns the next heartbeat's details: the newest bytes of each stream, at most
// MaxLiveChunkBytes together. Each stream is owed half; what one does not use goes to the other.
func (r *liveRecorder) snapshot() contract.LiveOutput {
	r.mu.Lock()
	defer r.mu.Unlock()
	const half = contract.MaxLiveChunkBytes / 2
	o, e := r.stdout.kept(), r.stderr.kept()
	a, b := min(o, half), min(e, half)
	rest := contract.MaxLiveChunkBytes - a - b
	more := min(o-a, rest)
	a, rest = a+more, rest-more
	b += min(e-b, rest)
	r.seq++
	return contract.LiveOutput{Seq: r.seq, Cell: r.cell, Stdout: r.stdout.chunk(a), Stderr: r.stderr.chunk(b)}
}

// beat starts the heartbeat goroutine of a sandbox or cell activity whose heartbeat timeout is
// timeout, with record as the heartbeat call and rec's output as its details (runHeartbeat), and
// returns stop, which ends the heartbeats and waits for the last one to finish. It records a
// heartbeat at once, then one LiveInterval after new output arrives, and otherwise every third
// of timeout, at most MaxHeartbeatInterval apart (so that a cancel reaches the activity within
// about a second).
func beat(ctx context.Context, timeout time.Duration, rec *liveRecorder, record func(contract.LiveOutput)) (stop func()) {
	idle := MaxHeartbeatInterval
	if timeout > 0 {
		idle = min(max(timeout/3, minHeartbeatInterval), MaxHeartbeatInterval)
	}
	hbCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ticker := time.NewTicker(idle)
		defer ticker.Stop()
		last := time.Now()
		record(rec.snapshot())
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-ticker.C:
			case <-rec.changed:
				if wait := LiveInterval - time.Since(last); wait > 0 {
					t := time.NewTimer(wait)
					select {
					case <-hbCtx.Done():
						t.Stop()
						return
					case <-t.C:
					}
				}
			}
			// Output that came while waiting is in this snapshot: its token is spent.
			select {
			case <-rec.changed:
			default:
			}
			last = time.Now()
			record(rec.snapshot())
			ticker.Reset(idle)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
