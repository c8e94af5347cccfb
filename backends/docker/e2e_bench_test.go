//go:build integration

package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// BenchmarkEndToEnd is `make bench-e2e`: what a user waits for, side by side in one run and per
// runtime (runc, runsc), against `docker run --rm -i` of the same hardened container (same image,
// flags, seccomp profile and request):
//
//   - approve→result through the real binaries: `starter approve` then `starter result`, timed
//     from the start of approve to the exit of result, against `worker --dev` (the embedded
//     server, SQLite) with the Docker backend;
//   - approve→result through the Go client in one process (no process start-up or dial);
//   - run→approve→result through the binaries: `starter run`, `approve`, `result` back to back;
//   - throughput: SANDBOXFLOW_BENCH_BURST runs (default 20) started, then approved at once, until
//     the last result.
//
// Medians of SANDBOXFLOW_BENCH_SAMPLES (default 20); the kinds alternate so drift hits all. The
// code is print(1). It prints a table. It runs only with SANDBOXFLOW_BENCH_E2E=1: it starts
// worker --dev and takes minutes.
func BenchmarkEndToEnd(b *testing.B) {
	if os.Getenv("SANDBOXFLOW_BENCH_E2E") != "1" {
		b.Skip("set SANDBOXFLOW_BENCH_E2E=1 (make bench-e2e): it builds and starts worker --dev and takes minutes")
	}
	if reason := probeDocker(); reason != "" {
		b.Fatal(reason)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		b.Fatal("the docker CLI is needed for the docker run --rm baseline")
	}
	samples, burst := envInt(b, "SANDBOXFLOW_BENCH_SAMPLES", 20), envInt(b, "SANDBOXFLOW_BENCH_BURST", 20)
	set := benchSettings{
		maxSandboxes: envInt(b, "SANDBOXFLOW_BENCH_MAX_SANDBOXES", 4),
		warm:         envInt(b, "SANDBOXFLOW_BENCH_WARM", 4),
		heapRuns:     envInt(b, "SANDBOXFLOW_BENCH_HEAP_RUNS", 1000),
	}
	workerBin, starterBin := buildBinaries(b)
	var rows []e2eRow
	runtimes := []string{"runc", RuntimeRunsc, runtimeRunscCurrent}
	if v := os.Getenv("SANDBOXFLOW_BENCH_RUNTIMES"); v != "" {
		runtimes = strings.Split(v, ",") // a local knob: e.g. runc,runsc
	}
	for _, rt := range runtimes {
		if !slices.Contains(dockerInfo.Runtimes, rt) {
			b.Fatalf("the docker daemon has no runtime %s", rt)
		}
		rows = append(rows, benchRuntime(b, rt, workerBin, starterBin, samples, burst, set))
	}
	if set.heapRuns > 0 && !cellsOnly() {
		rows[0].sustained, rows[0].heapGrowth, rows[0].devHeapGrowth = heapRun(b, workerBin, set, set.heapRuns, burst)
	}
	printE2ETable(os.Stdout, rows, samples, burst, set)
}

// cellsOnly is a local knob (SANDBOXFLOW_BENCH_CELLS_ONLY=1): only docker run and the session's
// cells are measured (no runs, throughput or heap run).
func cellsOnly() bool { return os.Getenv("SANDBOXFLOW_BENCH_CELLS_ONLY") == "1" }

// benchQueue is the workers' task queue (and so their containers' deployment): a local knob,
// SANDBOXFLOW_BENCH_TASK_QUEUE, keeps two benchmarks on one Docker daemon out of each other's
// reaper.
func benchQueue() string {
	if q := os.Getenv("SANDBOXFLOW_BENCH_TASK_QUEUE"); q != "" {
		return q
	}
	return "bench-e2e"
}

// benchSettings are the worker's settings in the benchmark and the length of the heap run.
type benchSettings struct {
	maxSandboxes, warm int
	// heapRuns is how many runs (in bursts) the runc worker serves while its heap is watched.
	heapRuns int
}

