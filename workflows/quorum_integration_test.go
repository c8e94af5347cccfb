//go:build integration

package workflows_test

// Integration tests of quorums (issue 30): a real server, the Docker backend running the code.
// Runs are counted by the history's sandbox activities and the host's sandbox.started events.

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// quorumDocker is a Docker backend for the quorum tests, closed at the test's end.
func quorumDocker(t *testing.T, deployment string) *docker.Backend {
	t.Helper()
	need.Need(t, need.Docker)
	b, err := docker.New(docker.Config{Image: "sandboxflow-test-python:bookworm-full", Runtime: "runc",
		Deployment: deployment, Labels: map[string]string{"test.sandboxflow.suite": "workflows-quorum"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Close(ctx)
	})
	return b
}

// started counts the host's sandbox.started events for workflow id.
func started(sink *activities.MemorySink, id string) int {
	n := 0
	for _, e := range sink.Events() {
		if e.Type == contract.EventSandboxStarted && e.Data["workflow_id"] == id {
			n++
		}
	}
	return n
}

// quorumReviewers are the reviewers of the quorum tests: alice (two keys), bob, and one key
// whose line allows two principals (carol and ops).
type quorumReviewers struct {
	alice, alice2, bob, multi *reviewertest.Reviewer
}

func newQuorumReviewers(it *itest) quorumReviewers {
	q := quorumReviewers{alice: it.alice, alice2: reviewertest.New(it.t, "alice"), bob: reviewertest.New(it.t, "bob"), multi: reviewertest.New(it.t, "carol,ops")}
	it.reviewers = reviewertest.WriteAllowedSigners(it.t, it.t.TempDir(), q.alice, q.alice2, q.bob, q.multi)
	return q
}

// signedAs is r's approval (or denial) of the run id as it is now, signed as principal.
func (it *itest) signedAs(id string, r *reviewertest.Reviewer, principal string, approve bool) contract.Decision {
	it.t.Helper()
	f := it.fields(id, approve)
	f.Reviewer = principal
	return r.Decision(it.t, f)
}

// With a quorum of 2: one approval runs nothing (the run still waits, showing 1 of 2); a second
// from the same principal (the same key, or another key of alice's), or from the same key
// signing as another principal, is refused, by update and by signal; a second principal's
// approval runs the code once, in Docker, and the result lists both approvals. On a second run,
// a denial after one approval ends it and nothing runs.
func TestIntegrationQuorumTwoDocker(t *testing.T) {
	it := newITest(t)
	q := newQuorumReviewers(it)
	b := quorumDocker(t, "it-quorum")
	it.worker(it.queue, b, func(c *activities.Config) { c.Policy.Quorum = 2 })

	const id = "it-quorum-two"
	run := it.start(id, it.queue, guard.Request{Code: "print('ran once')"})
	st := it.waitState(id, contract.StatusAwaitingApproval)
	if st.Quorum != 2 || len(st.Approvals) != 0 {
		t.Fatalf("status quorum %d, approvals %v; want 2 needed, none had", st.Quorum, st.Approvals)
	}
	first := it.signedAs(id, q.multi, "carol", true)
	res, err := it.decide(id, first)
	if err != nil || res.State != contract.StatusAwaitingApproval || res.Approvals != 1 || res.Quorum != 2 {
		t.Fatalf("carol's approval: %+v, %v; want accepted, 1 of 2, still waiting", res, err)
	}
	time.Sleep(time.Second) // were anything to be scheduled after one approval, it would be by now
	st = it.waitState(id, contract.StatusAwaitingApproval)
	if len(st.Approvals) != 1 || st.Approvals[0].Reviewer != "carol" || st.Decision != nil {
		t.Fatalf("status after one approval: approvals %+v, decision %+v; want carol's alone and no decision", st.Approvals, st.Decision)
	}
	if scheduled, _ := countRunActivities(it.history(id)); scheduled != 0 || started(it.sink, id) != 0 {
		t.Fatalf("after one approval of two: %d sandbox activities, %d started; want none", scheduled, started(it.sink, id))
	}

	for _, tc := range []struct {
		name string
		d    contract.Decision
		why  string
	}{
		{"the same key and principal again", it.signedAs(id, q.multi, "carol", true), "already approved by reviewer carol"},
		{"the same key as another principal", it.signedAs(id, q.multi, "ops", true), "already approved by key"},
		{"the same approval again", first, "already approved by approval id"},
	} {
		_, err := it.decide(id, tc.d)
		wantRefused(t, tc.name, err, tc.why)
		var appErr *temporal.ApplicationError
		if rej, ok := contract.RejectionOf(err); !ok || rej.Reason != contract.RejectDuplicate || !errors.As(err, &appErr) {
			t.Errorf("%s: rejection %v; want reason %s", tc.name, rej, contract.RejectDuplicate)
		}
	}
	it.signal(id, it.signedAs(id, q.multi, "ops", true))
	st = it.waitStatus(id, "the signalled duplicate rejected", func(st contract.Status) bool { return st.RejectedDecisions == 1 })
	if !strings.Contains(st.LastRejection, "another reviewer must approve") || len(st.Approvals) != 1 {
		t.Errorf("signalled duplicate: last rejection %q, approvals %d; want refused, still 1", st.LastRejection, len(st.Approvals))
	}

	res, err = it.decide(id, it.signedAs(id, q.bob, "bob", true))
	if err != nil || res.State != contract.StatusRunning || res.Approvals != 2 {
		t.Fatalf("bob's approval: %+v, %v; want accepted, 2 of 2, running", res, err)
	}
	r, err := it.result(run)
	if err != nil || !r.OK || strings.TrimSpace(string(r.Stdout)) != "ran once" {
		t.Fatalf("result %+v, %v; want ok, 'ran once'", r, err)
	}
	if r.ApprovalID != first.ApprovalID || r.Reviewer != "carol" || len(r.Approvals) != 2 || r.Approvals[0].Reviewer != "carol" || r.Approvals[1].Reviewer != "bob" {
		t.Errorf("result approvals: %s by %s, %+v; want carol's first, then bob's", r.ApprovalID, r.Reviewer, r.Approvals)
	}
	if scheduled, _ := countRunActivities(it.history(id)); scheduled != 1 || started(it.sink, id) != 1 {
		t.Errorf("%d sandbox activities, %d started; want the code run once", scheduled, started(it.sink, id))
	}

	const denied = "it-quorum-denied"
	run = it.start(denied, it.queue, guard.Request{Code: "print('never')"})
	if res, err := it.decide(denied, it.signedAs(denied, q.alice, "alice", true)); err != nil || res.State != contract.StatusAwaitingApproval {
		t.Fatalf("alice's approval: %+v, %v; want accepted, still waiting", res, err)
	}
	if res, err := it.decide(denied, it.signedAs(denied, q.bob, "bob", false)); err != nil || res.State != contract.StatusDenied {
		t.Fatalf("bob's denial: %+v, %v; want accepted, denied", res, err)
	}
	var ad *guard.ApprovalDenied
	if _, err := it.result(run); !errors.As(contract.FromFailure(err), &ad) || ad.Reviewer != "bob" {
		t.Fatalf("result after a denial: %v; want ApprovalDenied by bob", err)
	}
	if scheduled, _ := countRunActivities(it.history(denied)); scheduled != 0 || started(it.sink, denied) != 0 {
		t.Errorf("after a denial: %d sandbox activities, %d started; want none", scheduled, started(it.sink, denied))
	}
}

// A namespace writer's workflow worker whose policy asks one approval (quorum 1) takes alice's
// approval and schedules the sandbox activity; the sandbox host, whose own policy asks 2 of
// every run, refuses it (ApprovalRefused, quorum) and runs nothing. A rogue RunCode that sends alice's approval twice, or alice's and
// another of alice's (a second key), as the two approvals is refused by the host as well.
func TestIntegrationHostQuorumRefusesTheWorkflowsOne(t *testing.T) {
	it := newITest(t)
	q := newQuorumReviewers(it)
	b := quorumDocker(t, "it-quorum-host")
	hostQueue := it.queue + "-quorum-host"
	it.worker(hostQueue, b, func(c *activities.Config) { c.Policy.Quorum = 2 })
	it.worker(it.queue, nil, func(c *activities.Config) {
		c.Backend, c.BackendName, c.SandboxTaskQueue = nil, b.Name(), hostQueue
		c.Policy.Quorum = 1
	})

	const id = "it-quorum-lowered"
	run := it.start(id, it.queue, guard.Request{Code: "print('must not run')"})
	if st := it.waitState(id, contract.StatusAwaitingApproval); st.Quorum != 1 {
		t.Fatalf("the lowered workflow's quorum is %d; want 1", st.Quorum)
	}
	if res, err := it.decide(id, it.signed(id, true)); err != nil || res.State != contract.StatusRunning {
		t.Fatalf("alice's approval: %+v, %v; want accepted, running", res, err)
	}
	var ar *guard.ApprovalRefused
	if _, err := it.result(run); !errors.As(contract.FromFailure(err), &ar) || !strings.Contains(err.Error(), "needs 2 approvals") {
		t.Fatalf("result: %v; want the host's ApprovalRefused (quorum): needs 2 approvals", err)
	}
	if started(it.sink, id) != 0 {
		t.Errorf("the host started the code %d times; want never", started(it.sink, id))
	}

	// A RunCode of the writer's own, on its own task queue: it takes one decision and sends it
	// as both approvals, then a second of alice's keys' as the second.
	const rogueQueue = "sandboxflow-it-rogue-quorum"
	policy := integrationConfig(nil, nil, "").Policy
	c, err := policy.Check(guard.Request{Code: "print('must not run either')"}, b.Name())
	if err != nil {
		t.Fatal(err)
	}
	rogue := func(ctx workflow.Context, _ contract.Input) ([]string, error) {
		info := workflow.GetInfo(ctx)
		st := contract.Status{State: contract.StatusAwaitingApproval, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			SandboxTaskQueue: hostQueue, Request: c.Summary(), DecisionWait: contract.DecisionWait{ApprovalDeadline: workflow.Now(ctx).Add(time.Hour)}}
		if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.Status, error) { return st, nil }); err != nil {
			return nil, err
		}
		var d1, d2 contract.Decision
		ch := workflow.GetSignalChannel(ctx, contract.SignalApproval)
		ch.Receive(ctx, &d1)
		ch.Receive(ctx, &d2)
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: hostQueue, StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out []string
		for _, ds := range [][]contract.Decision{{d1, d1}, {d1, d2}} {
			err := workflow.ExecuteActivity(actx, contract.RunActivityName, contract.RunInput{Checked: c, Decision: ds[0], Decisions: ds}).Get(ctx, nil)
			out = append(out, errorText(err))
		}
		return out, nil
	}
	it.ts.NewWorker(rogueQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.WorkflowName})
	})
	const rid = "it-quorum-rogue"
	rrun, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: rid, TaskQueue: rogueQueue}, contract.WorkflowName, contract.Input{})
	if err != nil {
		t.Fatal(err)
	}
	st := it.waitState(rid, contract.StatusAwaitingApproval)
	fields := func() approval.Fields {
		f := reviewertest.Fields(st.WorkflowID, st.RunID, c.Digest, hostQueue, true)
		f.Reviewer = "alice"
		return f
	}
	it.signal(rid, q.alice.Decision(t, fields()))
	it.signal(rid, q.alice2.Decision(t, fields()))
	var out []string
	if err := rrun.Get(it.ctx(time.Minute), &out); err != nil {
		t.Fatalf("rogue: %v", err)
	}
	for i, why := range []string{"the same reviewer", "the same reviewer"} {
		if i >= len(out) || !strings.Contains(out[i], guard.TypeApprovalRefused) || !strings.Contains(out[i], why) {
			t.Errorf("rogue run %d: %q; want an ApprovalRefused saying %q", i+1, out, why)
		}
	}
	if started(it.sink, rid) != 0 {
		t.Errorf("the host started the rogue's code %d times; want never", started(it.sink, rid))
	}
}

