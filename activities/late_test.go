package activities

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// gateBackend runs until released (returning its result) or until its context ends (returning
// the context's error), and records which.
type gateBackend struct {
	started, release chan struct{}
	stopped          chan bool // true: stopped by its context
}

func newGateBackend() *gateBackend {
	return &gateBackend{started: make(chan struct{}), release: make(chan struct{}), stopped: make(chan bool, 1)}
}

func (b *gateBackend) Name() string { return "echo" }

func (b *gateBackend) Run(ctx context.Context, _ guard.Checked) (guard.Result, error) {
	close(b.started)
	select {
	case <-b.release:
		b.stopped <- false
		return guard.Result{Stdout: []byte("late output")}, nil
	case <-ctx.Done():
		b.stopped <- true
		return guard.Result{}, ctx.Err()
	}
}

// lateHost is a sandbox host with a key, a payload codec and a run log, whose sandbox activity
// runs under a worker context the test ends with a cause, as the SDK ends an activity's.
type lateHost struct {
	a       *Activities
	backend *gateBackend
	log     *historytest.Log
	sink    *MemorySink
	hosts   *receipt.Hosts
	dc      converter.DataConverter
}

func newLateHost(t *testing.T, log *historytest.Log, delivery time.Duration) *lateHost {
	t.Helper()
	host := hosttest.New(t, "host-a")
	hosts, err := receipt.LoadHosts(host.File)
	if err != nil {
		t.Fatal(err)
	}
	h := &lateHost{backend: newGateBackend(), log: log, sink: &MemorySink{}, hosts: hosts, dc: testCodec(t, 1)}
	h.a, err = New(Config{Backend: h.backend, Sink: h.sink, ReviewersFile: reviewersFile(t), History: log, DataConverter: h.dc,
		HostKeyFile: host.KeyFile, HostName: host.Name, HostsFile: host.File, LateResultDelivery: delivery})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// testCodec is the data converter of a worker whose --key-file holds one key, all of bytes b.
func testCodec(t *testing.T, b byte) converter.DataConverter {
	t.Helper()
	key := make([]byte, 32)
	for i := range key {
		key[i] = b
	}
	ring, err := codec.ParseKeyRing([]byte("k1:" + base64.StdEncoding.EncodeToString(key) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return codec.DataConverter(ring)
}

// runEnding runs the sandbox activity and, once its code started, ends the worker's context for
// the activity with cause; hold later the code may finish.
func (h *lateHost) runEnding(t *testing.T, cause error, hold time.Duration) (guard.Result, error) {
	t.Helper()
	return runEndedBy(t, h.a, func(end context.CancelCauseFunc) {
		<-h.backend.started
		end(cause)
		time.Sleep(hold)
		close(h.backend.release)
	})
}

// runEndedBy runs a's sandbox activity on an approved print(1) under a worker context that
// ender (run beside it) may end with a cause, as the SDK ends an activity's.
func runEndedBy(t *testing.T, a *Activities, ender func(end context.CancelCauseFunc)) (guard.Result, error) {
	t.Helper()
	c := checked(t, a, guard.Request{Code: "print(1)"})
	in := approved(t, c, fields(c.Digest))
	bg, end := context.WithCancelCause(context.Background())
	defer end(nil)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: bg})
	go ender(end)
	return executeRun(t, a, env, in)
}

// signals returns the inputs of the signals name the run got.
func (h *lateHost) signals(name string) []*commonpb.Payloads {
	var out []*commonpb.Payloads
	for _, ev := range h.log.Signals(testWorkflowID, testRunID) {
		if s := ev.GetWorkflowExecutionSignaledEventAttributes(); s.GetSignalName() == name {
			out = append(out, s.GetInput())
		}
	}
	return out
}

// lateEvents returns the sandbox.late_result events emitted.
func (h *lateHost) lateEvents() []Event {
	var out []Event
	for _, e := range h.sink.Events() {
		if e.Type == contract.EventSandboxLateResult {
			out = append(out, e)
		}
	}
	return out
}

// TestRunLostAttemptDeliversALateResult: the server loses the attempt while the code runs (its
// heartbeat answered "not found"): the code runs on to its end, and its result goes to the run
// as the late-result signal, encoded with the worker's payload codec, with a receipt that
// verifies and names the host's claim.
func TestRunLostAttemptDeliversALateResult(t *testing.T) {
	h := newLateHost(t, &historytest.Log{ScheduleCaller: true, HeartbeatErr: serviceerror.NewNotFound("activity already timed out")}, 0)
	res, err := h.runEnding(t, serviceerror.NewNotFound("invalid activityID or activity already timed out or invoking workflow is completed"), 100*time.Millisecond)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if stopped := <-h.backend.stopped; stopped || string(res.Stdout) != "late output" {
		t.Fatalf("code stopped %v, stdout %q; want it to run to its end", stopped, res.Stdout)
	}
	claims, lates := h.signals(contract.SignalSandboxClaim), h.signals(contract.SignalLateResult)
	if len(claims) != 1 || len(lates) != 1 {
		t.Fatalf("%d claims and %d late results sent; want one of each", len(claims), len(lates))
	}
	var claim contract.SandboxClaim
	if err := converter.GetDefaultDataConverter().FromPayloads(claims[0], &claim); err != nil {
		t.Fatal(err)
	}
	input := lates[0]
	var late contract.LateResult
	if err := h.dc.FromPayloads(input, &late); err != nil {
		t.Fatalf("decode the late result with the worker's codec: %v", err)
	}
	if late.RunID != testRunID || late.ActivityID != testActivityID || string(late.Result.Stdout) != "late output" {
		t.Errorf("late result for run %q, activity %q, stdout %q; want %q, %q, the code's output", late.RunID, late.ActivityID, late.Result.Stdout, testRunID, testActivityID)
	}
	st, err := receipt.Verify(h.hosts, late.Result.Receipt)
	if err != nil {
		t.Fatalf("late result's receipt: %v", err)
	}
	if st.Claim == "" || st.Claim != claim.Commitment || st.ActivityID != testActivityID {
		t.Errorf("receipt names claim %q, activity %q; want the host's claim %q, activity %q", st.Claim, st.ActivityID, claim.Commitment, testActivityID)
	}
	if err := receipt.CheckResult(st, late.Result); err != nil {
		t.Error(err)
	}
	for _, other := range []converter.DataConverter{converter.GetDefaultDataConverter(), testCodec(t, 2)} {
		var got contract.LateResult
		if err := other.FromPayloads(input, &got); err == nil {
			t.Errorf("a converter without the worker's key decoded the late result: %+v", got)
		}
	}
	evs := h.lateEvents()
	if len(evs) != 1 || evs[0].Data["delivered"] != true || evs[0].Data["tries"] != 1 {
		t.Errorf("late result events %v; want one, delivered at the first try", evs)
	}
}

// TestRunCancelledStopsTheCode: a cancel the workflow asked for stops the code and sends no late
// result.
func TestRunCancelledStopsTheCode(t *testing.T) {
	h := newLateHost(t, &historytest.Log{ScheduleCaller: true}, 0)
	res, err := h.runEnding(t, temporal.NewCanceledError(), 100*time.Millisecond)
	if stopped := <-h.backend.stopped; !stopped {
		t.Fatalf("the code ran on after a cancel (result %+v, %v)", res, err)
	}
	if lates, evs := h.signals(contract.SignalLateResult), h.lateEvents(); len(lates) != 0 || len(evs) != 0 {
		t.Errorf("%d late results sent, events %v after a cancel; want none", len(lates), evs)
	}
}

// TestRunCancelAfterACutStopsTheCode: after a short cut the SDK gave the attempt up, but the
// server still has it and answers the host's own heartbeats with the workflow's cancel: the code
// stops, the run's answer is the cancelled result, and no late result is sent.
func TestRunCancelAfterACutStopsTheCode(t *testing.T) {
	h := newLateHost(t, &historytest.Log{ScheduleCaller: true,
		HeartbeatAnswer: &workflowservice.RecordActivityTaskHeartbeatResponse{CancelRequested: true}}, 0)
	res, err := h.runEnding(t, serviceerror.NewUnavailable("heartbeat: connection reset"), 5*time.Second)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if stopped := <-h.backend.stopped; !stopped || res.Outcome != guard.OutcomeCancelled {
		t.Fatalf("code stopped %v, outcome %s; want stopped by the cancel, cancelled", stopped, res.Outcome)
	}
	if h.log.Heartbeats() == 0 {
		t.Error("the host sent no heartbeat of its own after the SDK gave the attempt up")
	}
	if lates, evs := h.signals(contract.SignalLateResult), h.lateEvents(); len(lates) != 0 || len(evs) != 0 {
		t.Errorf("%d late results sent, events %v after a cancel; want none", len(lates), evs)
	}
}

// TestRunLateResultGivesUp: a late result the run cannot take any more (it ended: "not found")
// is given up at once; one the server cannot be reached for is tried again until
// LateResultDelivery has passed.
func TestRunLateResultGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		wantTries int
	}{
		{"run ended", serviceerror.NewNotFound("workflow execution already completed"), 1},
		{"server unreachable", serviceerror.NewUnavailable("connection refused"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The claim goes through; every later signal fails.
			h := newLateHost(t, &historytest.Log{ScheduleCaller: true, SignalErr: tc.err, SignalErrAfter: 1}, 1500*time.Millisecond)
			if _, err := h.runEnding(t, serviceerror.NewUnavailable("heartbeat: connection reset"), 100*time.Millisecond); err != nil {
				t.Fatalf("run: %v", err)
			}
			evs := h.lateEvents()
			if len(evs) != 1 || evs[0].Data["delivered"] != false || evs[0].Data["tries"] != tc.wantTries || evs[0].Data["error"] == nil {
				t.Errorf("late result events %v; want one, given up after %d tries, with the error", evs, tc.wantTries)
			}
		})
	}
}

