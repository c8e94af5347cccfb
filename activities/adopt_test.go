package activities

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// adoptingBackend is an Adopter whose sandboxes outlive their worker: Adopt returns what the code
// printed, or gone.
type adoptingBackend struct {
	adopted atomic.Int32
	gone    bool
}

func (b *adoptingBackend) Name() string { return "echo" }

func (b *adoptingBackend) Run(context.Context, guard.Checked) (guard.Result, error) {
	return guard.Result{}, errors.New("not used")
}

func (b *adoptingBackend) Adopt(_ context.Context, sandbox string, c guard.Checked) (guard.Result, error) {
	b.adopted.Add(1)
	if b.gone || sandbox != "c0ffee" || c.Digest == "" {
		return guard.Result{}, &guard.IntegrationError{Op: "adopt", Err: errors.New("no container holds it"), CodeMayHaveStarted: true}
	}
	return guard.Result{Stdout: []byte("printed after the kill\n")}, nil
}

// adoptHost is a sandbox host with a spool under dir, the host key of host and log.
func adoptHost(t *testing.T, dir string, host *hosttest.Host, log *historytest.Log, b *adoptingBackend) *Activities {
	t.Helper()
	a, err := New(Config{Backend: b, Sink: &MemorySink{}, ReviewersFile: reviewersFile(t), History: log, DataConverter: testCodec(t, 1),
		HostKeyFile: host.KeyFile, HostName: host.Name, HostsFile: host.File, SpoolDir: dir, LateResultDelivery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if a.spool == nil {
		t.Fatal("no spool opened")
	}
	return a
}

// TestAdoptDeliversTheRunsOfAWorkerThatDied: a worker dies with a run in its spool; the worker
// started after it adopts the run: it collects the result from the sandbox, signs a receipt that
// verifies and names the spooled claim, and sends it as a late result, encoded with the worker's
// codec. A worker that died while it delivered a late result kept it: it is sent as it was, and
// the sandbox is not asked. A sandbox that is gone leaves the run to "outcome unknown" (an
// event, no signal). Every entry is gone afterwards.
func TestAdoptDeliversTheRunsOfAWorkerThatDied(t *testing.T) {
	host := hosttest.New(t, "host-a")
	hosts, err := receipt.LoadHosts(host.File)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "spool")
	entry := func(run string) spooled {
		return spooled{Namespace: "default", Owner: guard.Owner{WorkflowID: testWorkflowID, RunID: run, ActivityID: "7"},
			Sandbox: "c0ffee", Digest: "sha256:" + run, Backend: "echo", Claim: "commitment-" + run, ApprovalID: "ap",
			Reviewer: "alice", Approvals: []guard.Approval{{ApprovalID: "ap", Reviewer: "alice", Fingerprint: "SHA256:x"}}, Limits: guard.Limits{Timeout: time.Second, MaxStdoutBytes: 1 << 20, MaxStderrBytes: 1 << 20}, Started: time.Now()}
	}
	log := &historytest.Log{}
	dead := adoptHost(t, dir, host, log, &adoptingBackend{})
	for _, run := range []string{"collected", "kept"} {
		if _, err := dead.spool.put(entry(run)); err != nil {
			t.Fatal(err)
		}
	}
	e := entry("kept")
	to := lateRoute{info: activity.Info{Namespace: "default", ActivityID: "7",
		WorkflowExecution: workflow.Execution{ID: testWorkflowID, RunID: "kept"}}, spool: dead.spool}
	keptRes := guard.Result{Stdout: []byte("delivered before the kill\n"), Receipt: &guard.Receipt{Statement: "s", Signature: "x"}}
	dead.keepLate(to, e.checked(), keptRes)
	dead.spool.lock.Close() // the worker dies

	b := &adoptingBackend{}
	next := adoptHost(t, dir, host, log, b)
	next.Adopt(context.Background(), log, nil)

	if n := b.adopted.Load(); n != 1 {
		t.Errorf("the backend adopted %d sandboxes; want 1 (the kept late result needs none)", n)
	}
	for run, want := range map[string]string{"collected": "printed after the kill\n", "kept": "delivered before the kill\n"} {
		var lates []contract.LateResult
		for _, ev := range log.Signals(testWorkflowID, run) {
			s := ev.GetWorkflowExecutionSignaledEventAttributes()
			var lr contract.LateResult
			if s.GetSignalName() != contract.SignalLateResult || testCodec(t, 1).FromPayloads(s.GetInput(), &lr) != nil {
				t.Fatalf("run %s: signal %s not a late result in the worker's codec", run, s.GetSignalName())
			}
			lates = append(lates, lr)
		}
		if len(lates) != 1 || string(lates[0].Result.Stdout) != want {
			t.Fatalf("run %s: late results %+v; want one with %q", run, lates, want)
		}
		if run != "collected" {
			continue
		}
		res := lates[0].Result
		st, err := receipt.Verify(hosts, res.Receipt)
		if err != nil {
			t.Fatal(err)
		}
		if st.Claim != "commitment-collected" || st.RunID != "collected" || st.ActivityID != "7" || st.Digest != "sha256:collected" {
			t.Errorf("the adopted result's receipt names claim %q, run %q, activity %q, digest %q; want the spooled ones", st.Claim, st.RunID, st.ActivityID, st.Digest)
		}
		if err := receipt.CheckResult(st, res); err != nil {
			t.Error(err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*", "*")); len(left) != 0 {
		t.Errorf("left in the spool: %v", left)
	}

	// A sandbox that is gone: an event, no signal, the entry removed.
	log = &historytest.Log{}
	dead = adoptHost(t, dir, host, log, &adoptingBackend{})
	if _, err := dead.spool.put(entry("lost")); err != nil {
		t.Fatal(err)
	}
	dead.spool.lock.Close()
	sink := &MemorySink{}
	next = adoptHost(t, dir, host, log, &adoptingBackend{gone: true})
	next.sink = sink
	next.Adopt(context.Background(), log, nil)
	if n := len(log.Signals(testWorkflowID, "lost")); n != 0 {
		t.Errorf("%d signals for a run whose sandbox is gone; want none", n)
	}
	evs := sink.Events()
	if len(evs) != 1 || evs[0].Data["adopted"] != true || evs[0].Data["delivered"] != false {
		t.Errorf("events %+v; want one undelivered adopted late result", evs)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*", "*")); len(left) != 0 {
		t.Errorf("left in the spool: %v", left)
	}
}

// TestAdoptReleasesTheClaimOfCodeThatNeverWent: a worker dies after it claimed a run's approval
// and before it sent the code (its entry is still at stage "claimed"): the worker started after
// it releases the claim with the spooled secret, asks no sandbox, and delivers no result; the
// release is one the workflow and every host accept (its secret matches the commitment). An
// entry whose secret is not its claim's releases nothing.
func TestAdoptReleasesTheClaimOfCodeThatNeverWent(t *testing.T) {
	host := hosttest.New(t, "host-a")
	dir := filepath.Join(t.TempDir(), "spool")
	log := &historytest.Log{}
	dead := adoptHost(t, dir, host, log, &adoptingBackend{})
	info := activity.Info{Namespace: "default", ActivityID: "7", WorkflowExecution: workflow.Execution{ID: testWorkflowID, RunID: "unsent"}}
	c := guard.Checked{Digest: "sha256:unsent", Owner: guard.Owner{WorkflowID: testWorkflowID, RunID: "unsent", ActivityID: "7"}}
	sp := dead.newRunSpool(slog.Default(), info, c, contract.RunInput{Decision: contract.Decision{ApprovalID: "ap", Reviewer: "alice"}}, nil)
	cl := newClaim(info, "ap")
	sp.claimed(cl)
	forged := *dead.newRunSpool(slog.Default(), info, c, contract.RunInput{}, nil)
	forged.e.Owner.RunID, forged.e.Stage, forged.e.Claim, forged.e.ClaimSecret = "forged", stageClaimed, cl.msg.Commitment, "00"
	forged.put()
	dead.spool.lock.Close() // the worker dies before it sends the code

	b := &adoptingBackend{}
	sink := &MemorySink{}
	next := adoptHost(t, dir, host, log, b)
	next.sink = sink
	next.Adopt(context.Background(), log, nil)
	if n := b.adopted.Load(); n != 0 {
		t.Errorf("the backend was asked for %d sandboxes; want none (the code never went)", n)
	}
	sigs := log.Signals(testWorkflowID, "unsent")
	if len(sigs) != 1 {
		t.Fatalf("%d signals; want one release", len(sigs))
	}
	var msg contract.SandboxClaim
	s := sigs[0].GetWorkflowExecutionSignaledEventAttributes()
	if s.GetSignalName() != contract.SignalSandboxClaim || converter.GetDefaultDataConverter().FromPayloads(s.GetInput(), &msg) != nil ||
		msg.Commitment != cl.msg.Commitment || msg.Secret != hex.EncodeToString(cl.secret) || msg.ActivityID != "7" || msg.RunID != "unsent" {
		t.Fatalf("signal %s %+v; want the claim's release with its secret", s.GetSignalName(), msg)
	}
	if n := len(log.Signals(testWorkflowID, "forged")); n != 0 {
		t.Errorf("an entry whose secret is not its claim's sent %d signals; want none", n)
	}
	released := 0
	for _, ev := range sink.Events() {
		if ev.Type == contract.EventSandboxLateResult && ev.Data["released"] == true {
			released++
		}
	}
	if released != 1 {
		t.Errorf("%d release events; want 1: %v", released, sink.Events())
	}
}
