//go:build integration

package workflows_test

// Integration tests of issue 11: only a decision signed by a reviewer key, for exactly this run,
// runs code. Each counts runs by the mark file the code appends to (a side effect outside the
// workflow), never by the workflow's own word.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	sfclient "github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// markRequest is a request whose code appends a line to a fresh mark file; runs counts them.
func markRequest(t *testing.T) (guard.Request, string) {
	t.Helper()
	mark := filepath.Join(t.TempDir(), "mark")
	return guard.Request{Code: markCode, Settings: guard.Settings{Env: map[string]string{"MARK": mark}}}, mark
}

// wantRuns checks how many times the code ran, by its mark file.
func wantRuns(t *testing.T, mark string, want int) {
	t.Helper()
	if got := lines(t, mark); len(got) != want {
		t.Errorf("the code ran %d times (mark file %v); want %d", len(got), got, want)
	}
}

// wantRefused checks that an update was refused by the validator with an error that says why.
func wantRefused(t *testing.T, what string, err error, why string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if err == nil || !errors.As(err, &appErr) || appErr.Type() != contract.DecisionRejectedType || !strings.Contains(err.Error(), why) {
		t.Errorf("%s: %v; want a %s refusal saying %q", what, err, contract.DecisionRejectedType, why)
	}
}

// Must show 1: every decision that does not verify is refused, by update and by signal; nothing
// runs and the run still waits; then alice's valid signature runs it once.
func TestIntegrationUnverifiedDecisionsRunNothing(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	req, mark := markRequest(t)
	const id = "it-unverified"
	run := it.start(id, it.queue, req)
	good := it.fields(id, true)
	bob := reviewertest.New(t, "bob") // not in the workers' reviewers file
	change := func(mod func(*approval.Fields)) approval.Fields {
		f := good
		f.ApprovalID = uuid.NewString()
		mod(&f)
		return f
	}
	signedBy := func(r *reviewertest.Reviewer, f approval.Fields) contract.Decision { return r.Decision(t, f) }
	// asApproval sends a statement signed as something else with the decision fields of an
	// approval of this run.
	asApproval := func(d contract.Decision) contract.Decision {
		d.Approve, d.Digest, d.Statement = true, good.Digest, ""
		return d
	}
	cases := []struct {
		name string
		d    contract.Decision
		why  string
	}{
		{"unsigned", contract.Decision{ApprovalID: uuid.NewString(), Digest: good.Digest, Approve: true, Expires: good.Expires}, "unsigned"},
		{"unknown key", signedBy(bob, change(func(*approval.Fields) {})), "unknown_key"},
		{"another run id", asApproval(signedBy(it.alice, change(func(f *approval.Fields) { f.RunID = uuid.NewString() }))), "bad_signature"},
		{"another workflow", asApproval(signedBy(it.alice, change(func(f *approval.Fields) { f.WorkflowID = "it-other" }))), "bad_signature"},
		{"another digest", asApproval(signedBy(it.alice, change(func(f *approval.Fields) { f.Digest = "sha256:" + strings.Repeat("1", 64) }))), "bad_signature"},
		{"another task queue", asApproval(signedBy(it.alice, change(func(f *approval.Fields) { f.SandboxTaskQueue = "elsewhere" }))), "bad_signature"},
		{"expired", signedBy(it.alice, change(func(f *approval.Fields) { f.Expires = time.Now().Add(-time.Minute).UTC().Truncate(time.Second) })), "expired"},
		{"deny signed, sent as approve", asApproval(signedBy(it.alice, change(func(f *approval.Fields) { f.Approve = false }))), "bad_signature"},
		{"statement of another run", signedBy(it.alice, change(func(f *approval.Fields) { f.RunID = uuid.NewString() })), "run_id"},
		{"reviewer named other than the one signed", func() contract.Decision {
			d := signedBy(it.alice, change(func(*approval.Fields) {}))
			d.Reviewer = "carol"
			return d
		}(), "statement_mismatch"},
		{"signed as a principal the key's line does not allow", signedBy(it.alice, change(func(f *approval.Fields) { f.Reviewer = "carol" })), "principal_mismatch"},
	}
	for _, tc := range cases {
		_, err := it.decide(id, tc.d)
		wantRefused(t, "update, "+tc.name, err, tc.why)
	}
	for i, tc := range cases {
		it.signal(id, tc.d)
		st := it.waitStatus(id, tc.name+" rejected", func(st contract.Status) bool { return st.RejectedDecisions == i+1 })
		if st.State != contract.StatusAwaitingApproval || !strings.Contains(st.LastRejection, tc.why) {
			t.Errorf("signal, %s: state %s, last rejection %q; want still waiting, rejected for %q", tc.name, st.State, st.LastRejection, tc.why)
		}
	}
	wantRuns(t, mark, 0)
	if scheduled, _ := countRunActivities(it.history(id)); scheduled != 0 {
		t.Fatalf("%d sandbox activities scheduled after refused decisions; want 0", scheduled)
	}

	d := it.alice.Decision(t, good)
	res, err := it.decide(id, d)
	if err != nil || res.Reviewer != "alice" {
		t.Fatalf("valid decision: %+v, %v; want accepted, reviewer alice", res, err)
	}
	if r, err := it.result(run); err != nil || !r.OK || r.Reviewer != "alice" {
		t.Fatalf("result %+v, %v; want ok by alice", r, err)
	}
	wantRuns(t, mark, 1)
	st, _ := it.status(id)
	if st.Decision == nil || st.Decision.Fingerprint == "" || st.Decision.Reviewer != "alice" || st.Decision.Touched {
		t.Errorf("decision record %+v; want alice with her key's fingerprint, not touched", st.Decision)
	}
}

