//go:build integration

package docker

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
)

// outputsKind is one kind of run BenchmarkOutputsEndToEnd times: its code, and how many outputs
// its result must carry.
type outputsKind struct {
	name, code string
	outputs    int
}

// The kinds, in pairs: the same code showing what it made, and not showing it. The figure bytes
// are a PNG header and 100 KB of random bytes (incompressible: the history and the result's JSON
// carry all of it); the chart is drawn with matplotlib (the data image's) and either shown with
// plt.show() or closed.
var outputsKinds = []outputsKind{
	{name: "print(1), shows nothing", code: "print(1)\n"},
	{name: "100 KB made, not shown", code: "import os\ndata = b'\\x89PNG\\r\\n\\x1a\\n' + os.urandom(100000)\nprint(1)\n"},
	{name: "100 KB PNG shown (display)", code: "import os\ndata = b'\\x89PNG\\r\\n\\x1a\\n' + os.urandom(100000)\n" +
		"class Fig:\n    def _repr_png_(self):\n        return data\ndisplay(Fig())\nprint(1)\n", outputs: 2},
	{name: "matplotlib chart drawn, closed", code: benchChart + "plt.close('all')\nprint(1)\n"},
	{name: "matplotlib chart shown (plt.show)", code: benchChart + "plt.show()\nprint(1)\n", outputs: 1},
}

const benchChart = "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(6, 4))\n" +
	"ax.plot(range(100), [i * i for i in range(100)])\nax.set_title('squares')\nfig.canvas.draw()\n"

// BenchmarkOutputsEndToEnd is what showing outputs costs the person who waits for a result,
// through the real binaries: for each runtime (SANDBOXFLOW_BENCH_RUNTIMES, default runc,runsc)
// it starts `worker --dev --backend docker` with the data image (SANDBOXFLOW_DATA_PYTHON_IMAGE,
// default sandboxflow-data-python:bookworm), --max-sandboxes 4 --warm-sandboxes 4, and times
// approve→result (`starter approve ID --digest D --wait`, one process that signs, sends and
// prints the result's JSON, which it checks) of each of outputsKinds, the run started untimed
// with `starter run`, SANDBOXFLOW_BENCH_SAMPLES rounds (default 15) of every kind in turn, the
// warm pool settled before each. It prints markdown: the p50 of each kind, its difference from
// its pair's, and the median of the two's difference in each round (the pair ran one after the
// other, so this one moves less with the machine's load). It runs only with
// SANDBOXFLOW_BENCH_E2E=1, as BenchmarkEndToEnd does.
func BenchmarkOutputsEndToEnd(b *testing.B) {
	if os.Getenv("SANDBOXFLOW_BENCH_E2E") != "1" {
		b.Skip("set SANDBOXFLOW_BENCH_E2E=1: it builds and starts worker --dev and takes minutes")
	}
	if reason := probeDocker(); reason != "" {
		b.Fatal(reason)
	}
	samples := envInt(b, "SANDBOXFLOW_BENCH_SAMPLES", 15)
	runtimes := envList(b, "SANDBOXFLOW_BENCH_RUNTIMES", []string{"runc", RuntimeRunsc}, nil)
	for _, rt := range runtimes {
		if !slices.Contains(dockerInfo.Runtimes, rt) {
			b.Fatalf("SANDBOXFLOW_BENCH_RUNTIMES: the docker daemon has no runtime %s (it has %v)", rt, dockerInfo.Runtimes)
		}
	}
	workerBin, starterBin := buildBinaries(b)
	medians, paired := map[string][]time.Duration{}, map[string][]time.Duration{}
	began := time.Now()
	for _, rt := range runtimes {
		times := outputsRow(b, rt, workerBin, starterBin, samples)
		for k := range times {
			medians[rt] = append(medians[rt], median(times[k]))
			var d time.Duration // the median of its difference from the kind before it, round by round
			if k > 0 {
				diffs := make([]time.Duration, len(times[k]))
				for i := range times[k] {
					diffs[i] = times[k][i] - times[k-1][i]
				}
				d = median(diffs)
			}
			paired[rt] = append(paired[rt], d)
		}
	}
	fmt.Printf("\napprove→result through `starter approve --wait` (p50 of %d each, kinds interleaved), %s, data image %s, load average %s, %s:\n\n",
		samples, time.Now().UTC().Format("2006-01-02"), testDataImage(), loadAvg(b), time.Since(began).Round(time.Second))
	fmt.Printf("| kind | %s |\n| --- |%s\n", strings.Join(runtimes, " | "), strings.Repeat(" --- |", len(runtimes)))
	for i, k := range outputsKinds {
		cells := make([]string, len(runtimes))
		for j, rt := range runtimes {
			m := medians[rt][i]
			cells[j] = fmt.Sprintf("%.1f ms", float64(m.Microseconds())/1000)
			if i == 2 || i == 4 { // shown: beside the same code not showing it, and in each round
				cells[j] += fmt.Sprintf(" (%+.1f ms; in each round %+.1f ms)", float64((m-medians[rt][i-1]).Microseconds())/1000,
					float64(paired[rt][i].Microseconds())/1000)
			}
		}
		fmt.Printf("| %s | %s |\n", k.name, strings.Join(cells, " | "))
	}
}

// outputsRow starts a worker under rt and returns the approve→result of each of outputsKinds,
// one per round.
func outputsRow(b *testing.B, rt, workerBin, starterBin string, samples int) [][]time.Duration {
	addr, metricsAddr := freeAddr(b), freeAddr(b)
	dataDir := b.TempDir()
	b.Setenv("SANDBOXFLOW_REVIEWER_KEY", dataDir+"/reviewer/id_ed25519")
	queue := "bench-outputs-" + suiteID + "-" + rt
	stop, _ := startWorkerLogged(b, workerBin, "--dev", "--backend", "docker", "--data-dir", dataDir, "--ui-port", "-1", "--inbox-port", "-1",
		"--address", addr, "--task-queue", queue, "--docker-image", testDataImage(), "--docker-runtime", rt,
		"--metrics-listen", metricsAddr, "--max-sandboxes", "4", "--warm-sandboxes", "4")
	defer stop()
	w := benchWorker{metricsURL: "http://" + metricsAddr + "/metrics", warm: 4}
	cli := starterCLI{b: b, bin: starterBin, env: []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=" + queue}}
	times := make([][]time.Duration, len(outputsKinds))
	for i := -1; i < samples; i++ { // round -1 warms up, uncounted
		for k, kind := range outputsKinds {
			w.settle(b)
			d := outputsSample(cli, kind)
			if i >= 0 {
				times[k] = append(times[k], d)
			}
		}
	}
	return times
}

// outputsSample starts kind's run with `starter run` (untimed) and returns how long `starter
// approve --wait` took to print its result, which must be the code's with kind's outputs.
func outputsSample(s starterCLI, kind outputsKind) time.Duration {
	var started client.Started
	if err := json.Unmarshal(s.mustRun("run", "--code", kind.code), &started); err != nil || started.Digest == "" {
		s.b.Fatalf("starter run printed no digest: %v", err)
	}
	t0 := time.Now()
	out := s.mustRun("approve", started.WorkflowID, "--digest", started.Digest, "--wait")
	d := time.Since(t0)
	var res guard.Result
	if err := json.Unmarshal(out, &res); err != nil || string(res.Stdout) != "1\n" || len(res.Outputs) != kind.outputs {
		s.b.Fatalf("%s: starter approve --wait printed %.2000s (%v); want stdout 1 and %d outputs", kind.name, out, err, kind.outputs)
	}
	return d
}
