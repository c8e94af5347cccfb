//go:build integration

package workflows_test

// Integration tests of issue 31: a result counts only with a receipt that verifies against the
// sandbox hosts' keys the check recorded. A namespace writer that completes the sandbox activity
// by id (through the Go SDK or the official temporal CLI) gets no output accepted: the run ends
// with a ReceiptRefused that names what failed.

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/receipt"
)

// sandboxActivityID waits until the run id schedules its sandbox activity and returns its id.
func (it *itest) sandboxActivityID(id string) (runID, activityID string) {
	it.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, e := range it.history(id) {
			if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED &&
				e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.RunActivityName {
				d, err := it.c.DescribeWorkflowExecution(it.ctx(10*time.Second), id, "")
				if err != nil {
					it.t.Fatal(err)
				}
				return d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), e.GetActivityTaskScheduledEventAttributes().GetActivityId()
			}
		}
		if time.Now().After(deadline) {
			it.t.Fatalf("%s never scheduled its sandbox activity", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wantReceiptRefused checks that the run ended with a ReceiptRefused naming field, and no result.
func wantReceiptRefused(t *testing.T, it *itest, run client.WorkflowRun, field string) {
	t.Helper()
	res, err := it.result(run)
	var rr *guard.ReceiptRefused
	if !errors.As(contract.FromFailure(err), &rr) {
		t.Fatalf("%s: result %+v, error %v; want a ReceiptRefused", run.GetID(), res, err)
	}
	if rr.Field != field {
		t.Errorf("%s: refused %q (%v); want %q", run.GetID(), rr.Field, rr, field)
	}
	if st, err := it.status(run.GetID()); err != nil || st.State != contract.StatusError || !strings.Contains(st.Error, "result refused") {
		t.Errorf("%s: status %s %q (%v); want error, result refused", run.GetID(), st.State, st.Error, err)
	}
}

func TestIntegrationForgedCompletionsGetNoResult(t *testing.T) {
	it := newITest(t)
	host := hosttest.New(t, "host-a")
	const honestQueue, forgeQueue = "receipts-honest", "receipts-nobody-polls"
	// The workflow worker runs no sandboxes; it records host-a's key at check time.
	it.worker(it.queue, nil, func(c *activities.Config) { c.BackendName = "local"; c.HostsFile = host.File })
	// The one sandbox host polls honestQueue only; nothing polls forgeQueue, where the forgers
	// complete the activity by id.
	it.worker(honestQueue, it.localBackend(), func(c *activities.Config) { c.HostKeyFile = host.KeyFile; c.HostName = host.Name })

	startOn := func(id, queue, code string) client.WorkflowRun {
		run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: it.queue},
			contract.WorkflowName, contract.Input{Request: guard.Request{Code: code}, SandboxTaskQueue: queue})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := it.decide(id, it.signed(id, true)); err != nil {
			t.Fatalf("approve %s: %v", id, err)
		}
		return run
	}

	// The honest run: its result carries host-a's receipt, and the workflow accepted it.
	honest := startOn("receipts-honest", honestQueue, "print('the real output')")
	res, err := it.result(honest)
	if err != nil || res.Receipt == nil || string(res.Stdout) != "the real output\n" {
		t.Fatalf("honest run: %+v, %v; want its output with a receipt", res, err)
	}
	hosts, err := receipt.LoadHosts(host.File)
	if err != nil {
		t.Fatal(err)
	}
	st, err := receipt.Verify(hosts, res.Receipt)
	if err != nil || receipt.CheckResult(st, res) != nil || st.Host.Name != "host-a" || st.WorkflowID != "receipts-honest" {
		t.Fatalf("honest receipt: %+v, %v", st, err)
	}

	forgedResult := func(mod func(*guard.Result)) string {
		r := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("forged output\n"), Backend: "local"}
		mod(&r)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	other := hosttest.New(t, "host-a") // the same name, another key: not in the hosts file

	t.Run("sdk, no receipt", func(t *testing.T) {
		run := startOn("receipts-forged-sdk", forgeQueue, "print(1)")
		runID, aid := it.sandboxActivityID(run.GetID())
		var r guard.Result
		if err := json.Unmarshal([]byte(forgedResult(func(*guard.Result) {})), &r); err != nil {
			t.Fatal(err)
		}
		if err := it.c.CompleteActivityByID(it.ctx(10*time.Second), it.ts.GetDefaultNamespace(), run.GetID(), runID, aid, r, nil); err != nil {
			t.Fatal(err)
		}
		wantReceiptRefused(t, it, run, receipt.FieldReceipt)
	})
	t.Run("sdk, receipt by a key not in the hosts file", func(t *testing.T) {
		run := startOn("receipts-forged-key", forgeQueue, "print(1)")
		runID, aid := it.sandboxActivityID(run.GetID())
		st, err := it.status(run.GetID())
		if err != nil {
			t.Fatal(err)
		}
		r := guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte("forged output\n"), Backend: "local", Digest: st.Request.Digest}
		rec, err := receipt.Sign(other.Signer, receipt.New(receipt.Run{WorkflowID: run.GetID(), RunID: runID, ActivityID: aid,
			Digest: st.Request.Digest, Host: other.Receipt(), Backend: "local", Started: time.Now(), Ended: time.Now()}, r))
		if err != nil {
			t.Fatal(err)
		}
		r.Receipt = &rec
		if err := it.c.CompleteActivityByID(it.ctx(10*time.Second), it.ts.GetDefaultNamespace(), run.GetID(), runID, aid, r, nil); err != nil {
			t.Fatal(err)
		}
		wantReceiptRefused(t, it, run, receipt.FieldHostKey)
	})
	t.Run("temporal cli", func(t *testing.T) {
		need.Need(t, need.TemporalCLI)
		cli := need.TemporalCLIPath()
		complete := func(run client.WorkflowRun, result string) {
			t.Helper()
			runID, aid := it.sandboxActivityID(run.GetID())
			out, err := exec.Command(cli, "activity", "complete", "--address", it.ts.GetFrontendHostPort(), "--namespace", it.ts.GetDefaultNamespace(),
				"--workflow-id", run.GetID(), "--run-id", runID, "--activity-id", aid, "--result", result).CombinedOutput()
			if err != nil {
				t.Fatalf("temporal activity complete: %v\n%s", err, out)
			}
		}
		// Forged output with no receipt.
		run := startOn("receipts-forged-cli", forgeQueue, "print(1)")
		complete(run, forgedResult(func(*guard.Result) {}))
		wantReceiptRefused(t, it, run, receipt.FieldReceipt)
		// The honest run's genuine receipt and output, replayed into another run.
		replay := startOn("receipts-replayed-cli", forgeQueue, "print('the real output')")
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		complete(replay, string(b))
		wantReceiptRefused(t, it, replay, "workflow_id")
		// The genuine receipt of that run, with the output changed.
		changed := startOn("receipts-changed-cli", forgeQueue, "print('the real output')")
		complete(changed, strings.Replace(string(b), "the real output", "the fake output", 1))
		wantReceiptRefused(t, it, changed, "workflow_id")
	})
}

// TestRecordReceiptHistory runs the story of testdata/runcode_receipt.json, a run whose result's
// receipt the workflow verified (receipt-v1), and checks that its history replays
// (historytest.Recorded; SANDBOXFLOW_RECORD_HISTORY=1 re-records the file, which
// TestReplayReceiptHistory replays).
func TestRecordReceiptHistory(t *testing.T) {
	it := newITest(t)
	host := hosttest.New(t, "recorded-host")
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) {
		c.HostKeyFile, c.HostName, c.HostsFile = host.KeyFile, host.Name, host.File
	})
	const id = "recorded-receipt" // workflows.recordedReceiptWorkflowID
	run := it.start(id, it.queue, guard.Request{Code: "print('the real output')"})
	if _, err := it.decide(id, it.signed(id, true)); err != nil {
		t.Fatal(err)
	}
	if res, err := it.result(run); err != nil || res.Receipt == nil {
		t.Fatalf("result %+v, %v; want one with a receipt", res, err)
	}
	historytest.Recorded(t, replayer(), id, it.history(id), filepath.Join("testdata", "runcode_receipt.json"))
}