// Must show 2: a decision sent with SignalWithStart cannot be valid (its signer could not know
// the run id) and runs nothing; a valid signed decision afterwards runs the code once.
func TestIntegrationSignalWithStartRunsNothingUntilSigned(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	req, mark := markRequest(t)
	dg := digestOf(t, req)
	for i, decision := range []func(id string) contract.Decision{
		func(string) contract.Decision {
			return contract.Decision{ApprovalID: uuid.NewString(), Digest: dg, Approve: true, Reviewer: "alice"}
		},
		// Even with alice's key, the best anyone can sign before the run exists is a guess of
		// its run id.
		func(id string) contract.Decision {
			return it.alice.Decision(t, reviewertest.Fields(id, uuid.NewString(), dg, it.queue, true))
		},
	} {
		id := "it-sws-" + string(rune('a'+i))
		pre := decision(id)
		run, err := it.c.SignalWithStartWorkflow(it.ctx(10*time.Second), id, contract.SignalApproval, pre,
			client.StartWorkflowOptions{ID: id, TaskQueue: it.queue}, contract.WorkflowName, contract.Input{Request: req})
		if err != nil {
			t.Fatal(err)
		}
		st := it.waitStatus(id, "the buffered decision rejected", func(st contract.Status) bool { return st.RejectedDecisions == 1 })
		if st.State != contract.StatusAwaitingApproval || st.Decision != nil {
			t.Fatalf("%s after SignalWithStart: %+v; want waiting with the decision rejected", id, st)
		}
		time.Sleep(500 * time.Millisecond)
		wantRuns(t, mark, i)
		it.signal(id, it.signed(id, true))
		if r, err := it.result(run); err != nil || !r.OK {
			t.Fatalf("%s: result %+v, %v; want ok", id, r, err)
		}
		wantRuns(t, mark, i+1)
	}
}

// resetTo resets the run id to just after the workflow task completed as event eventID, and
// returns the new run id.
func (it *itest) resetTo(id, runID string, eventID int64) string {
	it.t.Helper()
	resp, err := it.c.ResetWorkflowExecution(it.ctx(10*time.Second), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 it.ts.GetDefaultNamespace(),
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason:                    "issue 11 test",
		WorkflowTaskFinishEventId: eventID,
		RequestId:                 uuid.NewString(),
	})
	if err != nil {
		it.t.Fatalf("reset %s to event %d: %v", id, eventID, err)
	}
	return resp.GetRunId()
}

