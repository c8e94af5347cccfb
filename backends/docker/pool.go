package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// The warm pool keeps up to Config.WarmSandboxes containers created, attached and started ahead
// of need, each with its supervisor blocked on reading its one request: the supervisor runs
// nothing before the whole request has arrived (supervisor.py), so a waiting container has run
// no code at all. A run takes one, sends its request and goes on exactly as with a cold
// container: the container serves that one run and is removed after it. Nothing is ever reused.
//
// A waiting container names no run: Docker labels cannot change after create, so it carries
// LabelWarm and a name starting with WarmNamePrefix, and the run that takes it renames it (off the
// critical path) and logs which run it serves. The reaper removes a container still named as
// waiting once it is older than WarmMaxAge + warmReapSlack, which no live pool lets happen; one a
// run took falls under the reaper's usual threshold, counted from its creation.

// WarmNamePrefix starts the name of a container that waits in the warm pool.
const WarmNamePrefix = "sandboxflow-warm-"

// warmReapSlack is how long after WarmMaxAge the reaper takes a waiting container for an orphan
// (its pool, if alive, replaces it within warmTick of WarmMaxAge).
const warmReapSlack = 30 * time.Second

// handoffBytes caps what a waiting container may write before a run takes it: a waiting
// supervisor writes nothing but a failure report.
const handoffBytes = 64 << 10

// warmSandbox is one started container waiting for its request.
type warmSandbox struct {
	sb          *sandbox
	att         attachment
	out, errOut *handoff
	born        time.Time
	// ended is closed when the container's output ends (it exited, or the connection broke);
	// demuxErr is set before.
	ended    chan struct{}
	demuxErr error
	// gone is closed when the container leaves the pool: taken by a run, or discarded.
	gone chan struct{}
}

func (w *warmSandbox) hasEnded() bool {
	select {
	case <-w.ended:
		return true
	default:
		return false
	}
}

// handoff holds what a waiting container writes until a run takes it, then passes it, and all
// that follows, to the run's writer.
type handoff struct {
	mu  sync.Mutex
	buf []byte
	to  io.Writer
}

func (h *handoff) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.to != nil {
		return h.to.Write(p)
	}
	if len(h.buf)+len(p) > handoffBytes {
		return 0, fmt.Errorf("a waiting sandbox wrote more than %d bytes before its request", handoffBytes)
	}
	h.buf = append(h.buf, p...)
	return len(p), nil
}

// pass sends what was held to w and everything after it too.
func (h *handoff) pass(w io.Writer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.to = w
	if len(h.buf) == 0 {
		return nil
	}
	_, err := w.Write(h.buf)
	h.buf = nil
	return err
}

func (h *handoff) held() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte(nil), h.buf...)
}

// WarmStats counts what the warm pool did.
type WarmStats struct {
	// Idle is how many started containers wait now.
	Idle int
	// Taken counts runs that got a waiting container; Cold those that had to create one (the
	// pool could not start one, its containers were from another image, or the run asked for
	// the open network).
	Taken, Cold uint64
	// Waited counts the runs of Taken that found the pool empty and took the next container
	// it started (a burst).
	Waited uint64
	// Discarded counts waiting containers removed without serving a run: too old, from an
	// image that was replaced, ended on their own, or the pool closed.
	Discarded uint64
}

// pool is the warm pool of one backend.
type pool struct {
	// id names this pool on its containers (LabelWarm) and in the log.
	id     string
	b      *Backend
	size   int
	maxAge time.Duration
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	idle     []*warmSandbox // oldest first
	filling  int
	parallel int           // how many it starts at once
	waiters  []*poolWaiter // runs that found the pool empty, oldest first
	closed   bool
	failures int // consecutive failures to start one, for the back-off
	retryAt  time.Time
	stats    WarmStats

	wake chan struct{}
	wg   sync.WaitGroup
}

// poolWaiter is a run waiting for the next container the pool starts: ch gets it, or nil when
// the pool cannot start one (the run then creates its own).
type poolWaiter struct {
	imageID string
	ch      chan *warmSandbox
}