// e2eRow is one runtime's medians (and the throughput).
type e2eRow struct {
	runtime                        string
	dockerRun, approveCLI, approve time.Duration
	// cellCLI and cellClient are approve→result of a cell print(1) in a live session, through
	// `starter approve SESSION --cell N --wait` and through the Go client (issue 28).
	cellCLI, cellClient time.Duration
	whole               time.Duration
	perSecond           float64
	phases              []phase
	// sustained is runs/s over the heap run; heapGrowth the growth of the worker's live heap
	// over it (0 when not measured).
	sustained, heapGrowth, devHeapGrowth float64
}

func benchRuntime(b *testing.B, rt, workerBin, starterBin string, samples, burst int, set benchSettings) e2eRow {
	addr, metricsURL, stopWorker := startBenchWorker(b, workerBin, rt, set)
	defer stopWorker()
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=" + benchQueue()}
	cli := starterCLI{b: b, bin: starterBin, env: env}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	tc, sc := dialBench(ctx, b, addr, benchQueue())
	defer tc.Close()
	dockerRun := dockerRunBaseline(b, rt)

	session, err := sc.OpenSession(ctx, guard.SessionRequest{Languages: []string{guard.Python}}, client.SessionOptions{})
	if err != nil {
		b.Fatalf("open a session: %v", err)
	}

	// One warm-up of each kind, not counted.
	dockerRun(-1)
	if !cellsOnly() {
		cliPath(cli)
		clientPath(ctx, b, sc)
	}
	cellClientPath(ctx, b, sc, session.WorkflowID)
	cellCLIPath(ctx, b, sc, cli, session.WorkflowID)
	row := e2eRow{runtime: rt}
	var dr, ac, ap, wh, cc, cl []time.Duration
	var cs []clientSample
	for i := range samples {
		dr = append(dr, dockerRun(i))
		if !cellsOnly() {
			whole, approve := cliPath(cli)
			wh, ac = append(wh, whole), append(ac, approve)
			s := clientPath(ctx, b, sc)
			cs, ap = append(cs, s), append(ap, s.end.Sub(s.approve))
		}
		cc = append(cc, cellClientPath(ctx, b, sc, session.WorkflowID))
		cl = append(cl, cellCLIPath(ctx, b, sc, cli, session.WorkflowID))
	}
	row.dockerRun = median(dr)
	if !cellsOnly() {
		row.approveCLI, row.approve, row.whole = median(ac), median(ap), median(wh)
	}
	row.cellClient, row.cellCLI = median(cc), median(cl)
	// The session holds a sandbox slot: closed before the throughput burst, which needs them all.
	if _, err := sc.CloseSession(ctx, session.WorkflowID, "bench done"); err != nil {
		b.Fatalf("close the session: %v", err)
	}
	if cellsOnly() {
		return row
	}
	row.phases = phases(ctx, b, tc, cs)
	row.perSecond = throughput(ctx, b, sc, burst)
	b.Logf("%s: live heap of worker --dev after the samples: %.1f MiB", rt, liveHeap(b, metricsURL)/(1<<20))
	b.Logf("%s: docker run %s, approve→result (binaries) %s, (Go client) %s, run→approve→result %s, %.1f runs/s; a session's cell: approve→result (binaries) %s, (Go client) %s",
		rt, row.dockerRun, row.approveCLI, row.approve, row.whole, row.perSecond, row.cellCLI, row.cellClient)
	return row
}

