//go:build integration

package e2e

// The fault test on the production shape (issue 32): Temporal on a PostgreSQL of the test's own,
// as separate processes; two workflow workers and two sandbox hosts (--role), each reaching the
// Temporal frontend through a TCP proxy of the test's own that cuts, stalls and delays its
// connections; the Docker backend on a dockerd of the test's own. Approved runs and sessions with
// cells go through while the test SIGKILLs sandbox hosts, cuts each worker's connection for
// longer than the heartbeat timeout, restarts PostgreSQL, SIGKILLs and restarts the Temporal
// server and restarts dockerd. Every run and cell must end with a result or a typed error, none
// may run twice (counted outside the sandbox: an upstream each run calls through the egress
// proxy, and container starts from Docker's events), and no labelled container may be left
// once the reaper's interval has passed.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	tclient "go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/devserver/pgtemporal"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

const (
	pfRuns     = 100
	pfSessions = 3
	pfCells    = 3
	// pfHeartbeat is the sandbox activity's heartbeat timeout; each cut lasts longer.
	pfHeartbeat = 3 * time.Second
	pfCut       = 5 * time.Second
	// pfLateWait is the runs' late-result wait (--late-result-wait).
	pfLateWait = 30 * time.Second
	// pfReapAge is the reaper's threshold with the hosts' flags (see soakReapAge); a session's
	// container goes at the first reap after its session ended.
	pfReapAge = soakReapAge
)

// faultProxy forwards TCP connections from its own loopback port to target, and on demand cuts
// them (closes every connection and refuses new ones), stalls them (stops forwarding without
// closing) or delays every chunk.
type faultProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	cut     bool
	stalled chan struct{} // closed when a stall ends; nil when none
	delay   time.Duration
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cutConns()
	})
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.cut
		if !refuse {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		go p.pipe(c)
	}
}

func (p *faultProxy) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.drop(c)
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		up.Close()
		p.drop(c)
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.copy(up, c); done <- struct{}{} }()
	go func() { p.copy(c, up); done <- struct{}{} }()
	<-done
	p.drop(c)
	p.drop(up)
	<-done
}

// copy forwards src to dst chunk by chunk, waiting out a stall and the delay before each.
func (p *faultProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			stalled, delay := p.stalled, p.delay
			p.mu.Unlock()
			if stalled != nil {
				<-stalled
			}
			if delay > 0 {
				time.Sleep(delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *faultProxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *faultProxy) cutConns() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		p.drop(c)
	}
}

// cutFor closes every connection and refuses new ones for d.
func (p *faultProxy) cutFor(d time.Duration) {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
	p.cutConns()
	time.Sleep(d)
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// stallFor stops forwarding, keeping the connections open, for d.
func (p *faultProxy) stallFor(d time.Duration) {
	ch := make(chan struct{})
	p.mu.Lock()
	p.stalled = ch
	p.mu.Unlock()
	time.Sleep(d)
	p.mu.Lock()
	p.stalled = nil
	p.mu.Unlock()
	close(ch)
}

func (p *faultProxy) setDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// ownPostgres is a PostgreSQL cluster of the test's own (scripts/setup-postgres.sh on a data dir
// and port of its own), so that restarting it touches no other test.
type ownPostgres struct {
	data, bin string
	port      int
}

func startOwnPostgres(t *testing.T) *ownPostgres {
	t.Helper()
	need.Need(t, need.Root)
	dir, err := os.MkdirTemp("", "sbfpg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the postgres user must reach its data dir
		t.Fatal(err)
	}
	pg := &ownPostgres{data: filepath.Join(dir, "data"), port: freePort(t)}
	cmd := exec.Command("bash", "../scripts/setup-postgres.sh")
	cmd.Env = append(os.Environ(), "SANDBOXFLOW_PG_PORT="+strconv.Itoa(pg.port), "SANDBOXFLOW_PG_DATA="+pg.data)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("setup-postgres.sh: %v\n%s", err, out)
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(bins)
	if len(bins) == 0 {
		t.Fatal("no PostgreSQL binaries under /usr/lib/postgresql")
	}
	pg.bin = bins[len(bins)-1]
	t.Cleanup(func() {
		_ = pg.ctl("stop", "-m", "immediate").Run()
		os.RemoveAll(dir)
	})
	return pg
}

func (pg *ownPostgres) ctl(args ...string) *exec.Cmd {
	return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(pg.bin, "pg_ctl"), "-D", pg.data, "-w", "-t", "60"}, args...)...)
}

