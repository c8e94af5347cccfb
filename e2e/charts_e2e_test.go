//go:build integration

package e2e

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The chart tests run what an agent writes to look at data (pandas, matplotlib) in the data
// image, through the real binaries, and check that what the code showed reaches the agent's MCP
// client and the reviewers' inbox as the picture it drew and the table it built.

// chartWidth and chartHeight are the pixels of the figures the chart code draws: 6x4 inches at
// 100 dpi.
const chartWidth, chartHeight = 600, 400

// revenueFrame builds df, the DataFrame every chart test shows.
const revenueFrame = `import pandas as pd

df = pd.DataFrame({
    "month": ["Jan", "Feb", "Mar", "Apr", "May", "Jun"],
    "revenue": [12.5, 14.0, 13.25, 16.0, 18.5, 21.0],
})
`

// revenueChart draws df as a line chart of chartWidth x chartHeight pixels, left open.
const revenueChart = `import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
ax.plot(df["month"], df["revenue"], marker="o")
ax.set_title("Revenue by month")
ax.set_xlabel("month")
ax.set_ylabel("revenue (k)")
`

// chartWorker is a `worker --dev` with the Docker backend under runc and the data image, on a
// Temporal server and task queue of its own, and the starter that talks to it as its
// development reviewer, alice.
type chartWorker struct {
	addr, queue, data string
	starter           starterCLI
}

// startChartWorker starts it; args are more worker flags.
func startChartWorker(t *testing.T, queue string, args ...string) *chartWorker {
	t.Helper()
	requireDataImage(t)
	workerBin, starterBin := binaries(t)
	w := &chartWorker{addr: "127.0.0.1:" + strconv.Itoa(freePort(t)), queue: queue, data: t.TempDir()}
	env := []string{"TEMPORAL_ADDRESS=" + w.addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=" + queue,
		"USER=alice", "SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(w.data, "reviewer", "id_ed25519")}
	startDevWorker(t, workerBin, env, append([]string{"--data-dir", w.data, "--ui-port", "-1", "--task-queue", queue,
		"--backend", "docker", "--docker-image", testDataImage(), "--docker-runtime", "runc"}, args...)...)
	w.starter = starterCLI{t: t, bin: starterBin, env: env}
	return w
}

// waitCell waits until cell n of the session waits for a decision.
func (w *chartWorker) waitCell(id string, n int, within time.Duration) {
	w.starter.t.Helper()
	s := sessionCLI{w.starter}
	deadline := time.Now().Add(within)
	for {
		r := s.show(id)
		if r.Waiting == n {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("cell %d of %s does not wait for a decision after %s: state %s, waiting cell %d", n, id, within, r.State, r.Waiting)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
