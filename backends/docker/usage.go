package docker

import (
	"context"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// statsTimeout bounds finding and reading a container's cgroup counters.
const statsTimeout = 5 * time.Second

// meter is the reading of a sandbox's cgroup counters taken when a run's request or a cell's
// frame was about to be handed over: a run's or a cell's usage is what the counters added from
// then to its end. The supervisor keeps the container alive after a run's end frame until the
// worker ends its stdin (hold_for_worker in supervisor.py), so the end reading always finds it.
type meter struct {
	c     counters
	start containerStats
	at    time.Time
}

// findCounters finds the container's counters; nil, logged, when it cannot (the run then has
// no CPU and memory figures: a failure here never fails a run).
func (b *Backend) findCounters(ctx context.Context, id string) counters {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statsTimeout)
	defer cancel()
	c, err := b.eng.Counters(sctx, id)
	if err != nil {
		b.log.Warn("docker: no usage figures: find the container's cgroup counters", "container", id, "err", err)
		return nil
	}
	return c
}

// startMeter reads c before the code may start; a nil meter when c is nil or the reading fails.
func (b *Backend) startMeter(ctx context.Context, id string, c counters) *meter {
	if c == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statsTimeout)
	defer cancel()
	st, err := c.Read(sctx)
	if err != nil {
		b.log.Warn("docker: no usage figures: read the container's counters before the run", "container", id, "err", err)
		return nil
	}
	return &meter{c: c, start: st, at: time.Now()}
}

// usage reads the counters again, once the supervisor reported the end, and returns what the run
// or cell used. Nil when m is nil or the reading failed.
func (b *Backend) usage(ctx context.Context, id string, m *meter) *guard.Usage {
	if m == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statsTimeout)
	defer cancel()
	st, err := m.c.Read(sctx)
	if err != nil {
		b.log.Warn("docker: no usage figures: read the container's counters after the run", "container", id, "err", err)
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