// heapRun serves n runs under runc, in bursts, with the production split: worker --dev --role
// workflows (the server and the workflows) and a worker --role sandboxes of its own, whose heap is
// watched. It returns the runs per second over all of them and how much each process's live heap
// grew, in MiB, from after a warm-up of one burst. The live heap is read from the processes'
// Prometheus metrics as half the next GC goal (GOGC=100): the heap that survived the last
// collection.
func heapRun(b *testing.B, bin string, set benchSettings, n, burst int) (perSecond, sandboxWorker, dev float64) {
	addr, devMetrics, sbMetrics := freeAddr(b), freeAddr(b), freeAddr(b)
	dataDir := b.TempDir()
	b.Setenv("SANDBOXFLOW_REVIEWER_KEY", filepath.Join(dataDir, "reviewer", "id_ed25519"))
	queues := []string{"--task-queue", "bench-heap", "--sandbox-task-queue", "bench-heap-sb"}
	stopDev := startWorkerProcess(b, bin, append([]string{"--dev", "--role", "workflows", "--data-dir", dataDir, "--ui-port", "-1",
		"--inbox-port", "-1", "--address", addr, "--metrics-listen", devMetrics}, queues...)...)
	defer stopDev()
	stopSB := startWorkerProcess(b, bin, append([]string{"--role", "sandboxes", "--address", addr,
		"--reviewers", filepath.Join(dataDir, "reviewer", "allowed_signers"), "--docker-image", testPythonImage(),
		"--host-key", filepath.Join(dataDir, "host", "id_ed25519"), // worker --dev's hosts file lists it
		"--max-sandboxes", strconv.Itoa(set.maxSandboxes), "--warm-sandboxes", strconv.Itoa(set.warm), "--metrics-listen", sbMetrics}, queues...)...)
	defer stopSB()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	tc, sc := dialBench(ctx, b, addr, "bench-heap")
	defer tc.Close()
	throughput(ctx, b, sc, burst) // warm-up
	sb0, dev0 := liveHeap(b, "http://"+sbMetrics+"/metrics"), liveHeap(b, "http://"+devMetrics+"/metrics")
	t0 := time.Now()
	for done := 0; done < n; done += burst {
		throughput(ctx, b, sc, min(burst, n-done))
	}
	perSecond = float64(n) / time.Since(t0).Seconds()
	sb1, dev1 := liveHeap(b, "http://"+sbMetrics+"/metrics"), liveHeap(b, "http://"+devMetrics+"/metrics")
	b.Logf("heap run: %d runs, %.1f runs/s; live heap of the sandbox worker %.1f → %.1f MiB, of worker --dev --role workflows %.1f → %.1f MiB",
		n, perSecond, sb0/(1<<20), sb1/(1<<20), dev0/(1<<20), dev1/(1<<20))
	return perSecond, (sb1 - sb0) / (1 << 20), (dev1 - dev0) / (1 << 20)
}

// dialBench connects to the Temporal server at addr and returns a sandboxflow client of queue;
// close tc when done.
func dialBench(ctx context.Context, b *testing.B, addr, queue string) (tclient.Client, *client.Client) {
	tc, err := client.Dial(ctx, client.Connection{Address: addr})
	if err != nil {
		b.Fatal(err)
	}
	sc, err := client.New(client.Options{Temporal: tc, TaskQueue: queue})
	if err != nil {
		tc.Close()
		b.Fatal(err)
	}
	return tc, sc
}

func liveHeap(b *testing.B, metricsURL string) float64 {
	resp, err := http.Get(metricsURL)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_next_gc_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatal(err)
			}
			return f / 2
		}
	}
	b.Fatalf("no go_memstats_next_gc_bytes at %s", metricsURL)
	return 0
}

// dockerRunBaseline returns a function that runs print(1) with `docker run --rm -i` of the
// container the backend would create for rt, and returns how long it took.
func dockerRunBaseline(b *testing.B, rt string) func(i int) time.Duration {
	return dockerRunCLI(b, newTestBackend(b, rt, nil), print1Checked("bench-e2e"), "sandboxflow-bench-e2e-"+suiteID+"-"+rt)
}

// approveCLI is the one place the benchmark approves through the binaries: a real decision for
// digest. When decisions must be signed, only this function (and approveClient) changes.
func approveCLI(s starterCLI, id, digest string) {
	s.mustRun("approve", id, "--digest", digest) // signed with SANDBOXFLOW_REVIEWER_KEY
}

