//go:build integration

package workflows_test

// Integration tests: a real Temporal server in-process (internal/testkit/devtest), real workers, and
// the local backend running real Python.

import (
	"bufio"
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

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// Environment of the worker process that TestIntegrationWorkerKilledWhileRunning starts: the test
// binary runs itself with these set and acts as a worker until it is killed.
const (
	envWorkerAddress   = "SANDBOXFLOW_TEST_WORKER_ADDRESS"
	envWorkerNamespace = "SANDBOXFLOW_TEST_WORKER_NAMESPACE"
	envWorkerQueue     = "SANDBOXFLOW_TEST_WORKER_QUEUE"
	envWorkerPython    = "SANDBOXFLOW_TEST_WORKER_PYTHON"
	envWorkerReviewers = "SANDBOXFLOW_TEST_WORKER_REVIEWERS"
	// envWorkerSandboxOnly, set to a policy's max timeout ("2h"), makes the worker process a
	// sandbox host only (the sandbox activity on the queue, no workflows) under that max
	// timeout: TestIntegrationLongRunLostHost.
	envWorkerSandboxOnly = "SANDBOXFLOW_TEST_WORKER_SANDBOX_ONLY"
	// envRecordHistory, set to 1, makes the tests that run a fixture's story re-record it in
	// testdata/ (historytest.Recorded).
	envRecordHistory = historytest.EnvRecord
)

// replayer is a workflow replayer with the worker's workflows registered.
func replayer() worker.WorkflowReplayer {
	r := worker.NewWorkflowReplayer()
	workflows.Register(r)
	return r
}

func TestMain(m *testing.M) {
	if addr := os.Getenv(envWorkerAddress); addr != "" {
		if err := workerProcess(addr, os.Getenv(envWorkerNamespace), os.Getenv(envWorkerQueue), os.Getenv(envWorkerPython), os.Getenv(envWorkerReviewers)); err != nil {
			fmt.Fprintln(os.Stderr, "worker process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// workerProcess runs a worker against the test's server until the process is killed.
func workerProcess(addr, namespace, queue, python, reviewers string) error {
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: namespace})
	if err != nil {
		return err
	}
	defer c.Close()
	b, err := local.New(local.Config{AllowUnsafeLocal: true, Python: python})
	if err != nil {
		return err
	}
	cfg := integrationConfig(b, activities.SlogSink{}, reviewers)
	sandboxOnly := os.Getenv(envWorkerSandboxOnly)
	if sandboxOnly != "" {
		if cfg.Policy.MaxTimeout, err = time.ParseDuration(sandboxOnly); err != nil {
			return err
		}
	}
	acts, err := activities.New(cfg)
	if err != nil {
		return err
	}
	w := worker.New(c, queue, worker.Options{MaxHeartbeatThrottleInterval: activities.MaxHeartbeatInterval})
	if sandboxOnly == "" {
		workflows.Register(w)
	}
	acts.Register(w)
	if err := w.Start(); err != nil {
		return err
	}
	fmt.Println("ready")
	select {}
}

// integrationConfig is the configuration every integration worker uses, in-process or not, so
// that whichever checks a request, the same policy applies.
func integrationConfig(b guard.Backend, sink activities.Sink, reviewers string) activities.Config {
	return activities.Config{
		ReviewersFile:    reviewers,
		Policy:           guard.Policy{Languages: []string{guard.Python, guard.Shell}, ApprovalTimeout: time.Hour},
		Backend:          b,
		Sink:             sink,
		HeartbeatTimeout: 2 * time.Second,
		StartBackoff:     200 * time.Millisecond,
		MaxStartBackoff:  time.Second,
	}
}

var (
	pythonOnce sync.Once
	pythonPath string
	pythonErr  error
)

// python returns the real interpreter behind python3 (a pyenv shim does not run in the local
// backend's empty environment).
func python(t *testing.T) string {
	t.Helper()
	pythonOnce.Do(func() {
		var out []byte
		out, pythonErr = exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
		pythonPath = strings.TrimSpace(string(out))
	})
	if pythonErr != nil || pythonPath == "" {
		t.Fatalf("the integration tests need python3 on PATH: %v", pythonErr)
	}
	return pythonPath
}

// itest is one integration test's server, client and workers.
type itest struct {
	t     *testing.T
	ts    *temporaltest.TestServer
	c     client.Client
	queue string
	sink  *activities.MemorySink
	// alice is the reviewer listed in reviewers, the workers' reviewers file.
	alice     *reviewertest.Reviewer
	reviewers string
}

func newITest(t *testing.T) *itest {
	t.Helper()
	ts := devtest.Start(t)
	alice := reviewertest.New(t, "alice")
	return &itest{t: t, ts: ts, c: ts.GetDefaultClient(), queue: "sandboxflow-it", sink: &activities.MemorySink{},
		alice: alice, reviewers: alice.File}
}

// fields is the statement for the run id as its status shows it now: its run id, digest and
// sandbox task queue, with a fresh approval id.
func (it *itest) fields(id string, approve bool) approval.Fields {
	it.t.Helper()
	st := it.waitState(id, contract.StatusAwaitingApproval)
	return reviewertest.Fields(st.WorkflowID, st.RunID, st.Request.Digest, st.SandboxTaskQueue, approve)
}

// signed is alice's decision for the run id as it is now.
func (it *itest) signed(id string, approve bool) contract.Decision {
	it.t.Helper()
	return it.alice.Decision(it.t, it.fields(id, approve))
}

func (it *itest) localBackend() *local.Backend {
	it.t.Helper()
	b, err := local.New(local.Config{AllowUnsafeLocal: true, Python: python(it.t)})
	if err != nil {
		it.t.Fatalf("local backend: %v", err)
	}
	return b
}

// worker starts an in-process worker on queue with the integration configuration around b,
// changed by mod if given, and with any extra registrations.
func (it *itest) worker(queue string, b guard.Backend, mod func(*activities.Config), extra ...func(worker.Registry)) worker.Worker {
	it.t.Helper()
	cfg := integrationConfig(b, it.sink, it.reviewers)
	if mod != nil {
		mod(&cfg)
	}
	return it.workerWithOptions(queue, cfg, worker.Options{}, extra...)
}

// workerWithOptions starts an in-process worker on queue with the activities of cfg and opts.
func (it *itest) workerWithOptions(queue string, cfg activities.Config, opts worker.Options, extra ...func(worker.Registry)) worker.Worker {
	it.t.Helper()
	acts, err := activities.New(cfg)
	if err != nil {
		it.t.Fatalf("activities: %v", err)
	}
	return it.ts.NewWorkerWithOptions(queue, func(r worker.Registry) {
		workflows.Register(r)
		acts.Register(r)
		for _, reg := range extra {
			reg(r)
		}
	}, opts)
}

func (it *itest) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	it.t.Cleanup(cancel)
	return ctx
}

func (it *itest) start(id, queue string, req guard.Request) client.WorkflowRun {
	it.t.Helper()
	run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: queue},
		contract.WorkflowName, contract.Input{Request: req})
	if err != nil {
		it.t.Fatalf("start %s: %v", id, err)
	}
	return run
}