// TestAttemptMayBeLost: the causes the SDK ends a sandbox activity's context with, and whether
// the code goes on.
func TestAttemptMayBeLost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error // nil: the context lives
		want  bool
	}{
		{"live", nil, false},
		{"heartbeat not found", serviceerror.NewNotFound("activity already timed out"), true},
		{"heartbeat retries ran out", serviceerror.NewUnavailable("connection refused"), true},
		{"the attempt's deadline", context.DeadlineExceeded, true},
		{"cancel requested", temporal.NewCanceledError(), false},
		{"worker stopping", worker.ErrWorkerShutdown, false},
		{"paused", activity.ErrActivityPaused, false},
		{"reset", activity.ErrActivityReset, false},
		{"plain cancel", context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, end := context.WithCancelCause(context.Background())
			defer end(nil)
			if tc.cause != nil {
				end(tc.cause)
			}
			if got := attemptMayBeLost(ctx); got != tc.want {
				t.Errorf("attemptMayBeLost with cause %v = %t; want %t", tc.cause, got, tc.want)
			}
		})
	}
}

// TestLateRetryable: which failures of a late result's signal are tried again.
func TestLateRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{serviceerror.NewUnavailable("down"), true},
		{serviceerror.NewDeadlineExceeded("slow"), true},
		{serviceerror.NewResourceExhausted(0, "busy"), true},
		{errors.New("dial tcp: connection refused"), true},
		{serviceerror.NewNotFound("completed"), false},
		{serviceerror.NewInvalidArgument("too large"), false},
		{serviceerror.NewPermissionDenied("no", ""), false},
		{serviceerror.NewNamespaceNotFound("ns"), false},
	} {
		if got := lateRetryable(tc.err); got != tc.want {
			t.Errorf("lateRetryable(%v) = %t; want %t", tc.err, got, tc.want)
		}
	}
}

