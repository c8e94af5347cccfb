//go:build integration

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	tclient "go.temporal.io/sdk/client"
	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/devserver/pgtemporal"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// The PostgreSQL the test uses: scripts/setup-postgres.sh's cluster unless
// SANDBOXFLOW_TEST_POSTGRES (host:port), SANDBOXFLOW_TEST_POSTGRES_USER and
// SANDBOXFLOW_TEST_POSTGRES_PASSWORD say otherwise. Each test run uses databases of its own and
// drops them afterwards.
func postgresForTest(t *testing.T) pgtemporal.Config {
	t.Helper()
	env := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	need.Need(t, need.Postgres)
	addr := need.PostgresAddr()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	return pgtemporal.Config{
		Postgres:           addr,
		User:               env("SANDBOXFLOW_TEST_POSTGRES_USER", "temporal"),
		Password:           env("SANDBOXFLOW_TEST_POSTGRES_PASSWORD", "temporal"),
		Database:           "sfpg_" + suffix,
		VisibilityDatabase: "sfpg_" + suffix + "_vis",
	}
}

var (
	tpgOnce sync.Once
	tpgBin  string
	tpgErr  error
)

// temporalPostgresBinary builds internal/devserver/pgtemporal/cmd/temporal-postgres once.
func temporalPostgresBinary(t *testing.T) string {
	t.Helper()
	worker, _ := binaries(t) // shares binDir, removed by TestMain
	tpgOnce.Do(func() {
		tpgBin = filepath.Join(filepath.Dir(worker), "temporal-postgres")
		out, err := exec.Command("go", "build", "-o", tpgBin, "github.com/sandboxflow/sandboxflow/internal/devserver/pgtemporal/cmd/temporal-postgres").CombinedOutput()
		if err != nil {
			tpgErr = fmt.Errorf("go build temporal-postgres: %v\n%s", err, out)
		}
	})
	if tpgErr != nil {
		t.Fatal(tpgErr)
	}
	return tpgBin
}