// Must show 3: reset of an approved, completed run, to the workflow task that scheduled the
// sandbox activity and to the first workflow task: the new run runs nothing on the old
// decision; a fresh signed decision for the new run runs it exactly once.
func TestIntegrationResetRunsNothingOnTheOldDecision(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	for _, tc := range []struct {
		name string
		via  string
		// point picks the workflow task to reset to.
		point func(t *testing.T, it *itest, id string) int64
	}{
		{"to the task that scheduled the run, approved by update", contract.ViaUpdate, schedulingTask},
		{"to the task that scheduled the run, approved by signal", contract.ViaSignal, schedulingTask},
		{"to the first workflow task", contract.ViaUpdate, firstTask},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, mark := markRequest(t)
			id := "it-reset-" + uuid.NewString()[:8]
			run := it.start(id, it.queue, req)
			if tc.via == contract.ViaUpdate {
				if _, err := it.decide(id, it.signed(id, true)); err != nil {
					t.Fatal(err)
				}
			} else {
				it.signal(id, it.signed(id, true))
			}
			if r, err := it.result(run); err != nil || !r.OK {
				t.Fatalf("first run: outcome %q exit %d, stdout %q, stderr %q, error %v; want ok (history: %s)",
					r.Outcome, r.ExitCode, r.Stdout, r.Stderr, err, it.describeEnd(id))
			}
			wantRuns(t, mark, 1)

			newRun := it.resetTo(id, run.GetRunID(), tc.point(t, it, id))
			st := it.waitStatus(id, "the reset run waiting", func(st contract.Status) bool {
				return st.RunID == newRun && st.State == contract.StatusAwaitingApproval
			})
			if st.Decision != nil {
				t.Fatalf("the reset run accepted the old decision: %+v", st.Decision)
			}
			time.Sleep(time.Second)
			wantRuns(t, mark, 1)

			it.signal(id, it.signed(id, true))
			var res guard.Result
			if err := it.c.GetWorkflow(it.ctx(60*time.Second), id, newRun).Get(it.ctx(60*time.Second), &res); err != nil || !res.OK {
				t.Fatalf("reset run: %+v, %v; want ok", res, err)
			}
			wantRuns(t, mark, 2)
		})
	}
}

// schedulingTask is the WorkflowTaskCompleted event whose commands scheduled the sandbox
// activity.
func schedulingTask(t *testing.T, it *itest, id string) int64 {
	for _, e := range it.history(id) {
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED &&
			e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.RunActivityName {
			return e.GetActivityTaskScheduledEventAttributes().GetWorkflowTaskCompletedEventId()
		}
	}
	t.Fatal("no sandbox activity in history")
	return 0
}

// firstTask is the first WorkflowTaskCompleted event.
func firstTask(t *testing.T, it *itest, id string) int64 {
	for _, e := range it.history(id) {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return e.GetEventId()
		}
	}
	t.Fatal("no completed workflow task in history")
	return 0
}

// Must show 4: run A's signed decision, sent to run B with the same code, is refused.
func TestIntegrationApprovalOfOneRunDoesNotFitAnother(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	req, mark := markRequest(t)
	runA := it.start("it-run-a", it.queue, req)
	runB := it.start("it-run-b", it.queue, req)
	forA := it.signed("it-run-a", true)
	if b := it.waitState("it-run-b", contract.StatusAwaitingApproval); b.Request.Digest != forA.Digest {
		t.Fatalf("runs A and B have different digests %s, %s; want the same code", forA.Digest, b.Request.Digest)
	}
	_, err := it.decide("it-run-b", forA)
	wantRefused(t, "A's decision by update to B", err, "workflow_id")
	it.signal("it-run-b", forA)
	it.waitStatus("it-run-b", "A's decision rejected", func(st contract.Status) bool { return st.RejectedDecisions == 1 })
	time.Sleep(500 * time.Millisecond)
	wantRuns(t, mark, 0)

	// The same decision still works where it belongs, once.
	if _, err := it.decide("it-run-a", forA); err != nil {
		t.Fatal(err)
	}
	if r, err := it.result(runA); err != nil || !r.OK {
		t.Fatalf("run A: %+v, %v", r, err)
	}
	wantRuns(t, mark, 1)
	if err := it.c.CancelWorkflow(it.ctx(10*time.Second), "it-run-b", ""); err != nil {
		t.Fatal(err)
	}
	_, _ = it.result(runB)
	wantRuns(t, mark, 1)
}

// foreignWorkflow is not RunCode: it schedules the sandbox activity directly with whatever input
// it was given, as any namespace writer could.
func foreignWorkflow(ctx workflow.Context, in contract.RunInput) (guard.Result, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var res guard.Result
	err := workflow.ExecuteActivity(ctx, contract.RunActivityName, in).Get(ctx, &res)
	return res, err
}