// slowStart is a backend whose sandbox takes until its context ends to start (a slow container
// create), and which never runs anything.
type slowStart struct {
	gateBackend
	acquiring chan struct{}
}

func (b *slowStart) Acquire(ctx context.Context, _ guard.Checked) (guard.Acquired, error) {
	close(b.acquiring)
	<-ctx.Done()
	return nil, fmt.Errorf("create the container: %w", ctx.Err())
}

// TestRunCancelWhileTheSandboxStartsReleasesTheClaim: a cancel that reaches the host while its
// sandbox is still being created stops it before anything ran, and the host releases its claim
// (the release signal, with the claim's secret), so that the run ends Cancelled, not "outcome
// unknown; the code may have started".
func TestRunCancelWhileTheSandboxStartsReleasesTheClaim(t *testing.T) {
	log := &historytest.Log{ScheduleCaller: true}
	b := &slowStart{gateBackend: *newGateBackend(), acquiring: make(chan struct{})}
	a, err := New(Config{Backend: b, ReviewersFile: reviewersFile(t), History: log})
	if err != nil {
		t.Fatal(err)
	}
	_, runErr := runEndedBy(t, a, func(end context.CancelCauseFunc) {
		<-b.acquiring
		end(temporal.NewCanceledError())
	})
	var claims []contract.SandboxClaim
	for _, ev := range log.Signals(testWorkflowID, testRunID) {
		s := ev.GetWorkflowExecutionSignaledEventAttributes()
		if s.GetSignalName() != contract.SignalSandboxClaim {
			continue
		}
		var cl contract.SandboxClaim
		if err := converter.GetDefaultDataConverter().FromPayloads(s.GetInput(), &cl); err != nil {
			t.Fatal(err)
		}
		claims = append(claims, cl)
	}
	if len(claims) != 2 || claims[0].Secret != "" || claims[1].Secret == "" || claims[1].Commitment != claims[0].Commitment {
		t.Fatalf("claim signals %+v (run error %v); want the claim, then its release", claims, runErr)
	}
	select {
	case <-b.started:
		t.Error("the backend ran the code")
	default:
	}
}