// startTemporalPostgres runs temporal-postgres (schema set-up, then the server) on fresh
// databases and returns its frontend address. The server is stopped and the databases dropped
// when t ends.
func startTemporalPostgres(t *testing.T, pg pgtemporal.Config) string {
	t.Helper()
	bin := temporalPostgresBinary(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	t.Cleanup(func() {
		if err := pgtemporal.DropDatabases(pg); err != nil {
			t.Errorf("drop test databases: %v", err)
		}
	})
	startProcess(t, "temporal-postgres ready", 3*time.Minute, []string{"TEMPORAL_POSTGRES_PASSWORD=" + pg.Password}, bin,
		"--postgres", pg.Postgres, "--user", pg.User, "--database", pg.Database,
		"--visibility-database", pg.VisibilityDatabase, "--address", addr)
	return addr
}

// startProcess starts bin ARGS and waits until its output contains ready; it is stopped with
// SIGTERM when t ends.
func startProcess(t *testing.T, ready string, within time.Duration, env []string, bin string, args ...string) *devWorker {
	t.Helper()
	w := &devWorker{log: &strings.Builder{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	w.cmd = exec.Command(bin, args...)
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stdout = lockedWriter{w.mu, w.log}
	w.cmd.Stderr = lockedWriter{w.mu, w.log}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() { w.stop(t) })
	deadline := time.Now().Add(within)
	for !strings.Contains(w.output(), ready) {
		select {
		case <-w.done:
			t.Fatalf("%s exited before it was ready:\n%s", filepath.Base(bin), w.output())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %s:\n%s", filepath.Base(bin), within, w.output())
		}
	}
	return w
}

// approveRun is the one place this file approves a run: a real decision for digest, sent the
// way a reviewer's tool sends it. When decisions must be signed, only this function changes.
// A decision whose wait times out on a loaded machine is sent again with the same approval id:
// Temporal deduplicates updates by id, so the run still gets one decision.
func approvePG(ctx context.Context, sc *client.Client, signer ssh.Signer, workflowID, digest string) error {
	f, err := sc.Statement(ctx, workflowID, client.StatementOptions{})
	if err != nil {
		return err
	}
	if f.Digest != digest {
		return fmt.Errorf("approve %s: the run's digest is %s, not %s", workflowID, f.Digest, digest)
	}
	// The same signed decision (same approval id) is resent after a timeout; Temporal
	// deduplicates it.
	d, err := client.SignDecision(signer, f, "scale test")
	if err != nil {
		return err
	}
	for {
		_, err := sc.Decide(ctx, workflowID, d)
		var timeout *serviceerror.DeadlineExceeded
		var waitTimeout *tclient.WorkflowUpdateServiceTimeoutOrCanceledError
		if err == nil || ctx.Err() != nil || (!errors.As(err, &timeout) && !errors.As(err, &waitTimeout)) {
			return err
		}
	}
}

// TestTemporalOnPostgres runs Temporal on PostgreSQL with two workflow workers and two sandbox
// workers on separate task queues, approves 100 runs at once, SIGKILLs one sandbox worker while
// it runs code, and checks that every run ends, none ran twice, the runs the lost worker held end
// as "outcome unknown" and the other worker ran the rest.
func TestTemporalOnPostgres(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	const runs = 100
	pg := postgresForTest(t)
	workerBin, _ := binaries(t)
	addr := startTemporalPostgres(t, pg)

	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE="}
	reviewer := reviewertest.New(t, "pg-reviewer")
	common := []string{"--backend", "local", "--allow-unsafe-local", "--task-queue", "pg-workflows", "--sandbox-task-queue", "pg-sandboxes",
		"--reviewers", reviewer.File}
	for range 2 {
		startWorker(t, workerBin, env, append([]string{"--role", "workflows"}, common...)...)
	}
	var sandboxWorkers [2]*devWorker
	for i := range sandboxWorkers {
		sandboxWorkers[i] = startWorker(t, workerBin, env, append([]string{"--role", "sandboxes", "--max-sandboxes", "8"}, common...)...)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tc, err := client.Dial(ctx, client.Connection{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	sc, err := client.New(client.Options{Temporal: tc, TaskQueue: "pg-workflows", Reviewer: reviewer.Principal})
	if err != nil {
		t.Fatal(err)
	}

	marks := codeWritableDir(t)
	started := startRuns(ctx, t, sc, marks, runs)
	approveAll(ctx, t, sc, reviewer.Signer, started)

	// Kill one sandbox worker while it holds runs: once a tenth of the runs have started.
	victim := sandboxWorkers[0]
	waitMarks(ctx, t, marks, runs/10)
	killedAt := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done

	outcomes := collectResults(ctx, t, sc, started)
	for i, o := range outcomes {
		if o.err != nil {
			outcomes[i].startedBy = activityStartedBy(ctx, t, tc, started[i].WorkflowID)
		}
	}
	checkPostgresRuns(t, marks, outcomes, victim.cmd.Process.Pid, sandboxWorkers[1].cmd.Process.Pid, killedAt)
}

// runCode is run i's code: it records which process ran it (its parent, the sandbox worker) in
// a file of its own, outside the sandbox, then takes a while so that a kill finds runs in flight.
func runCode(marks string, i int) string {
	return fmt.Sprintf("import os, time\nwith open(%q, 'a') as f:\n    f.write('%%d\\n' %% os.getppid())\ntime.sleep(1.5)\nprint('done %d')\n",
		filepath.Join(marks, fmt.Sprintf("run-%03d", i)), i)
}

func startRuns(ctx context.Context, t *testing.T, sc *client.Client, marks string, n int) []client.Started {
	t.Helper()
	started := make([]client.Started, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 10)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			started[i], errs[i] = sc.Start(ctx, guard.Request{Language: guard.Python, Code: runCode(marks, i)},
				client.StartOptions{WorkflowID: fmt.Sprintf("pg-run-%03d-%d", i, time.Now().UnixNano())})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("start runs: %v", err)
	}
	return started
}

// approveAll approves every run at once, each in its own goroutine.
func approveAll(ctx context.Context, t *testing.T, sc *client.Client, signer ssh.Signer, started []client.Started) {
	t.Helper()
	errs := make([]error, len(started))
	var wg sync.WaitGroup
	for i, s := range started {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = approvePG(ctx, sc, signer, s.WorkflowID, s.Digest)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("approve runs: %v", err)
	}
}

func waitMarks(ctx context.Context, t *testing.T, dir string, n int) {
	t.Helper()
	for {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("only %d runs started before the deadline; want %d", len(entries), n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// outcome is how one run ended.
type outcome struct {
	res guard.Result
	err error
	// startedBy is the identity of the worker that started the last sandbox activity (only
	// read for runs that failed): the SDK's default, "PID@HOST@".
	startedBy string
}

// activityStartedBy returns the identity recorded in the run's last ActivityTaskStarted event.
func activityStartedBy(ctx context.Context, t *testing.T, tc tclient.Client, workflowID string) string {
	t.Helper()
	var identity string
	it := tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			identity = a.GetIdentity()
		}
	}
	return identity
}

func collectResults(ctx context.Context, t *testing.T, sc *client.Client, started []client.Started) []outcome {
	t.Helper()
	out := make([]outcome, len(started))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 20)
	for i, s := range started {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i].res, out[i].err = sc.Result(ctx, s.WorkflowID)
		}()
	}
	wg.Wait()
	return out
}

// checkPostgresRuns checks every run against its marker file: a run that succeeded ran exactly
// once; a run that failed did so as "outcome unknown" on the killed worker and ran at most once;
// the surviving worker ran runs after the kill.
func checkPostgresRuns(t *testing.T, marks string, outcomes []outcome, victimPID, survivorPID int, killedAt time.Time) {
	t.Helper()
	var ok, unknown, lostElsewhere, bySurvivorAfterKill int
	for i, o := range outcomes {
		mark := filepath.Join(marks, fmt.Sprintf("run-%03d", i))
		b, err := os.ReadFile(mark)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		var startedAt time.Time // when the code began: its marker's first write
		if fi, err := os.Stat(mark); err == nil {
			startedAt = fi.ModTime()
		}
		lines := strings.Fields(string(b))
		if len(lines) > 1 {
			t.Errorf("run %d ran %d times (by %v); want at most once", i, len(lines), lines)
		}
		switch {
		case o.err == nil:
			ok++
			if !o.res.OK || string(o.res.Stdout) != fmt.Sprintf("done %d\n", i) || len(lines) != 1 {
				t.Errorf("run %d: result %+v with %d executions; want done %d, once", i, o.res, len(lines), i)
			}
			if len(lines) == 1 && lines[0] == strconv.Itoa(victimPID) && startedAt.After(killedAt) {
				t.Errorf("run %d started on pid %d after that worker was killed", i, victimPID)
			}
			if len(lines) == 1 && lines[0] == strconv.Itoa(survivorPID) && startedAt.After(killedAt) {
				bySurvivorAfterKill++
			}
		default:
			var ie *guard.IntegrationError
			if !errors.As(o.err, &ie) || !strings.Contains(ie.Error(), "outcome unknown") {
				t.Errorf("run %d: error %v; want an IntegrationError, outcome unknown", i, o.err)
			}
			if len(lines) == 1 && lines[0] != strconv.Itoa(victimPID) {
				t.Errorf("run %d: outcome unknown but ran on pid %s, not the killed worker %d: %v", i, lines[0], victimPID, o.err)
			}
			byVictim := strings.HasPrefix(o.startedBy, strconv.Itoa(victimPID)+"@")
			if !byVictim && len(lines) != 0 {
				t.Errorf("run %d: outcome unknown on %q, which was not killed, after its code ran: %v", i, o.startedBy, o.err)
			}
			if !byVictim {
				// Seen on this 2-core machine at load 40-50: the activity is recorded as started
				// by the surviving worker, which never runs it within the heartbeat timeout (no
				// marker). Safe: the code never ran, and the run says its outcome is unknown.
				t.Logf("run %d: activity started by %q but its code never ran; ended: %v", i, o.startedBy, o.err)
				lostElsewhere++
			}
			if unknown < 3 {
				t.Logf("run %d (executions %v, started by %s): %v", i, lines, o.startedBy, o.err)
			}
			unknown++
		}
	}
	t.Logf("%d runs: %d succeeded, %d outcome unknown (%d held by the killed worker, %d never run by the other), %d started on the other worker after the kill",
		len(outcomes), ok, unknown, unknown-lostElsewhere, lostElsewhere, bySurvivorAfterKill)
	if unknown-lostElsewhere == 0 {
		t.Errorf("no run was held by the killed worker: the kill came too late to test anything")
	}
	if bySurvivorAfterKill == 0 {
		t.Errorf("no run finished on the surviving sandbox worker after the kill")
	}
}