func (pg *ownPostgres) restart(t *testing.T) {
	t.Helper()
	if out, err := pg.ctl("restart", "-m", "fast", "-l", filepath.Join(pg.data, "postgresql.log")).CombinedOutput(); err != nil {
		t.Errorf("restart PostgreSQL: %v\n%s", err, out)
	}
}

// pfCount counts, outside every sandbox, how often each run's and cell's code began: each calls
// the upstream with its own path first.
type pfCount struct {
	mu   sync.Mutex
	hits map[string]int
}

func (c *pfCount) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.hits[r.URL.Path]++
	c.mu.Unlock()
	fmt.Fprint(w, "counted")
}

func (c *pfCount) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[path]
}

// pfCode calls the upstream at path through the egress proxy (the upstream is on the sandbox's
// loopback NO_PROXY list, which the code clears), then takes a while so that faults find it
// running.
func pfCode(target, path string, sleep float64, print string) string {
	return fmt.Sprintf("import os, time, urllib.request\nos.environ.pop('no_proxy', None); os.environ.pop('NO_PROXY', None)\n"+
		"urllib.request.urlopen('http://%s%s', timeout=20).read()\ntime.sleep(%.2f)\nprint(%q)\n", target, path, sleep, print)
}

// pfTransient says whether err is one the faults cause (the frontend unreachable, slow or
// restarting) rather than an answer: only those are retried.
func pfTransient(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var canceled *serviceerror.Canceled
	var exhausted *serviceerror.ResourceExhausted
	var updateTimeout *tclient.WorkflowUpdateServiceTimeoutOrCanceledError
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &canceled) ||
		errors.As(err, &exhausted) || errors.As(err, &updateTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		status.Code(errors.Unwrap(err)) == codes.Unavailable || strings.Contains(err.Error(), "connection refused")
}

// pfRetry calls f until it succeeds, fails with an answer (not pfTransient), or ctx ends; the
// faults make calls to the frontend fail now and then.
func pfRetry[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		v, err := f(cctx)
		cancel()
		if err == nil || !pfTransient(err) || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(time.Second):
		}
	}
}

// pfApprove signs and sends each reviewer's decision for a run (the workers' --risky-quorum 2
// asks both); a resend carries the same approval id, which Temporal deduplicates.
func pfApprove(ctx context.Context, sc *client.Client, reviewers []*reviewertest.Reviewer, s client.Started) error {
	for _, r := range reviewers {
		f, err := pfRetry(ctx, func(ctx context.Context) (approval.Fields, error) {
			return sc.Statement(ctx, client.Run(s.WorkflowID), client.StatementOptions{Reviewer: r.Principal})
		})
		if err != nil {
			return fmt.Errorf("statement of %s: %w", s.WorkflowID, err)
		}
		if f.Digest != s.Digest {
			return fmt.Errorf("approve %s: the run's digest is %s, not %s", s.WorkflowID, f.Digest, s.Digest)
		}
		d, err := client.SignDecision(r.Signer, f, "fault test")
		if err != nil {
			return err
		}
		if _, err := pfRetry(ctx, func(ctx context.Context) (contract.DecideResult, error) { return sc.Decide(ctx, s.WorkflowID, d) }); err != nil {
			return fmt.Errorf("%s's approval of %s: %w", r.Principal, s.WorkflowID, err)
		}
	}
	return nil
}