// TestRunCutAfterTheCodeEndedDeliversALateResult: the code ends while the SDK still holds the
// attempt, but the server timed it out meanwhile (a cut that began after the code ended): the
// host's own heartbeat before it answers gets "not found", and the result goes as a late result
// instead of an answer the server would refuse. When the server still holds the attempt, the
// host answers as always and sends no late result.
func TestRunCutAfterTheCodeEndedDeliversALateResult(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heartbeat error
		lates     int
	}{
		{"the server timed the attempt out", serviceerror.NewNotFound("invalid activityID or activity already timed out"), 1},
		{"the attempt lives", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newLateHost(t, &historytest.Log{ScheduleCaller: true, HeartbeatErr: tc.heartbeat}, 0)
			res, err := runEndedBy(t, h.a, func(context.CancelCauseFunc) {
				<-h.backend.started
				close(h.backend.release)
			})
			if err != nil || string(res.Stdout) != "late output" {
				t.Fatalf("run: %+v, %v; want the code's result", res, err)
			}
			lates := h.signals(contract.SignalLateResult)
			if len(lates) != tc.lates {
				t.Fatalf("%d late results sent; want %d", len(lates), tc.lates)
			}
			if tc.lates == 0 {
				return
			}
			var late contract.LateResult
			if err := h.dc.FromPayloads(lates[0], &late); err != nil {
				t.Fatal(err)
			}
			st, err := receipt.Verify(h.hosts, late.Result.Receipt)
			if err != nil || receipt.CheckResult(st, late.Result) != nil || st.Claim == "" {
				t.Errorf("the late result's receipt: %+v, %v; want it to verify, naming the claim", st, err)
			}
		})
	}
}