// approveClient approves through the Go client; see approveCLI.
func approveClient(ctx context.Context, sc *client.Client, id, digest string) error {
	signer, closer, err := client.LoadReviewerKey("") // SANDBOXFLOW_REVIEWER_KEY
	if err != nil {
		return err
	}
	defer closer.Close()
	_, err = sc.Approve(ctx, id, digest, signer, "")
	return err
}

// cliPath runs print(1) through `starter run`, `approve` and `result` and returns the whole
// time and the time from the start of approve to the exit of result.
func cliPath(s starterCLI) (whole, approveToResult time.Duration) {
	start := time.Now()
	var started client.Started
	if err := json.Unmarshal(s.mustRun("run", "--code", "print(1)"), &started); err != nil || started.Digest == "" {
		s.b.Fatalf("starter run printed no digest: %v", err)
	}
	approved := time.Now()
	approveCLI(s, started.WorkflowID, started.Digest)
	var res struct {
		Stdout string `json:"stdout"`
	}
	out := s.mustRun("result", started.WorkflowID)
	end := time.Now()
	if err := json.Unmarshal(out, &res); err != nil || res.Stdout != "1\n" {
		s.b.Fatalf("starter result printed %s (%v)", out, err)
	}
	return end.Sub(start), end.Sub(approved)
}

// cellClientPath submits print(1) as the next cell of a live session (not timed) and times its
// approval to its result through the Go client (ApproveCellWait: one update).
func cellClientPath(ctx context.Context, b *testing.B, sc *client.Client, session string) time.Duration {
	sub, err := sc.SubmitCell(ctx, session, contract.CellRequest{Code: "print(1)"})
	if err != nil {
		st, serr := sc.SessionStatus(ctx, session)
		b.Fatalf("%v (the session: %s, %s, %s; %v)", err, st.State, st.End, st.Error, serr)
	}
	signer, closer, err := client.LoadReviewerKey("") // SANDBOXFLOW_REVIEWER_KEY
	if err != nil {
		b.Fatal(err)
	}
	defer closer.Close()
	start := time.Now()
	decided, err := sc.ApproveCellWait(ctx, session, sub.Cell, sub.Digest, signer, "")
	d := time.Since(start)
	if err != nil || decided.CellStatus == nil || decided.CellStatus.Result == nil || string(decided.CellStatus.Result.Stdout) != "1\n" {
		b.Fatalf("cell %d: %+v, %v", sub.Cell, decided, err)
	}
	return d
}

// cellCLIPath submits print(1) as the next cell (not timed) and times `starter approve SESSION
// --cell N --wait`, which signs, sends and prints the cell's result.
func cellCLIPath(ctx context.Context, b *testing.B, sc *client.Client, s starterCLI, session string) time.Duration {
	sub, err := sc.SubmitCell(ctx, session, contract.CellRequest{Code: "print(1)"})
	if err != nil {
		st, serr := sc.SessionStatus(ctx, session)
		b.Fatalf("%v (the session: %s, %s, %s; %v)", err, st.State, st.End, st.Error, serr)
	}
	start := time.Now()
	out := s.mustRun("approve", session, "--cell", strconv.Itoa(sub.Cell), "--wait")
	d := time.Since(start)
	dec := json.NewDecoder(bytes.NewReader(out))
	var decided client.CellDecided
	var res guard.Result
	if dec.Decode(&decided) != nil || dec.Decode(&res) != nil || string(res.Stdout) != "1\n" {
		b.Fatalf("approve --cell %d --wait printed %s", sub.Cell, out)
	}
	return d
}

// clientSample is one approve→result through the Go client, with the client-side clock times
// that phases lines up with the run's history.
type clientSample struct {
	workflowID             string
	approve, approved, end time.Time
	backend                time.Duration // the backend's own time (guard.Result.Duration)
}