// status queries the run's status.
func (it *itest) status(id string) (contract.Status, error) {
	v, err := it.c.QueryWorkflow(it.ctx(10*time.Second), id, "", contract.QueryStatus)
	if err != nil {
		return contract.Status{}, err
	}
	var st contract.Status
	return st, v.Get(&st)
}

// waitStatus polls the status until ok accepts it.
func (it *itest) waitStatus(id string, what string, ok func(contract.Status) bool) contract.Status {
	it.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := it.status(id)
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			it.t.Fatalf("%s: status never showed %s (last %+v, %v)", id, what, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (it *itest) waitState(id, state string) contract.Status {
	it.t.Helper()
	return it.waitStatus(id, state, func(st contract.Status) bool { return st.State == state })
}

// waitVisible polls a visibility query (eventually consistent) until the run is listed under
// SandboxStatus=want[SandboxStatus] with every search attribute in want.
func (it *itest) waitVisible(id string, want map[string]string) {
	it.t.Helper()
	query := fmt.Sprintf("WorkflowId = '%s' AND %s = '%s'", id, contract.AttrStatus, want[contract.AttrStatus])
	deadline := time.Now().Add(30 * time.Second)
	var got map[string]string
	for {
		resp, err := it.c.ListWorkflow(it.ctx(10*time.Second), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: it.ts.GetDefaultNamespace(), Query: query,
		})
		if err == nil && len(resp.GetExecutions()) == 1 {
			got = map[string]string{}
			for name, p := range resp.GetExecutions()[0].GetSearchAttributes().GetIndexedFields() {
				var s string
				if converter.GetDefaultDataConverter().FromPayload(p, &s) == nil {
					got[name] = s
				}
			}
			match := true
			for k, v := range want {
				match = match && got[k] == v
			}
			if match {
				return
			}
		}
		if time.Now().After(deadline) {
			it.t.Fatalf("visibility query %q never listed %s with %v (last seen %v, %v)", query, id, want, got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (it *itest) signal(id string, d any) {
	it.t.Helper()
	if err := it.c.SignalWorkflow(it.ctx(10*time.Second), id, "", contract.SignalApproval, d); err != nil {
		it.t.Fatalf("signal %s: %v", id, err)
	}
}

// decide sends d as the update and returns its result or its rejection.
func (it *itest) decide(id string, d contract.Decision) (contract.DecideResult, error) {
	h, err := it.c.UpdateWorkflow(it.ctx(20*time.Second), client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: contract.UpdateDecide, Args: []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return contract.DecideResult{}, err
	}
	var res contract.DecideResult
	return res, h.Get(it.ctx(20*time.Second), &res)
}

func (it *itest) result(run client.WorkflowRun) (guard.Result, error) {
	var res guard.Result
	err := run.Get(it.ctx(90*time.Second), &res)
	return res, err
}

func (it *itest) history(id string) []*historypb.HistoryEvent {
	it.t.Helper()
	iter := it.c.GetWorkflowHistory(it.ctx(10*time.Second), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			it.t.Fatalf("history of %s: %v", id, err)
		}
		events = append(events, e)
	}
	return events
}

// countRunActivities counts the sandbox activities scheduled in a history, and how each ended.
func countRunActivities(events []*historypb.HistoryEvent) (scheduled int, ends map[enumspb.EventType]int) {
	ends = map[enumspb.EventType]int{}
	runIDs := map[int64]bool{}
	for _, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.RunActivityName {
				scheduled++
				runIDs[e.GetEventId()] = true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if runIDs[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				ends[e.GetEventType()]++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			if runIDs[e.GetActivityTaskFailedEventAttributes().GetScheduledEventId()] {
				ends[e.GetEventType()]++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			if runIDs[e.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()] {
				ends[e.GetEventType()]++
			}
		}
	}
	return scheduled, ends
}

// digestOf is the digest the integration workers give req.
func digestOf(t *testing.T, req guard.Request) string {
	t.Helper()
	c, err := integrationConfig(nil, nil, "").Policy.Check(req, local.Name)
	if err != nil {
		t.Fatal(err)
	}
	return c.Digest
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// waitLines waits until the file has at least n lines.
func waitLines(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if l := lines(t, path); len(l) >= n {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never had %d lines", path, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// markCode appends the interpreter's pid to the file named by $MARK, then sleeps.
const markCode = `import os, time
with open(os.environ["MARK"], "a") as f:
    f.write(str(os.getpid()) + "\n")
time.sleep(float(os.environ.get("SLEEP", "0")))
print("done")
`

func TestIntegrationApproveBySignalWithSearchAttributesAtEachStage(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	gate := filepath.Join(t.TempDir(), "gate")
	req := guard.Request{
		Code: `import os, time
while not os.path.exists(os.environ["GATE"]):
    time.sleep(0.05)
print("hello from python")
`,
		Settings: guard.Settings{
			Env:    map[string]string{"GATE": gate},
			Limits: guard.Limits{Timeout: time.Minute},
		},
	}
	dg := digestOf(t, req)
	const id = "it-signal"
	run := it.start(id, it.queue, req)

	it.waitVisible(id, map[string]string{
		contract.AttrStatus: contract.StatusAwaitingApproval, contract.AttrDigest: dg,
		contract.AttrLanguage: guard.Python, contract.AttrBackend: local.Name,
	})
	st := it.waitState(id, contract.StatusAwaitingApproval)
	if st.Request.Digest != dg || !strings.Contains(st.Request.Code, "hello from python") || len(st.Request.EnvNames) != 1 {
		t.Errorf("status request = %+v; want the digest, the code and one env name", st.Request)
	}

	// Decisions as any client sends them: plain JSON objects.
	it.signal(id, map[string]any{"approval_id": uuid.NewString(), "digest": "sha256:" + strings.Repeat("0", 64), "approve": true, "reviewer": "mallory", "reason": ""})
	it.waitStatus(id, "one rejected decision", func(st contract.Status) bool {
		return st.RejectedDecisions == 1 && st.State == contract.StatusAwaitingApproval
	})
	d := it.signed(id, true)
	approvalID := d.ApprovalID
	it.signal(id, map[string]any{"approval_id": approvalID, "digest": dg, "approve": true, "reason": "",
		"expires": d.Expires.Format(time.RFC3339), "reviewer": d.Reviewer, "signature": d.Signature})

	it.waitVisible(id, map[string]string{contract.AttrStatus: contract.StatusRunning, contract.AttrReviewer: "alice", contract.AttrDigest: dg})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := it.result(run)
	if err != nil {
		t.Fatalf("result: %v", err)
	}
	if !res.OK || string(res.Stdout) != "hello from python\n" || res.ApprovalID != approvalID || res.Reviewer != "alice" || res.Digest != dg || res.Backend != local.Name {
		t.Errorf("result = %+v; want ok, the output, the approval, the digest and the local backend", res)
	}
	it.waitVisible(id, map[string]string{
		contract.AttrStatus: contract.StatusSucceeded, contract.AttrReviewer: "alice", contract.AttrDigest: dg,
		contract.AttrLanguage: guard.Python, contract.AttrBackend: local.Name,
	})

	evs := it.sink.Events()
	if len(evs) != 2 {
		t.Fatalf("events %v; want sandbox.started and sandbox.finished", evs)
	}
	if text := fmt.Sprint(evs); strings.Contains(text, "hello from python") || strings.Contains(text, gate) {
		t.Errorf("events carry code, output or env values without capture_content: %s", text)
	}
}

func TestIntegrationApproveByUpdate(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	req := guard.Request{Code: "print(6 * 7)", Settings: guard.Settings{CaptureContent: true}}
	dg := digestOf(t, req)
	const id = "it-update"
	run := it.start(id, it.queue, req)
	it.waitState(id, contract.StatusAwaitingApproval)

	for _, bad := range []struct {
		d   contract.Decision
		why string
	}{
		{contract.Decision{ApprovalID: uuid.NewString(), Digest: dg, Approve: true}, "unsigned"},
		{contract.Decision{ApprovalID: "not-a-uuid", Digest: dg, Approve: true, Reviewer: "alice"}, "not a UUID"},
		{contract.Decision{ApprovalID: uuid.NewString(), Digest: "sha256:ff", Approve: true, Reviewer: "alice"}, "wrong digest"},
	} {
		_, err := it.decide(id, bad.d)
		var appErr *temporal.ApplicationError
		if err == nil || !strings.Contains(err.Error(), bad.why) || !errors.As(err, &appErr) || appErr.Type() != contract.DecisionRejectedType {
			t.Errorf("update %+v: %v; want a %s rejection saying %q", bad.d, err, contract.DecisionRejectedType, bad.why)
		}
	}
	d := it.signed(id, true)
	approvalID := d.ApprovalID
	got, err := it.decide(id, d)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if got.State != contract.StatusRunning || got.ApprovalID != approvalID {
		t.Errorf("update result = %+v; want running, approval %s", got, approvalID)
	}
	res, err := it.result(run)
	if err != nil || !res.OK || string(res.Stdout) != "42\n" || res.ApprovalID != approvalID {
		t.Fatalf("result = %+v, %v; want 42 approved by %s", res, err, approvalID)
	}
	if _, err := it.decide(id, contract.Decision{ApprovalID: uuid.NewString(), Digest: dg, Approve: true, Reviewer: "bob"}); err == nil {
		t.Error("an update after the run was accepted")
	}
	// capture_content: the events carry the code and the output.
	if text := fmt.Sprint(it.sink.Events()); !strings.Contains(text, "print(6 * 7)") || !strings.Contains(text, "42") {
		t.Errorf("events lack code or output with capture_content: %s", text)
	}
	if scheduled, _ := countRunActivities(it.history(id)); scheduled != 1 {
		t.Errorf("%d sandbox activities scheduled; want 1", scheduled)
	}
}

func TestIntegrationFinalSearchAttributes(t *testing.T) {
	it := newITest(t)
	b := it.localBackend()
	it.worker(it.queue, b, nil)
	const shortQueue = "sandboxflow-it-short"
	it.worker(shortQueue, b, func(c *activities.Config) { c.Policy.ApprovalTimeout = 2 * time.Second })

	for _, tc := range []struct {
		id, queue string
		req       guard.Request
		decide    bool
		approve   bool
		want      string
		check     func(guard.Result, error) string
	}{
		{"it-failed", it.queue, guard.Request{Code: "raise SystemExit(3)"}, true, true, contract.StatusFailed,
			func(r guard.Result, err error) string {
				if err != nil || r.ExitCode != 3 || r.OK {
					return fmt.Sprintf("got %+v, %v; want exit 3", r, err)
				}
				return ""
			}},
		{"it-timed-out", it.queue, guard.Request{Code: "import time\ntime.sleep(30)", Settings: guard.Settings{Limits: guard.Limits{Timeout: time.Second}}}, true, true, contract.StatusTimedOut,
			func(r guard.Result, err error) string {
				if err != nil || !r.TimedOut || r.ExitCode != -1 {
					return fmt.Sprintf("got %+v, %v; want timed out, exit -1", r, err)
				}
				return ""
			}},
		{"it-denied", it.queue, guard.Request{Code: "print(1)"}, true, false, contract.StatusDenied,
			func(_ guard.Result, err error) string {
				var d *guard.ApprovalDenied
				if !errors.As(contract.FromFailure(err), &d) || d.Reason != guard.DeniedByReviewer || d.Reviewer != "alice" {
					return fmt.Sprintf("got %v; want ApprovalDenied by alice", err)
				}
				return ""
			}},
		{"it-expired", shortQueue, guard.Request{Code: "print(1)"}, false, false, contract.StatusExpired,
			func(_ guard.Result, err error) string {
				var d *guard.ApprovalDenied
				if !errors.As(contract.FromFailure(err), &d) || d.Reason != guard.DeniedExpired {
					return fmt.Sprintf("got %v; want ApprovalDenied (expired)", err)
				}
				return ""
			}},
		{"it-bad-request", it.queue, guard.Request{Code: "print(1)", Language: "ruby"}, false, false, contract.StatusError,
			func(_ guard.Result, err error) string {
				var appErr *temporal.ApplicationError
				if !errors.As(err, &appErr) || appErr.Type() != guard.TypeToolUsageError {
					return fmt.Sprintf("got %v; want ToolUsageError", err)
				}
				return ""
			}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			run := it.start(tc.id, tc.queue, tc.req)
			want := map[string]string{contract.AttrStatus: tc.want}
			if tc.decide {
				dg := digestOf(t, tc.req)
				it.waitVisible(tc.id, map[string]string{contract.AttrStatus: contract.StatusAwaitingApproval})
				it.signal(tc.id, it.signed(tc.id, tc.approve))
				want[contract.AttrReviewer] = "alice"
				want[contract.AttrDigest] = dg
			}
			if msg := tc.check(it.result(run)); msg != "" {
				t.Error(msg)
			}
			it.waitVisible(tc.id, want)
		})
	}
}

func TestIntegrationWorkerKilledWhileRunning(t *testing.T) {
	it := newITest(t)
	mark := filepath.Join(t.TempDir(), "mark")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envWorkerAddress+"="+it.ts.GetFrontendHostPort(),
		envWorkerNamespace+"="+it.ts.GetDefaultNamespace(),
		envWorkerQueue+"="+it.queue,
		envWorkerPython+"="+python(t),
		envWorkerReviewers+"="+it.reviewers,
	)
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker process: %v", err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	ready := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if s.Text() == "ready" {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("worker process not ready; its stderr:\n%s", stderr.String())
	}

	req := guard.Request{Code: markCode, Settings: guard.Settings{Env: map[string]string{"MARK": mark, "SLEEP": "60"}, Limits: guard.Limits{Timeout: 90 * time.Second}}}
	const id = "it-killed"
	run := it.start(id, it.queue, req)
	it.waitState(id, contract.StatusAwaitingApproval)
	it.signal(id, it.signed(id, true))

	// The code is running in the worker process: kill the worker.
	pid, err := strconv.Atoi(waitLines(t, mark, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill worker: %v", err)
	}
	killed = true
	_ = cmd.Wait()
	// The interpreter was the dead worker's child; make sure it is gone too (it dies with its
	// parent, by the local backend's parent-death signal).
	waitGone(t, pid)

	// A fresh worker takes over the workflow.
	it.worker(it.queue, it.localBackend(), nil)
	_, err = it.result(run)
	var ie *guard.IntegrationError
	if !errors.As(contract.FromFailure(err), &ie) || !ie.CodeMayHaveStarted || !strings.Contains(err.Error(), "outcome unknown; the approval was used") {
		t.Fatalf("result error = %v; want IntegrationError, outcome unknown", err)
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != guard.TypeIntegrationError {
		t.Errorf("error %v is not an %s application error", err, guard.TypeIntegrationError)
	}
	it.waitVisible(id, map[string]string{contract.AttrStatus: contract.StatusError})

	// The code ran once: one line in the mark file, even after the new worker ran for a while,
	// and one sandbox activity in history, which timed out.
	time.Sleep(2 * time.Second)
	if got := lines(t, mark); len(got) != 1 {
		t.Errorf("the code ran %d times (%v); want once", len(got), got)
	}
	scheduled, ends := countRunActivities(it.history(id))
	if scheduled != 1 || ends[enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT] != 1 {
		t.Errorf("sandbox activities: %d scheduled, ends %v; want 1, timed out", scheduled, ends)
	}
}

// waitGone waits until no process has pid, killing it if it outlives its parent for long.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Errorf("the interpreter %d outlived its killed worker", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// flakyBackend fails with an IntegrationError from before the code could start for its first
// Failures calls (an unreachable daemon), then passes every call to the real backend.
type flakyBackend struct {
	guard.Backend
	Failures int

	mu    sync.Mutex
	calls int
}

func (f *flakyBackend) Run(ctx context.Context, c guard.Checked) (guard.Result, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if n <= f.Failures {
		return guard.Result{}, &guard.IntegrationError{Op: "flaky: connect", Err: syscall.ECONNREFUSED}
	}
	return f.Backend.Run(ctx, c)
}

func TestIntegrationBackendUnreachableBeforeStartIsRetried(t *testing.T) {
	it := newITest(t)
	flaky := &flakyBackend{Backend: it.localBackend(), Failures: 2}
	it.worker(it.queue, flaky, nil)
	mark := filepath.Join(t.TempDir(), "mark")
	req := guard.Request{Code: markCode, Settings: guard.Settings{Env: map[string]string{"MARK": mark}}}
	const id = "it-flaky"
	run := it.start(id, it.queue, req)
	it.waitState(id, contract.StatusAwaitingApproval)
	it.signal(id, it.signed(id, true))
	res, err := it.result(run)
	if err != nil || !res.OK || string(res.Stdout) != "done\n" {
		t.Fatalf("result = %+v, %v; want ok once the backend is back", res, err)
	}
	if got := lines(t, mark); len(got) != 1 {
		t.Errorf("the code ran %d times; want once", len(got))
	}
	scheduled, ends := countRunActivities(it.history(id))
	if scheduled != 3 || ends[enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED] != 2 || ends[enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED] != 1 {
		t.Errorf("sandbox activities: %d scheduled, ends %v; want 3: 2 failed, 1 completed", scheduled, ends)
	}
	if st, err := it.status(id); err != nil || st.RunAttempts != 3 || st.State != contract.StatusSucceeded {
		t.Errorf("status = %+v, %v; want succeeded after 3 run attempts", st, err)
	}
}

func TestIntegrationCancelWhileRunningStopsTheCode(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	mark := filepath.Join(t.TempDir(), "mark")
	req := guard.Request{Code: markCode, Settings: guard.Settings{Env: map[string]string{"MARK": mark, "SLEEP": "60"}, Limits: guard.Limits{Timeout: 90 * time.Second}}}
	const id = "it-cancel"
	run := it.start(id, it.queue, req)
	it.waitState(id, contract.StatusAwaitingApproval)
	it.signal(id, it.signed(id, true))
	pid, err := strconv.Atoi(waitLines(t, mark, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := it.c.CancelWorkflow(it.ctx(10*time.Second), id, ""); err != nil {
		t.Fatal(err)
	}
	// The code had started: the run's result is what it printed before, cancelled, naming no
	// one (Temporal's own cancellation carries no canceller the workflow can read).
	res, err := it.result(run)
	if err != nil || res.Outcome != guard.OutcomeCancelled || res.Cancelled != nil {
		t.Fatalf("result = %+v, %v; want a cancelled result naming no one", res, err)
	}
	// WaitForCancellation: the workflow ended only after the activity stopped the code.
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the interpreter %d still runs after the cancelled workflow ended", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	it.waitVisible(id, map[string]string{contract.AttrStatus: contract.StatusCancelled})
}

// TestRecordReplayHistory runs the story of testdata/runcode_signed.json on a real server and
// checks that its history replays (historytest.Recorded); with SANDBOXFLOW_RECORD_HISTORY=1 it
// re-records the file, which TestReplayRecordedHistory replays. (The committed file predates the
// claim signal and every version marker: it shows that such histories still replay.)
func TestRecordReplayHistory(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	req := guard.Request{Code: "print('recorded')", Settings: guard.Settings{Env: map[string]string{"GREETING": "hi"}}}
	dg := digestOf(t, req)
	const id = "recorded-runcode" // workflows.recordedWorkflowID
	run := it.start(id, it.queue, req)
	it.waitState(id, contract.StatusAwaitingApproval)
	// A decision signed for another run is rejected; alice's signed approval by update runs it.
	other := it.alice.Decision(t, reviewertest.Fields(id, "another-run", dg, it.queue, true))
	it.signal(id, other)
	it.waitStatus(id, "one rejection", func(st contract.Status) bool { return st.RejectedDecisions == 1 })
	if _, err := it.decide(id, it.signed(id, true)); err != nil {
		t.Fatal(err)
	}
	if _, err := it.result(run); err != nil {
		t.Fatal(err)
	}
	historytest.Recorded(t, replayer(), id, it.history(id), filepath.Join("testdata", "runcode_signed.json"))
}