// warmTick is how often the pool looks for containers past WarmMaxAge.
func warmTick(maxAge time.Duration) time.Duration {
	return min(max(maxAge/4, 100*time.Millisecond), 10*time.Second)
}

// newPool returns b's pool; start starts filling it in the background.
func newPool(b *Backend) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	var id [6]byte
	_, _ = rand.Read(id[:])
	return &pool{id: hex.EncodeToString(id[:]), b: b, size: b.cfg.WarmSandboxes, parallel: warmParallel(), maxAge: b.cfg.WarmMaxAge, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
}

func (p *pool) start() {
	p.b.log.Info("warm pool started", "pool", p.id, "size", p.size, "max_age", p.maxAge)
	p.wg.Add(1)
	go p.loop()
}

func (p *pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// loop replaces containers past their age and keeps the pool full until close.
func (p *pool) loop() {
	defer p.wg.Done()
	tick := time.NewTicker(warmTick(p.maxAge))
	defer tick.Stop()
	for {
		p.evictOld()
		p.refill()
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-tick.C:
		}
	}
}

// refill starts as many containers as the pool lacks, and one for each run waiting for one, at
// most parallel at once, unless it is backing off after failures.
func (p *pool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || time.Now().Before(p.retryAt) {
		return
	}
	for ; len(p.idle)+p.filling < p.size+len(p.waiters) && p.filling < p.parallel; p.filling++ {
		p.wg.Add(1)
		go p.startOne()
	}
}

// startOne starts one container and adds it to the pool.
func (p *pool) startOne() {
	defer p.wg.Done()
	// Not cancelled by close: a create given up half-way may still happen on the daemon. close
	// waits for this and removes what it made.
	ctx, cancel := context.WithTimeout(context.Background(), p.b.cfg.CleanupTimeout)
	w, err := p.b.startWarm(ctx)
	cancel()
	p.mu.Lock()
	p.filling--
	if err != nil {
		p.failures++
		backoff := min(time.Second<<min(p.failures-1, 6), time.Minute)
		p.retryAt = time.Now().Add(backoff)
		closed := p.closed
		p.releaseWaitersLocked()
		p.mu.Unlock()
		if !closed {
			p.b.log.Warn("warm sandbox not started; the pool retries later, runs meanwhile start cold", "retry_in", backoff, "error", err)
			time.AfterFunc(backoff, p.signal)
		}
		return
	}
	if p.closed {
		p.mu.Unlock()
		p.discard(w, "")
		return
	}
	p.failures = 0
	p.addLocked(w)
	p.mu.Unlock()
	p.signal() // the next one, if the pool still lacks some
}

// addLocked gives w, started and not yet handed to a run, to the oldest waiting run, or adds it
// to the pool's waiting containers. A container whose output has ended already goes to the pool,
// whose watch drops it.
func (p *pool) addLocked(w *warmSandbox) {
	if len(p.waiters) > 0 && !w.hasEnded() {
		wt := p.waiters[0]
		p.waiters = p.waiters[1:]
		if wt.imageID == w.sb.image.ID {
			p.stats.Taken++
			p.stats.Waited++
			wt.ch <- w
			return
		}
		// Made from an image that was replaced since: that run creates its own, and the next
		// take discards this one.
		p.stats.Cold++
		wt.ch <- nil
	}
	p.idle = append(p.idle, w)
	p.wg.Add(1)
	go p.watch(w)
}

// releaseWaitersLocked sends the runs waiting for more containers than are being started to
// create their own: a start failed and the pool backs off (all of them, once it is closed).
func (p *pool) releaseWaitersLocked() {
	keep := p.filling
	if p.closed {
		keep = 0
	}
	for len(p.waiters) > keep {
		last := len(p.waiters) - 1
		p.stats.Cold++
		p.waiters[last].ch <- nil
		p.waiters = p.waiters[:last]
	}
}