// Must show 5: a foreign workflow that schedules SandboxRun with a forged input: the activity
// refuses, nothing runs, whether the input carries no signature or a genuine one lifted from
// another run.
func TestIntegrationForeignWorkflowCannotRunCode(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil, func(r worker.Registry) { r.RegisterWorkflow(foreignWorkflow) })
	req, mark := markRequest(t)
	checked, err := integrationConfig(nil, nil, "").Policy.Check(req, "local")
	if err != nil {
		t.Fatal(err)
	}
	it.start("it-victim", it.queue, req)
	lifted := it.signed("it-victim", true)
	for _, tc := range []struct {
		name string
		d    contract.Decision
		why  string
	}{
		{"unsigned", contract.Decision{ApprovalID: lifted.ApprovalID, Digest: checked.Digest, Approve: true, Reviewer: "alice"}, "unsigned"},
		{"lifted from another run", lifted, "workflow_id"},
	} {
		in := contract.RunInput{Checked: checked, Decision: tc.d}
		run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: "it-foreign-" + uuid.NewString()[:8], TaskQueue: it.queue}, foreignWorkflow, in)
		if err != nil {
			t.Fatal(err)
		}
		var res guard.Result
		err = run.Get(it.ctx(60*time.Second), &res)
		var ar *guard.ApprovalRefused
		if !errors.As(contract.FromFailure(err), &ar) || ar.Reason != guard.RefusedNotVerified || !strings.Contains(err.Error(), "nothing ran") || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v; want the activity's ApprovalRefused (not_verified) naming %q", tc.name, err, tc.why)
		}
	}
	time.Sleep(500 * time.Millisecond)
	wantRuns(t, mark, 0)
	for _, e := range it.sink.Events() {
		if e.Type != contract.EventSandboxRefused {
			t.Errorf("sandbox event %v; want only refusals (nothing started)", e)
		}
	}
}

// Must show 6: a security-key signature without user presence is refused; with it, accepted,
// and touched is recorded.
func TestIntegrationSecurityKeyNeedsATouch(t *testing.T) {
	it := newITest(t)
	untouched := reviewertest.NewSecurityKey(t, "dora", 0x00)
	touched := reviewertest.NewSecurityKey(t, "erin", 0x01)
	it.reviewers = reviewertest.WriteAllowedSigners(t, t.TempDir(), it.alice, untouched, touched)
	it.worker(it.queue, it.localBackend(), nil)
	req, mark := markRequest(t)
	const id = "it-sk"
	run := it.start(id, it.queue, req)
	_, err := it.decide(id, untouched.Decision(t, it.fields(id, true)))
	wantRefused(t, "security key without user presence", err, "no_user_presence")
	it.signal(id, untouched.Decision(t, it.fields(id, true)))
	it.waitStatus(id, "the untouched signature rejected", func(st contract.Status) bool { return st.RejectedDecisions == 1 })
	wantRuns(t, mark, 0)

	res, err := it.decide(id, touched.Decision(t, it.fields(id, true)))
	if err != nil || res.Reviewer != "erin" {
		t.Fatalf("touched security key: %+v, %v; want accepted for erin", res, err)
	}
	if r, err := it.result(run); err != nil || !r.OK || r.Reviewer != "erin" {
		t.Fatalf("result %+v, %v", r, err)
	}
	wantRuns(t, mark, 1)
	st, err := it.status(id)
	if err != nil || st.Decision == nil || !st.Decision.Touched || st.Decision.KeyType != approval.KeyTypeSKEd25519 {
		t.Errorf("decision record %+v, %v; want touched: true by an %s key", st.Decision, err, approval.KeyTypeSKEd25519)
	}
}