// errorText is err's type and text, or "" for none.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return guard.TypeOf(contract.FromFailure(err)) + ": " + err.Error()
}

// A namespace writer's RunCode swaps an edit's code and signatures on the real sandbox host
// (Docker): alice's approval of the original code sent with the edited code (under the edit's
// record, or relabelled with the edited digest), and her approval of the edited code sent with
// the original code, are each refused (ApprovalRefused) and nothing runs. (Her genuine approval
// of the edited code with it would now be refused too: the refused activities used the run.)
func TestIntegrationHostRefusesSwappedEditSignatures(t *testing.T) {
	it := newITest(t)
	b := quorumDocker(t, "it-quorum-edit")
	hostQueue := it.queue + "-edit-host"
	it.worker(hostQueue, b, nil)
	policy := integrationConfig(nil, nil, "").Policy
	orig, err := policy.Check(guard.Request{Code: "print('original')"}, b.Name())
	if err != nil {
		t.Fatal(err)
	}
	edited, err := policy.Check(guard.Request{Code: "print('edited')"}, b.Name())
	if err != nil {
		t.Fatal(err)
	}
	edit := &guard.Edit{Editor: "alice", OriginalDigest: orig.Digest, Digest: edited.Digest}
	rogue := func(ctx workflow.Context, _ contract.Input) ([]string, error) {
		var dOrig, dEdited contract.Decision
		ch := workflow.GetSignalChannel(ctx, contract.SignalApproval)
		ch.Receive(ctx, &dOrig)
		ch.Receive(ctx, &dEdited)
		relabelled := dOrig
		relabelled.Digest = edited.Digest
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: hostQueue, StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out []string
		for _, in := range []contract.RunInput{
			{Checked: edited, Decision: dOrig, Decisions: []contract.Decision{dOrig}, Edit: edit},
			{Checked: edited, Decision: relabelled, Decisions: []contract.Decision{relabelled}, Edit: edit},
			{Checked: orig, Decision: dEdited, Decisions: []contract.Decision{dEdited}},
		} {
			err := workflow.ExecuteActivity(actx, contract.RunActivityName, in).Get(ctx, nil)
			out = append(out, errorText(err))
		}
		return out, nil
	}
	const rogueQueue = "sandboxflow-it-rogue-edit"
	it.ts.NewWorker(rogueQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.WorkflowName})
	})
	const id = "it-quorum-swapped-edit"
	run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: rogueQueue}, contract.WorkflowName, contract.Input{})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(digest string) contract.Decision {
		f := reviewertest.Fields(id, run.GetRunID(), digest, hostQueue, true)
		f.Reviewer = "alice"
		return it.alice.Decision(t, f)
	}
	it.signal(id, sign(orig.Digest))
	it.signal(id, sign(edited.Digest))
	var out []string
	if err := run.Get(it.ctx(2*time.Minute), &out); err != nil {
		t.Fatalf("rogue: %v", err)
	}
	want := []string{"the approval is for " + orig.Digest, "does not verify", "the approval is for " + edited.Digest}
	for i, w := range want {
		if i >= len(out) || !strings.Contains(out[i], w) || !strings.HasPrefix(out[i], guard.TypeApprovalRefused) {
			t.Errorf("run %d: %q; want %q", i+1, out, w)
		}
	}
	if n := started(it.sink, id); n != 0 {
		t.Errorf("the host started code %d times; want never", n)
	}
}