func TestFaultsOnTheProductionShape(t *testing.T) {
	requireDocker(t)
	need.Need(t, need.Dockerd, need.Root)
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	// Approvals and sessions get five minutes; the results the rest.
	phase, cancelPhase := context.WithTimeout(ctx, 5*time.Minute)
	defer cancelPhase()
	workerBin, _ := binaries(t)

	// PostgreSQL, Temporal on it, and a dockerd, all of the test's own.
	pgc := startOwnPostgres(t)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	pg := pgtemporal.Config{Postgres: "127.0.0.1:" + strconv.Itoa(pgc.port), User: "temporal", Password: "temporal",
		Database: "sfpf_" + suffix, VisibilityDatabase: "sfpf_" + suffix + "_vis"}
	tbin := temporalPostgresBinary(t)
	frontend := "127.0.0.1:" + strconv.Itoa(freePort(t))
	startTemporal := func() *devWorker {
		return startProcess(t, "temporal-postgres ready", 3*time.Minute, []string{"TEMPORAL_POSTGRES_PASSWORD=" + pg.Password}, tbin,
			"--postgres", pg.Postgres, "--user", pg.User, "--database", pg.Database,
			"--visibility-database", pg.VisibilityDatabase, "--address", frontend)
	}
	temporal := startTemporal()

	d := &soakDockerd{}
	startSoakDockerd(t, d)
	t.Cleanup(func() {
		for _, id := range d.managed(t, "") {
			_ = d.docker("rm", "-f", id).Run()
		}
		d.stop(t)
		os.RemoveAll(d.dir)
	})
	image := testPythonImage()
	load := fmt.Sprintf("docker save %s | docker -H unix://%s load -q", image, d.sock)
	if out, err := exec.Command("sh", "-c", load).CombinedOutput(); err != nil {
		t.Fatalf("load %s into the test's dockerd: %v\n%s", image, err, out)
	}

	counts := &pfCount{hits: map[string]int{}}
	up := httptest.NewServer(counts)
	defer up.Close()
	target := up.Listener.Addr().String()

	// Two workflow workers and two sandbox hosts, each through a proxy of its own.
	// Every run and every cell asks for egress, so under --risky-quorum 2 each needs both
	// reviewers (the workflow workers count them, and the hosts again).
	reviewer, reviewer2 := reviewertest.New(t, "pf-reviewer"), reviewertest.New(t, "pf-reviewer-2")
	reviewers := []*reviewertest.Reviewer{reviewer, reviewer2}
	reviewersFile := reviewertest.WriteAllowedSigners(t, t.TempDir(), reviewers...)
	// Each host signs receipts with a key of its own and spools its runs in a data dir of its
	// own, which it finds again when it is started after a SIGKILL.
	hostKeys, hostsFile := pfHostKeys(t, 2)
	hostData := [2]string{t.TempDir(), t.TempDir()}
	policy := []string{"--backend", "docker", "--task-queue", "pf-workflows", "--sandbox-task-queue", "pf-sandboxes",
		"--reviewers", reviewersFile, "--risky-quorum", "2", "--max-timeout", "10s", "--default-timeout", "5s", "--grace", "2s",
		"--heartbeat-timeout", pfHeartbeat.String(), "--egress-allow", target, "--egress-private-ok", "127.0.0.0/8",
		"--max-session-lifetime", "5m", "--max-session-idle", "5m", "--hosts", hostsFile, "--late-result-wait", pfLateWait.String()}
	env := func(p *faultProxy) []string {
		return []string{"TEMPORAL_ADDRESS=" + p.addr(), "SANDBOXFLOW_KEY_FILE=", "DOCKER_HOST=unix://" + d.sock}
	}
	var wfProxies, sbProxies [2]*faultProxy
	for i := range wfProxies {
		wfProxies[i] = newFaultProxy(t, frontend)
		startWorker(t, workerBin, env(wfProxies[i]), append([]string{"--role", "workflows"}, policy...)...)
	}
	hostArgs := append([]string{"--role", "sandboxes", "--docker-image", image, "--reap-interval", "5s",
		"--max-sandboxes", "6", "--warm-sandboxes", "1", "--warm-max-age", "10s"}, policy...)
	var hostMu sync.Mutex
	var hosts [2]*devWorker
	var hostLogs []func() string
	startHost := func(i int) {
		w := startWorker(t, workerBin, env(sbProxies[i]), append([]string{"--host-key", hostKeys[i], "--host-name", pfHostName(i),
			"--data-dir", hostData[i]}, hostArgs...)...)
		hostMu.Lock()
		hosts[i] = w
		hostLogs = append(hostLogs, w.output)
		hostMu.Unlock()
	}
	for i := range sbProxies {
		sbProxies[i] = newFaultProxy(t, frontend)
		startHost(i)
	}
	events := &soakEvents{counts: map[string]map[string]int{}}
	stopEvents := events.follow(d)

	tc, err := client.Dial(ctx, client.Connection{Address: frontend})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	sc, err := client.New(client.Options{Temporal: tc, TaskQueue: "pf-workflows", Reviewer: reviewer.Principal})
	if err != nil {
		t.Fatal(err)
	}

	// Every run waits for a decision first; the faults then come while they are approved.
	started := make([]client.Started, pfRuns)
	var wg sync.WaitGroup
	startErrs := make([]error, pfRuns)
	sem := make(chan struct{}, 10)
	for i := range pfRuns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			req := guard.Request{Language: guard.Python, Settings: guard.Settings{Egress: []string{target}},
				Code: pfCode(target, fmt.Sprintf("/run/%d", i), 0.5+rand.Float64()*2, fmt.Sprintf("done %d", i))}
			started[i], startErrs[i] = sc.Start(ctx, req, client.StartOptions{WorkflowID: fmt.Sprintf("pf-run-%03d-%s", i, suffix)})
		}()
	}
	wg.Wait()
	if err := errors.Join(startErrs...); err != nil {
		t.Fatalf("start runs: %v", err)
	}

	faults := map[string]int{}
	var spans []pfFaultSpan
	var faultsMu sync.Mutex
	fault := func(name string, f func()) {
		start := time.Now()
		f()
		faultsMu.Lock()
		faults[name]++
		spans = append(spans, pfFaultSpan{kind: name, start: start, end: time.Now()})
		faultsMu.Unlock()
		t.Logf("fault: %s", name)
	}
	killHost := func(i int) {
		hostMu.Lock()
		w := hosts[i]
		hostMu.Unlock()
		_ = w.cmd.Process.Kill()
		<-w.done
		time.Sleep(time.Second)
		startHost(i)
	}
	faultsDone := make(chan struct{})
	var lastFault time.Time
	go func() {
		defer close(faultsDone)
		wfProxies[1].setDelay(20 * time.Millisecond) // one workflow worker on a slow link throughout
		steps := []struct {
			name string
			f    func()
		}{
			{pfHostKill, func() { killHost(0) }},
			{"workflow worker connection cut", func() { wfProxies[0].cutFor(pfCut) }},
			{"sandbox host connection cut", func() { sbProxies[1].cutFor(pfCut) }},
			{pfHostKill, func() { killHost(1) }},
			{"sandbox host connection stall", func() { sbProxies[0].stallFor(pfCut) }},
			{"PostgreSQL restart", func() { pgc.restart(t) }},
			{"workflow worker connection cut", func() { wfProxies[1].cutFor(pfCut) }},
			{"Temporal server SIGKILL and restart", func() {
				_ = temporal.cmd.Process.Kill()
				<-temporal.done
				temporal = startTemporal()
			}},
			{pfHostKill, func() { killHost(0) }},
			{pfDockerdRestart, func() {
				stopEvents()
				d.stop(t)
				startSoakDockerd(t, d)
				stopEvents = events.follow(d)
			}},
			{"sandbox host connection cut", func() { sbProxies[0].cutFor(pfCut) }},
			{pfHostKill, func() { killHost(1) }},
		}
		for _, s := range steps {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(2000+rand.IntN(2000)) * time.Millisecond):
			}
			fault(s.name, s.f)
		}
		wfProxies[1].setDelay(0)
		lastFault = time.Now()
	}()

	// Sessions, each with cells approved one by one, and the runs' approvals, while the faults
	// come.
	type cellEnd struct {
		path string
		res  guard.Result
		err  error
	}
	var cellMu sync.Mutex
	var cellEnds []cellEnd
	var sessionIDs []string
	for k := range pfSessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("pf-session-%d-%s", k, suffix)
			cellMu.Lock()
			sessionIDs = append(sessionIDs, id)
			cellMu.Unlock()
			// Closed whatever happened, as an orchestrator that chose the id closes its task's
			// session: an open whose answer a fault lost took effect (its retry finds the id
			// used), and a session a cell's error ended early still holds its container.
			defer func() {
				_, _ = pfRetry(phase, func(ctx context.Context) (contract.SessionStatus, error) { return sc.CloseSession(ctx, id, "done") })
			}()
			_, err := pfRetry(phase, func(ctx context.Context) (client.SessionStarted, error) {
				return sc.OpenSession(ctx, guard.SessionRequest{Languages: []string{guard.Python}, Settings: guard.Settings{Egress: []string{target}}},
					client.SessionOptions{WorkflowID: id})
			})
			if err != nil {
				cellMu.Lock()
				cellEnds = append(cellEnds, cellEnd{path: fmt.Sprintf("/session/%d/open", k), err: err})
				cellMu.Unlock()
				return
			}
			for n := 1; n <= pfCells; n++ {
				path := fmt.Sprintf("/session/%d/%d", k, n)
				res, err := pfCell(phase, sc, reviewers, id, pfCode(target, path, 0.5, fmt.Sprintf("cell %d", n)))
				cellMu.Lock()
				cellEnds = append(cellEnds, cellEnd{path: path, res: res, err: err})
				cellMu.Unlock()
				if err != nil {
					return // a lost sandbox ends its session
				}
			}
		}()
	}
	approveErrs := make([]error, pfRuns)
	approving := make([]time.Time, pfRuns)
	for i, s := range started {
		wg.Add(1)
		approving[i] = time.Now()
		go func() {
			defer wg.Done()
			approveErrs[i] = pfApprove(phase, sc, reviewers, s)
		}()
		time.Sleep(time.Duration(300+rand.IntN(600)) * time.Millisecond)
	}
	wg.Wait()
	<-faultsDone
	if err := errors.Join(approveErrs...); err != nil {
		t.Errorf("approve runs: %v", err)
	}

	// Every run ends with a result or a typed error, and began at most once.
	var results, recovered, unknown, typed, twice, cutShort, quorumRuns, quorumCells int
	typedBy := map[string]int{}
	byFault := pfTable{}
	for i, s := range started {
		res, err := pfRetry(ctx, func(ctx context.Context) (guard.Result, error) {
			rctx, cancel := context.WithTimeout(ctx, pfLateWait+time.Minute)
			defer cancel()
			return sc.Result(rctx, s.WorkflowID)
		})
		n := counts.get(fmt.Sprintf("/run/%d", i))
		faultsMu.Lock()
		kind := pfKindOf(spans, approving[i], pfClosed(ctx, tc, s.WorkflowID), pfHeartbeat+pfLateWait)
		faultsMu.Unlock()
		row := byFault.of(kind)
		if n > 1 {
			row.twice++
		}
		switch {
		case err == nil:
			results++
			row.results++
			if res.Recovered != nil {
				recovered++ // its host delivered it after the server timed its activity out
				row.recovered++
			}
			if pfApprovedByBoth(res) {
				quorumRuns++
			} else {
				t.Errorf("run %d: result approved by %+v; want both reviewers", i, res.Approvals)
			}
			switch {
			case res.OK && (n != 1 || string(res.Stdout) != fmt.Sprintf("done %d\n", i)):
				t.Errorf("run %d: succeeded with stdout %q after %d starts of its code; want done %d, begun once", i, res.Stdout, n, i)
			case !res.OK:
				// A fault stopped the code (a dockerd restart kills its containers; the guard's
				// backstop reports a backend that hung past timeout + grace as timed out; a cut
				// egress tunnel fails the code's first call, so the upstream may count none): the
				// result says how. Twice is counted below.
				cutShort++
				t.Logf("run %d: %s after %d starts, stderr %q", i, res.Outcome, n, res.Stderr)
			}
		case guard.TypeOf(err) != "":
			typed++
			typedBy[string(guard.TypeOf(err))]++
			if strings.Contains(err.Error(), "outcome unknown") {
				unknown++
				if n == 0 {
					// The code never called the upstream: it did not start (a worker killed after
					// the claim but before it sent the code, or a timeout before the claim was in
					// the history), yet the approval counts as used: no container held a result.
					row.unstarted++
					t.Logf("run %d: outcome unknown, its code never started: %v", i, err)
					if pfOnlyKilled(spans, approving[i], pfClosed(ctx, tc, s.WorkflowID), pfHeartbeat+pfLateWait) {
						t.Errorf("run %d went through sandbox host SIGKILLs only and ended outcome unknown though its code never started (the restarted host should have released its claim): %v", i, err)
					}
					break
				}
				row.unknown++
				if kind != pfDockerdRestart {
					t.Errorf("run %d went through %q, which leaves its container alive, and ended outcome unknown after its code started: %v", i, kind, err)
					hostMu.Lock()
					for _, l := range hostLogs {
						for _, line := range strings.Split(l(), "\n") {
							if strings.Contains(line, s.WorkflowID) {
								t.Logf("  host log: %.600s", line)
							}
						}
					}
					hostMu.Unlock()
				}
			} else {
				row.otherTyped++
			}
			if typed <= 5 {
				t.Logf("run %d: %v", i, err)
			}
		default:
			t.Errorf("run %d ended with an untyped error: %v", i, err)
		}
		if n > 1 {
			twice++
			t.Errorf("run %d began %d times", i, n)
		}
	}
	var cellResults, cellTyped int
	for _, c := range cellEnds {
		n := counts.get(c.path)
		switch {
		case c.err == nil:
			cellResults++
			if pfApprovedByBoth(c.res) {
				quorumCells++
			} else {
				t.Errorf("%s: result approved by %+v; want both reviewers", c.path, c.res.Approvals)
			}
			switch {
			case c.res.OK && n != 1:
				t.Errorf("%s: succeeded with stdout %q after %d starts; want begun once", c.path, c.res.Stdout, n)
			case !c.res.OK:
				// As a run's: a fault stopped the cell, and the result says how (a session a
				// restarted host took over lost its proxy with the dead worker: the cell's
				// first call got no answer, egress.lost, and the upstream may count none).
				// Twice is counted below.
				t.Logf("%s: cut short by a fault: %s after %d starts (egress %+v), stderr %q", c.path, c.res.Outcome, n, c.res.Egress, c.res.Stderr)
			}
		case guard.TypeOf(c.err) != "" || errors.As(c.err, new(*client.CellNotRunError)):
			cellTyped++
			t.Logf("%s: %v", c.path, c.err)
		default:
			t.Errorf("%s ended with an untyped error: %v", c.path, c.err)
		}
		if n > 1 {
			twice++
			t.Errorf("%s began %d times", c.path, n)
		}
	}

	// No labelled container is left once the reaper's interval has passed (the live hosts' warm
	// pools aside, which they empty when they stop).
	reapBy := lastFault.Add(pfReapAge + 20*time.Second)
	var left []string
	livePools := func() map[string]bool {
		hostMu.Lock()
		defer hostMu.Unlock()
		pools := map[string]bool{}
		for _, h := range hosts {
			pools[poolID(t, h.output())] = true
		}
		return pools
	}
	notPooled := func() []string {
		out, err := d.docker("ps", "-a", "--filter", "label=io.sandboxflow.managed=true", "--format", `{{.ID}} {{.Label "io.sandboxflow.warm"}}`).Output()
		if err != nil {
			t.Fatalf("docker ps: %v", err)
		}
		pools := livePools()
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if len(f) >= 1 && (len(f) < 2 || !pools[f[1]]) {
				ids = append(ids, f[0])
			}
		}
		return ids
	}
	left = notPooled()
	for len(left) > 0 && time.Now().Before(reapBy) && ctx.Err() == nil {
		time.Sleep(2 * time.Second)
		left = notPooled()
	}
	stopEvents()

	// Container starts per run, as Docker saw them, and runs sent to warm containers, as the
	// hosts logged them.
	hostMu.Lock()
	var logs []string
	for _, l := range hostLogs {
		logs = append(logs, l())
	}
	hostMu.Unlock()
	events.mu.Lock()
	runsIn := warmRuns(logs...)
	for wf, n := range events.counts["start"] {
		if wf != "" {
			runsIn[wf] += n
		}
	}
	created := 0
	for _, n := range events.counts["create"] {
		created += n
	}
	events.mu.Unlock()
	containerTwice := 0
	for wf, n := range runsIn {
		if n > 1 {
			containerTwice++
			t.Errorf("workflow %s: %d containers started for it; want at most one", wf, n)
		}
	}

	faultsMu.Lock()
	var fl []string
	total := 0
	for name, n := range faults {
		fl = append(fl, fmt.Sprintf("%s ×%d", name, n))
		total += n
	}
	faultsMu.Unlock()
	sort.Strings(fl)
	byFault.log(t)
	t.Logf("production-shape faults: %d runs, %d sessions (%d cells ended); %d faults injected (%s); "+
		"runs: %d results (%d recovered late, %d cut short by a fault), %d typed errors %v (%d outcome unknown); cells: %d results, %d typed errors; "+
		"under a quorum of 2: %d runs' and %d cells' results approved by both reviewers; run twice %d (upstream), %d (containers, of %d created); "+
		"%d labelled containers left after the reaper's interval",
		pfRuns, len(sessionIDs), len(cellEnds), total, strings.Join(fl, ", "), results, recovered, cutShort, typed, typedBy, unknown, cellResults, cellTyped, quorumRuns, quorumCells,
		twice, containerTwice, created, len(left))
	if results+typed != pfRuns {
		t.Errorf("%d of %d runs ended with a result or a typed error", results+typed, pfRuns)
	}
	// How many runs end with their result depends on the machine (how long Docker takes to start
	// a container against the faults' timing): measured above, not held to a figure. A run that
	// ended with no run at all would have tested nothing.
	if results == 0 {
		t.Errorf("none of %d runs ended with a result: the faults left nothing working to test", pfRuns)
	}
	if len(left) > 0 {
		t.Errorf("%d labelled containers left after the reaper's interval: %v", len(left), left)
		// What each is, and what the hosts said of it: enough to tell whose it was.
		for _, id := range left {
			out, _ := d.docker("inspect", "--format", `{{.Name}} {{.State.Status}} created {{.Created}} labels {{json .Config.Labels}}`, id).CombinedOutput()
			t.Logf("left %s: %s", id, strings.TrimSpace(string(out)))
			for _, l := range logs {
				for _, line := range strings.Split(l, "\n") {
					if strings.Contains(line, id) {
						t.Logf("  host log: %s", line)
					}
				}
			}
		}
	}
	if ctx.Err() != nil {
		t.Errorf("the fault test ran over its 9 minutes")
	}
}