// watch drops a waiting container whose output ends before a run takes it (it died, or the
// daemon restarted): a run must never be handed a container that cannot answer.
func (p *pool) watch(w *warmSandbox) {
	defer p.wg.Done()
	select {
	case <-w.gone:
		return
	case <-w.ended:
	}
	if !p.drop(w) {
		return
	}
	p.mu.Lock()
	p.failures++
	backoff := min(time.Second<<min(p.failures-1, 6), time.Minute)
	p.retryAt = time.Now().Add(backoff)
	p.releaseWaitersLocked()
	p.mu.Unlock()
	p.discard(w, fmt.Sprintf("it ended before a run took it (%v); container stderr: %q, stdout: %q",
		w.demuxErr, clip(w.errOut.held()), clip(w.out.held())))
	time.AfterFunc(backoff, p.signal)
}

// drop takes w out of the pool; false if it had left already.
func (p *pool) drop(w *warmSandbox) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.idle {
		if x == w {
			p.idle = append(p.idle[:i:i], p.idle[i+1:]...)
			close(w.gone)
			return true
		}
	}
	return false
}

// take returns a waiting container made from imageID, or nil (the run then creates one). It
// never returns one that is past its age or whose output has ended. When the pool is empty (a
// burst took them all) and can start containers, the run waits for the next one it starts instead
// of creating its own beside the pool's refill. ctx ends the wait (nil).
func (p *pool) take(ctx context.Context, imageID string) *warmSandbox {
	p.mu.Lock()
	if w := p.takeIdleLocked(imageID); w != nil || p.closed || time.Now().Before(p.retryAt) {
		if w == nil {
			p.stats.Cold++
			p.signal()
		}
		p.mu.Unlock()
		return w
	}
	wt := &poolWaiter{imageID: imageID, ch: make(chan *warmSandbox, 1)}
	p.waiters = append(p.waiters, wt)
	p.mu.Unlock()
	p.signal()
	select {
	case w := <-wt.ch:
		if w != nil {
			close(w.gone)
		}
		return w
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.waiters, wt); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		p.stats.Cold++
		return nil
	}
	// It was handed one as ctx ended: the next waiting run, or the pool, has it.
	if w := <-wt.ch; w != nil {
		p.stats.Taken--
		p.stats.Waited--
		p.addLocked(w)
	}
	return nil
}

// takeIdleLocked returns the oldest waiting container made from imageID, discarding older ones on
// the way, or nil.
func (p *pool) takeIdleLocked(imageID string) *warmSandbox {
	for len(p.idle) > 0 {
		w := p.idle[0]
		p.idle = p.idle[1:]
		close(w.gone)
		if w.sb.image.ID != imageID || time.Since(w.born) > p.maxAge || w.hasEnded() {
			go p.discard(w, "")
			continue
		}
		p.stats.Taken++
		if len(p.idle) == 0 {
			p.signal() // a burst drained it: the next run would wait for a container
		} else {
			p.refillAfter(refillAfterTake)
		}
		return w
	}
	return nil
}

// A take refills the pool later, not at once: starting a container (a create and a start, a few
// hundred milliseconds of dockerd's, containerd's and runc's CPU) would compete for the host's
// CPU with the run that took one, on the path its reviewer waits on (on two cores it made a warm
// run of print(1) take 44 ms instead of 27). The run's end refills it refillAfterRun later, past
// the activity's completion and the workflow task that answers the reviewer; a long run's pool
// is refilled refillAfterTake after the take at the latest. A take that empties the pool, and a
// run that finds it empty, refill it at once: in a burst the next run would start a container
// itself anyway.
const (
	refillAfterRun  = 150 * time.Millisecond
	refillAfterTake = time.Second
)

// warmParallel is how many containers the pool starts at once: the host's CPUs, at least 2.
// Starting a container is mostly dockerd's, containerd's and runc's CPU (on a 2-core host about
// 0.3 s of it each); started all at once, the 16 a drained pool of 16 lacks all came after
// about 3 s, and the runs waiting for them waited as long, where two at a time gives the first
// after 0.3 s.
func warmParallel() int { return max(2, runtime.NumCPU()) }

// refillAfter wakes the pool's refill after d.
func (p *pool) refillAfter(d time.Duration) { time.AfterFunc(d, p.signal) }

// cold counts a run that did not ask the pool (it wants the open network).
func (p *pool) cold() {
	p.mu.Lock()
	p.stats.Cold++
	p.mu.Unlock()
}