// TestRecordQuorumHistory runs the story of testdata/runcode_quorum_edit.json and checks that its
// history replays (historytest.Recorded; SANDBOXFLOW_RECORD_HISTORY=1 re-records the file): a
// quorum-of-2 run on the local backend where bob approves the started code, alice's edit replaces
// it (checked again, bob's approval dropped), bob's approval of the original is refused, and bob
// approves the edited code, which runs.
func TestRecordQuorumHistory(t *testing.T) {
	it := newITest(t)
	q := newQuorumReviewers(it)
	it.worker(it.queue, it.localBackend(), func(c *activities.Config) { c.Policy.Quorum = 2 })
	req := guard.Request{Code: "print('started')"}
	const id = "recorded-quorum" // workflows.recordedQuorumID
	run := it.start(id, it.queue, req)
	if _, err := it.decide(id, it.signedAs(id, q.bob, "bob", true)); err != nil {
		t.Fatal(err)
	}
	edited := req
	edited.Code = "print('edited')"
	f := it.fields(id, true)
	original := f.Digest
	f.Digest, f.Reviewer = digestOf(t, edited), "alice"
	d := q.alice.Decision(t, f)
	d.Edit = &contract.DecisionEdit{Code: edited.Code, OriginalDigest: original}
	if res, err := it.decide(id, d); err != nil || res.Digest != f.Digest {
		t.Fatalf("alice's edit: %+v, %v", res, err)
	}
	old := reviewertest.Fields(id, run.GetRunID(), original, it.queue, true)
	old.Reviewer = "bob"
	it.signal(id, q.bob.Decision(t, old))
	it.waitStatus(id, "one rejection", func(st contract.Status) bool { return st.RejectedDecisions == 1 })
	if _, err := it.decide(id, it.signedAs(id, q.bob, "bob", true)); err != nil {
		t.Fatal(err)
	}
	if res, err := it.result(run); err != nil || res.Edit == nil || len(res.Approvals) != 2 {
		t.Fatalf("result %+v, %v", res, err)
	}
	historytest.Recorded(t, replayer(), id, it.history(id), filepath.Join("testdata", "runcode_quorum_edit.json"))
}