// clientPath starts print(1) with the Go client (not timed) and times the approval to the result.
func clientPath(ctx context.Context, b *testing.B, sc *client.Client) clientSample {
	started, err := sc.Start(ctx, guard.Request{Language: guard.Python, Code: "print(1)"}, client.StartOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s := clientSample{workflowID: started.WorkflowID, approve: time.Now()}
	if err := approveClient(ctx, sc, started.WorkflowID, started.Digest); err != nil {
		b.Fatal(err)
	}
	s.approved = time.Now()
	res, err := sc.Result(ctx, started.WorkflowID)
	s.end = time.Now()
	if err != nil || string(res.Stdout) != "1\n" {
		b.Fatalf("result: %+v, %v", res, err)
	}
	s.backend = res.Duration
	return s
}

// throughput starts n runs, approves them all at once and returns runs per second from the
// first approval to the last result.
func throughput(ctx context.Context, b *testing.B, sc *client.Client, n int) float64 {
	started := make([]client.Started, n)
	for i := range started {
		var err error
		if started[i], err = sc.Start(ctx, guard.Request{Language: guard.Python, Code: "print(1)"}, client.StartOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, s := range started {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = approveClient(ctx, sc, s.WorkflowID, s.Digest); errs[i] != nil {
				return
			}
			res, err := sc.Result(ctx, s.WorkflowID)
			if err == nil && string(res.Stdout) != "1\n" {
				err = fmt.Errorf("run %s printed %q", s.WorkflowID, res.Stdout)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return float64(n) / d.Seconds()
}

func printE2ETable(w io.Writer, rows []e2eRow, samples, burst int, set benchSettings) {
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 0, 64) + " ms"
	}
	ratio := func(d, base time.Duration) string { return fmt.Sprintf("%.2f×", float64(d)/float64(base)) }
	fmt.Fprintf(w, "\nsandboxflow end to end: print(1), medians of %d; throughput: %d runs approved at once, --max-sandboxes %d, --warm-sandboxes %d; image %s\n\n",
		samples, burst, set.maxSandboxes, set.warm, testPythonImage())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "runtime\tdocker run --rm\tapprove→result (binaries)\tapprove→result (Go client)\trun→approve→result (binaries)\tthroughput")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s (%s)\t%s (%s)\t%.1f runs/s\n", r.runtime, ms(r.dockerRun),
			ms(r.approveCLI), ratio(r.approveCLI, r.dockerRun), ms(r.approve), ratio(r.approve, r.dockerRun),
			ms(r.whole), ratio(r.whole, r.dockerRun), r.perSecond)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\na cell print(1) in a live session (issue 28), medians of %d:\n\n", samples)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "runtime\tdocker run --rm\tcell approve→result (binaries)\tcell approve→result (Go client)")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s (%s)\n", r.runtime, ms(r.dockerRun),
			ms(r.cellCLI), ratio(r.cellCLI, r.dockerRun), ms(r.cellClient), ratio(r.cellClient, r.dockerRun))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\n(×: relative to docker run --rm of the same container under the same runtime)")
	for _, r := range rows {
		if r.sustained > 0 {
			fmt.Fprintf(w, "%s, %d runs in bursts of %d, sandbox worker apart from worker --dev --role workflows: %.1f runs/s sustained; "+
				"live heap grew %.1f MiB in the sandbox worker, %.1f MiB in the server and workflow process\n",
				r.runtime, set.heapRuns, burst, r.sustained, r.heapGrowth, r.devHeapGrowth)
		}
	}
	for _, r := range rows {
		fmt.Fprintf(w, "\nwhere approve→result goes (Go client, %s; medians of each phase, from the runs' histories):\n", r.runtime)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, p := range r.phases {
			fmt.Fprintf(tw, "  %s\t%s\n", p.name, ms(p.median))
		}
		_ = tw.Flush()
	}
}

// starterCLI runs bin/starter with env.
type starterCLI struct {
	b   *testing.B
	bin string
	env []string
}

func (s starterCLI) mustRun(args ...string) []byte {
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), s.env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		s.b.Fatalf("starter %v: %v: %s %s", args, err, out.Bytes(), errOut.Bytes())
	}
	return out.Bytes()
}