// evictOld removes waiting containers past WarmMaxAge; the loop then replaces them.
func (p *pool) evictOld() {
	p.mu.Lock()
	var old []*warmSandbox
	keep := p.idle[:0]
	for _, w := range p.idle {
		if time.Since(w.born) > p.maxAge {
			close(w.gone)
			old = append(old, w)
		} else {
			keep = append(keep, w)
		}
	}
	p.idle = keep
	p.mu.Unlock()
	for _, w := range old {
		p.discard(w, "")
	}
}

// discard removes a container that served no run, off the caller's path; why, when set, is
// logged as a warning.
func (p *pool) discard(w *warmSandbox, why string) {
	p.mu.Lock()
	p.stats.Discarded++
	p.mu.Unlock()
	if why != "" {
		p.b.log.Warn("warm sandbox removed: "+why, "container", w.sb.id)
	}
	w.att.Close()
	p.b.removeLater(w.sb, true)
}

func (p *pool) snapshot() WarmStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Idle = len(p.idle)
	return s
}

// close stops the refill and removes every waiting container, also those being started.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.releaseWaitersLocked()
	idle := p.idle
	p.idle = nil
	for _, w := range idle {
		close(w.gone)
	}
	p.mu.Unlock()
	p.cancel()
	for _, w := range idle {
		p.discard(w, "")
	}
	p.wg.Wait()
}

// startWarm creates, attaches and starts a container for the pool. Its supervisor then waits for
// a request; what it writes meanwhile is held for the run that takes it.
func (b *Backend) startWarm(ctx context.Context) (*warmSandbox, error) {
	img, err := b.resolveImage(ctx)
	if err != nil {
		return nil, err
	}
	sb, err := b.create(ctx, img, nil, false, "")
	if err != nil {
		return nil, err
	}
	att, err := b.eng.Attach(ctx, sb.id)
	if err != nil {
		_ = b.remove(ctx, sb.id, false)
		sb.release()
		return nil, fmt.Errorf("docker: attach container %s: %w", sb.id, err)
	}
	w := &warmSandbox{sb: sb, att: att, out: &handoff{}, errOut: &handoff{}, born: time.Now(),
		ended: make(chan struct{}), gone: make(chan struct{})}
	go func() {
		w.demuxErr = att.Demux(w.out, w.errOut)
		close(w.ended)
	}()
	if err := b.eng.Start(ctx, sb.id); err != nil {
		att.Close()
		_ = b.remove(ctx, sb.id, true)
		sb.release()
		if ce := b.startError(img, err); ce != nil {
			return nil, ce
		}
		return nil, fmt.Errorf("docker: start container %s: %w", sb.id, err)
	}
	return w, nil
}

// renameTaken renames a container taken from the pool, off the critical path, so that the reaper
// treats it as a run's. It is renamed when taken, not when its request goes: a run may hold it
// while the approval's claim and history read take their time (up to historyReadTimeout each on
// a slow server), and a waiting container past WarmMaxAge + warmReapSlack is the reaper's.
func (b *Backend) renameTaken(sb *sandbox) {
	b.removals.Add(1)
	go func() {
		defer b.removals.Done()
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.CleanupTimeout)
		defer cancel()
		name := strings.Replace(sb.name, WarmNamePrefix, "sandboxflow-", 1)
		if err := b.eng.Rename(ctx, sb.id, name); err != nil && !isNotFound(err) {
			b.log.Warn("warm sandbox not renamed; the reaper may take it for a waiting one after "+(b.cfg.WarmMaxAge+warmReapSlack).String(),
				"container", sb.id, "error", err)
		}
	}()
}

// takeWarm hands w to run r: r reads everything the container wrote and writes its request.
func (r *run) takeWarm(w *warmSandbox) error {
	r.att, r.warm = w.att, true
	r.demuxed = make(chan error, 1)
	go func() {
		<-w.ended
		r.demuxed <- w.demuxErr
	}()
	err := errors.Join(w.out.pass(r.rep), w.errOut.pass(r.diag))
	if err != nil {
		return r.fail("docker: hand over a warm container", err)
	}
	return nil
}
