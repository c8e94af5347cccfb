package docker

import (
	"context"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// statsTimeout bounds one reading of a container's cgroup counters.
const statsTimeout = 5 * time.Second

// meter is the reading of a sandbox's cgroup counters taken when a run's request or a cell's
// frame was about to be handed over: a run's or a cell's usage is what the counters added from
// then to its end. The supervisor keeps the container alive after a run's end frame until the
// worker ends its stdin (hold_for_worker in supervisor.py), so the end reading always finds it.
type meter struct {
	start containerStats
	at    time.Time
	// ok is false when the first reading failed: the run's usage then has no cgroup figures.
	ok bool
}

// startMeter reads the container's counters before the code may start. A failure costs the run
// its CPU and memory figures, never the run.
func (b *Backend) startMeter(ctx context.Context, id string) meter {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statsTimeout)
	defer cancel()
	st, err := b.eng.Stats(sctx, id)
	if err != nil {
		b.log.Warn("docker: no usage for this run: read the container's counters before it", "container", id, "err", err)
		return meter{}
	}
	return meter{start: st, at: time.Now(), ok: true}
}

// usage reads the counters again, once the supervisor reported the end, and returns what the run
// or cell used. Nil when either reading failed.
func (b *Backend) usage(ctx context.Context, id string, m meter) *guard.Usage {
	if !m.ok {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statsTimeout)
	defer cancel()
	st, err := b.eng.Stats(sctx, id)
	if err != nil {
		b.log.Warn("docker: no usage for this run: read the container's counters after it", "container", id, "err", err)
		return nil
	}
	// The rise of the peak over what the sandbox held at the start is the run's own peak when
	// the run set the sandbox's high; otherwise (a session's cell below an earlier cell's peak)
	// the cgroup cannot tell, and what the run still held at its end is a lower bound.
	rise := st.PeakMemoryBytes - m.start.MemoryBytes
	if st.PeakMemoryBytes <= m.start.PeakMemoryBytes {
		rise = st.MemoryBytes - m.start.MemoryBytes
	}
	return &guard.Usage{
		CPUTime:                guard.Duration(max(st.CPU-m.start.CPU, 0)),
		PeakMemoryBytes:        max(rise, 0),
		SandboxPeakMemoryBytes: st.PeakMemoryBytes,
		WallTime:               guard.Duration(time.Since(m.at)),
		MeasuredBy:             guard.UsageByCgroup,
	}
}

// withUsage puts u on res, with the files figure of the supervisor's exit report (which it reads
// from the sandbox's filesystems after the code's processes are gone).
func withUsage(res guard.Result, u *guard.Usage, exit *exitReport) guard.Result {
	if u == nil {
		return res
	}
	v := *u
	if res.Usage != nil { // the egress figures Enforce took from the proxy's report
		v.EgressBytesOut, v.EgressBytesIn = res.Usage.EgressBytesOut, res.Usage.EgressBytesIn
	}
	if exit != nil && exit.FilesBytes > 0 {
		v.FilesBytes = exit.FilesBytes
	}
	res.Usage = &v
	return res
}