// Must show 7: the statement as `starter statement` prints it, signed by Debian's ssh-keygen,
// sent as raw JSON through a plain Temporal client exactly as `temporal workflow update execute
// --input` sends it (json/plain): it runs once.
func TestIntegrationSSHKeygenSignatureByRawJSON(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Fatalf("ssh-keygen (Debian's openssh-client) is needed: %v", err)
	}
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	req, mark := markRequest(t)
	const id = "it-ssh-keygen"
	run := it.start(id, it.queue, req)
	it.waitState(id, contract.StatusAwaitingApproval)

	sc, err := sfclient.New(sfclient.Options{Temporal: it.c, TaskQueue: it.queue, Reviewer: it.alice.Principal})
	if err != nil {
		t.Fatal(err)
	}
	f, err := sc.Statement(it.ctx(10*time.Second), sfclient.Run(id), sfclient.StatementOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := f.Statement()
	if err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(t.TempDir(), "st")
	if err := os.WriteFile(st, stmt, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(keygen, "-Y", "sign", "-n", approval.Namespace, "-f", it.alice.KeyFile, st).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	sig, err := os.ReadFile(st + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(map[string]any{
		"approval_id": f.ApprovalID, "digest": f.Digest, "approve": true,
		"statement": string(stmt), "signature": string(sig),
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := it.c.UpdateWorkflow(it.ctx(20*time.Second), client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: contract.UpdateDecide, Args: []any{json.RawMessage(raw)},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		t.Fatal(err)
	}
	var decided map[string]any
	if err := h.Get(it.ctx(20*time.Second), &decided); err != nil || decided["reviewer"] != "alice" {
		t.Fatalf("update: %v, %v; want accepted for alice", decided, err)
	}
	if r, err := it.result(run); err != nil || !r.OK {
		t.Fatalf("result %+v, %v", r, err)
	}
	wantRuns(t, mark, 1)
}

// The approved activity waits at most ScheduleToStartTimeout for a sandbox worker; past it the
// run ends with the approval unused, and nothing runs even when a sandbox worker comes later.
func TestIntegrationNoSandboxWorkerLeavesTheApprovalUnused(t *testing.T) {
	it := newITest(t)
	const sandboxQueue = "sandboxflow-it-nobody"
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) {
		c.SandboxTaskQueue = sandboxQueue
		c.ScheduleToStartTimeout = 2 * time.Second
	})
	req, mark := markRequest(t)
	const id = "it-no-sandbox-worker"
	run := it.start(id, it.queue, req)
	if st := it.waitState(id, contract.StatusAwaitingApproval); st.SandboxTaskQueue != sandboxQueue {
		t.Fatalf("status shows sandbox task queue %q; want %q", st.SandboxTaskQueue, sandboxQueue)
	}
	it.signal(id, it.signed(id, true))
	_, err := it.result(run)
	var ie *guard.IntegrationError
	if !errors.As(contract.FromFailure(err), &ie) || ie.CodeMayHaveStarted || !strings.Contains(err.Error(), "approval was not used") {
		t.Fatalf("result error %v; want IntegrationError: approval not used, code not started", err)
	}
	it.worker(sandboxQueue, it.localBackend(), nil)
	time.Sleep(time.Second)
	wantRuns(t, mark, 0)
	if scheduled, _ := countRunActivities(it.history(id)); scheduled != 1 {
		t.Errorf("%d sandbox activities scheduled; want 1, never retried", scheduled)
	}
}

// pending lists only RunCode runs, even when another workflow type sets the same search
// attribute.
func TestIntegrationPendingListsOnlyRunCode(t *testing.T) {
	it := newITest(t)
	impostor := func(ctx workflow.Context) error {
		if err := workflow.UpsertTypedSearchAttributes(ctx, contract.StatusKey.ValueSet(contract.StatusAwaitingApproval)); err != nil {
			return err
		}
		return workflow.Sleep(ctx, time.Hour)
	}
	it.worker(it.queue, it.localBackend(), nil, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(impostor, workflow.RegisterOptions{Name: "Impostor"})
	})
	req, _ := markRequest(t)
	it.start("it-pending-real", it.queue, req)
	if _, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: "it-pending-impostor", TaskQueue: it.queue}, "Impostor"); err != nil {
		t.Fatal(err)
	}
	it.waitVisible("it-pending-real", map[string]string{contract.AttrStatus: contract.StatusAwaitingApproval})
	it.waitVisible("it-pending-impostor", map[string]string{contract.AttrStatus: contract.StatusAwaitingApproval})
	sc, err := sfclient.New(sfclient.Options{Temporal: it.c, TaskQueue: it.queue})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := sc.Pending(it.ctx(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].WorkflowID != "it-pending-real" {
		t.Errorf("pending = %+v; want only it-pending-real", pending)
	}
}

// describeEnd names how the sandbox activities of id's current run ended, for a failure message.
func (it *itest) describeEnd(id string) string {
	var ends []string
	for _, e := range it.history(id) {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			ends = append(ends, fmt.Sprintf("event %d activity failed: %s", e.GetEventId(), e.GetActivityTaskFailedEventAttributes().GetFailure().GetMessage()))
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			ends = append(ends, fmt.Sprintf("event %d activity timed out: %s", e.GetEventId(), e.GetActivityTaskTimedOutEventAttributes().GetFailure().GetMessage()))
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			ends = append(ends, fmt.Sprintf("event %d activity completed", e.GetEventId()))
		}
	}
	return strings.Join(ends, "; ")
}