// buildBinaries builds bin/worker and bin/starter into a temporary directory.
func buildBinaries(b *testing.B) (worker, starter string) {
	dir := b.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", "github.com/sandboxflow/sandboxflow/worker", "github.com/sandboxflow/sandboxflow/starter").CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "worker"), filepath.Join(dir, "starter")
}

// startBenchWorker starts `worker --dev` with the Docker backend under rt and returns the
// frontend address and a function that stops the worker (also called when b ends), so that an
// idle server does not weigh on the next runtime's figures.
func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBenchWorker starts worker --dev (server, workflows and sandboxes in one process) with the
// Docker backend under rt.
func startBenchWorker(b *testing.B, bin, rt string, set benchSettings) (addr, metricsURL string, stop func()) {
	addr, metricsAddr := freeAddr(b), freeAddr(b)
	dataDir := b.TempDir()
	// worker --dev makes its development reviewer key here; the benchmark signs with it.
	b.Setenv("SANDBOXFLOW_REVIEWER_KEY", filepath.Join(dataDir, "reviewer", "id_ed25519"))
	stop = startWorkerProcess(b, bin, "--dev", "--data-dir", dataDir, "--ui-port", "-1", "--inbox-port", "-1", "--address", addr,
		"--task-queue", benchQueue(), "--docker-image", testPythonImage(), "--docker-runtime", rt,
		"--max-sandboxes", strconv.Itoa(set.maxSandboxes), "--warm-sandboxes", strconv.Itoa(set.warm), "--metrics-listen", metricsAddr)
	return addr, "http://" + metricsAddr + "/metrics", stop
}

// startWorkerProcess starts bin/worker with args and waits until it runs; stop ends it.
func startWorkerProcess(b *testing.B, bin string, args ...string) (stop func()) {
	var logs lockedBuffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SANDBOXFLOW_KEY_FILE=")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	b.Cleanup(stop)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(logs.String(), "worker running") {
		select {
		case <-done:
			b.Fatalf("worker %v exited:\n%s", args, logs.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("worker %v not running after 2 minutes:\n%s", args, logs.String())
		}
	}
	return stop
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Clone(l.buf.String())
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// phase is one step of approve→result and its median.
type phase struct {
	name   string
	median time.Duration
}

// phases splits each client sample's approve→result at the events of its history (server
// timestamps; client and server share this host's clock) and returns the median of each step.
func phases(ctx context.Context, b *testing.B, tc tclient.Client, samples []clientSample) []phase {
	names := []string{
		"approve call → update accepted (workflow task)",
		"update accepted → approve call returns",
		"update accepted → activity scheduled",
		"activity scheduled → started (task queue dispatch)",
		"activity started → completed",
		"  of which the Docker backend (warm or cold container, run)",
		"activity completed → workflow completed (workflow task)",
		"workflow completed → result returned to the client",
	}
	steps := make([][]time.Duration, len(names))
	for _, s := range samples {
		ev := map[enumspb.EventType]time.Time{}
		it := tc.GetWorkflowHistory(ctx, s.workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				b.Fatalf("history of %s: %v", s.workflowID, err)
			}
			if _, seen := ev[e.GetEventType()]; !seen {
				ev[e.GetEventType()] = e.GetEventTime().AsTime()
			}
		}
		accepted := ev[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]
		scheduled := ev[enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
		started := ev[enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED]
		completed := ev[enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
		closed := ev[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED]
		for i, d := range []time.Duration{
			accepted.Sub(s.approve), s.approved.Sub(accepted), scheduled.Sub(accepted), started.Sub(scheduled),
			completed.Sub(started), s.backend, closed.Sub(completed), s.end.Sub(closed),
		} {
			steps[i] = append(steps[i], d)
		}
	}
	out := make([]phase, len(names))
	for i, n := range names {
		out[i] = phase{name: n, median: median(steps[i])}
	}
	return out
}
