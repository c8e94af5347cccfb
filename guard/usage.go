package guard

// Usage is what a run or a cell cost, as the sandbox host measured it from outside the code: the
// sandbox's cgroup counters (read through the container engine) and the egress proxy's byte
// counters. The code can spend these resources but not change how they are counted. A figure a
// backend did not measure is 0; MeasuredBy says what measured the CPU and memory figures.
type Usage struct {
	// CPUTime is the CPU time (user and system, every process of the sandbox, the sandbox's own
	// supervisor and, under gVisor, gVisor's kernel included) the sandbox's cgroup counted
	// between the moment the request was handed to the sandbox and the moment its end was
	// reported.
	CPUTime Duration `json:"cpu_time"`
	// PeakMemoryBytes is the run's own peak memory: the highest memory use the sandbox's cgroup
	// recorded (page cache and the files in its tmpfs folders included) less what the sandbox
	// used when the request was handed over (its idle supervisor and, under gVisor, gVisor's
	// own kernel). The cgroup keeps one peak per sandbox: a session's cell (whose interpreter
	// keeps what earlier cells allocated) that stays below an earlier cell's peak gets what it
	// still held at its end above what the sandbox held when it began, a lower bound.
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	// SandboxPeakMemoryBytes is the cgroup's peak itself: the whole sandbox's highest memory use
	// since it started (since the session opened, for a cell).
	SandboxPeakMemoryBytes int64 `json:"sandbox_peak_memory_bytes"`
	// WallTime is the host's clock over the same window as CPUTime.
	WallTime Duration `json:"wall_time"`
	// FilesBytes is what the sandbox's writable folders (/work, /tmp, /dev/shm, all tmpfs) held
	// when the code ended, as their filesystems count it (used blocks, read by the sandbox's
	// supervisor once every process of the code is gone; input files included): bytes written
	// and then deleted do not count. The sandbox's root is read-only, so nothing else is
	// writable.
	FilesBytes int64 `json:"files_bytes"`
	// EgressBytesOut and EgressBytesIn are the bytes the egress proxy relayed to and from the
	// hosts the code reached (Result.Egress's totals); 0 without egress.
	EgressBytesOut int64 `json:"egress_bytes_out"`
	EgressBytesIn  int64 `json:"egress_bytes_in"`
	// MeasuredBy names what measured the CPU, memory, wall and files figures: UsageByCgroup, or
	// "" when the backend measured none of them (only the egress figures are then set).
	MeasuredBy string `json:"measured_by,omitempty"`
}

// UsageByCgroup is Usage.MeasuredBy when the figures are the sandbox's cgroup counters, read by
// the sandbox host through the container engine.
const UsageByCgroup = "cgroup"

// withEgressUsage sets res.Usage's egress figures from the egress proxy's report, adding a Usage
// when the backend gave none; a result without egress is returned as it is.
func withEgressUsage(res Result) Result {
	if res.Egress == nil {
		return res
	}
	u := Usage{}
	if res.Usage != nil {
		u = *res.Usage
	}
	u.EgressBytesOut, u.EgressBytesIn = res.Egress.BytesOut, res.Egress.BytesIn
	res.Usage = &u
	return res
}