// pfApprovedByBoth reports whether res names two approvals by distinct reviewers, as the
// sandbox host verified them.
func pfApprovedByBoth(res guard.Result) bool {
	return len(res.Approvals) == 2 && res.Approvals[0].Reviewer != res.Approvals[1].Reviewer
}

// pfCell submits a cell, approves it and waits for its end through the faults; the cell's end is
// its result or its typed error. A call whose answer the faults lost is not simply sent again
// (a second submit is a second cell, a second approval another decision): the session's status
// says whether it took effect.
func pfCell(ctx context.Context, sc *client.Client, reviewers []*reviewertest.Reviewer, id, code string) (guard.Result, error) {
	status := func() (contract.SessionStatus, error) {
		return pfRetry(ctx, func(ctx context.Context) (contract.SessionStatus, error) { return sc.SessionStatus(ctx, id) })
	}
	var cell contract.CellStatus
	for cell.Cell == 0 {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		sub, err := sc.SubmitCell(cctx, id, contract.CellRequest{Code: code, Language: guard.Python})
		cancel()
		if guard.TypeOf(err) != "" {
			return guard.Result{}, err
		}
		st, serr := status()
		if serr != nil {
			return guard.Result{}, serr
		}
		for _, c := range st.Cells {
			if c.Code == code && (err != nil || c.Cell == sub.Cell) {
				cell = c
			}
		}
		if ctx.Err() != nil {
			return guard.Result{}, ctx.Err()
		}
	}
	for cell.State == contract.StatusAwaitingApproval {
		// The next reviewer whose approval the cell does not hold yet (a quorum of 2).
		r := reviewers[min(len(cell.Approvals), len(reviewers)-1)]
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := sc.WithReviewer(r.Principal).Approve(cctx, client.Cell(id, cell.Cell), cell.Digest, r.Signer, "fault test")
		cancel()
		st, serr := status()
		if serr != nil {
			return guard.Result{}, serr
		}
		for _, c := range st.Cells {
			if c.Cell == cell.Cell {
				cell = c
			}
		}
		if cell.State == contract.StatusAwaitingApproval && guard.TypeOf(err) != "" {
			return guard.Result{}, err
		}
		if ctx.Err() != nil {
			return guard.Result{}, ctx.Err()
		}
	}
	st, err := pfRetry(ctx, func(ctx context.Context) (contract.CellStatus, error) { return sc.AwaitCell(ctx, id, cell.Cell) })
	if err != nil {
		return guard.Result{}, err
	}
	return client.CellOutcome(id, st)
}
