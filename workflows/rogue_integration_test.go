//go:build integration

package workflows_test

// Integration tests of what a namespace writer can do with a worker of its own on a RunCode run's
// task queue: answer the status query with code other than the digest names (the reviewer's
// tools refuse to approve), schedule the sandbox activity again with the genuine approval, or
// fail the running activity by id (the code still runs once). Runs are counted by the mark file
// the code appends to.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	sfclient "github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// A namespace writer's "RunCode" answers the status query with the started code under the digest
// of other env values, or with harmless code under its own digest. The reviewer's tools (the Go
// client's Statement and Review, which starter statement, approve and show use) refuse to
// approve either; a denial stays possible.
func TestIntegrationStatusThatShowsOtherCodeIsNotApproved(t *testing.T) {
	it := newITest(t)
	policy := integrationConfig(nil, nil, "").Policy
	started, _ := markRequest(t)
	evil, err := policy.Check(started, "local")
	if err != nil {
		t.Fatal(err)
	}
	harmless, err := policy.Check(guard.Request{Code: "print('harmless')", Settings: guard.Settings{Env: started.Env}}, "local")
	if err != nil {
		t.Fatal(err)
	}
	otherValues := started
	otherValues.Env = map[string]string{"MARK": "/etc/cron.d/x"}
	elsewhere, err := policy.Check(otherValues, "local")
	if err != nil {
		t.Fatal(err)
	}
	// it-lie-digest shows the started code and env names under the digest of other env values
	// (which no status shows); it-lie-code shows harmless code under its own digest.
	underOtherDigest := evil.Summary()
	underOtherDigest.Digest = elsewhere.Digest
	shows := map[string]guard.Summary{"it-lie-digest": underOtherDigest, "it-lie-code": harmless.Summary()}
	rogue := func(ctx workflow.Context, _ contract.Input) error {
		info := workflow.GetInfo(ctx)
		st := contract.Status{State: contract.StatusAwaitingApproval, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
			SandboxTaskQueue: it.queue, Request: shows[info.WorkflowExecution.ID], DecisionWait: contract.DecisionWait{ApprovalDeadline: workflow.Now(ctx).Add(time.Hour)}}
		if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.Status, error) { return st, nil }); err != nil {
			return err
		}
		workflow.GetSignalChannel(ctx, contract.SignalApproval).Receive(ctx, nil)
		return nil
	}
	const rogueQueue = "sandboxflow-it-rogue-status"
	it.ts.NewWorker(rogueQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.WorkflowName})
	})
	sc, err := sfclient.New(sfclient.Options{Temporal: it.c, TaskQueue: rogueQueue})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"it-lie-digest": "is not the digest of what it shows", "it-lie-code": "differ in their code"} {
		if _, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: rogueQueue}, contract.WorkflowName, contract.Input{Request: started}); err != nil {
			t.Fatal(err)
		}
		it.waitState(id, contract.StatusAwaitingApproval)
		if _, err := sc.Statement(it.ctx(10*time.Second), sfclient.Run(id), sfclient.StatementOptions{}); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "do not approve") {
			t.Errorf("%s: statement to approve: %v; want a refusal saying %q", id, err, want)
		}
		if _, err := sc.Review(it.ctx(10*time.Second), sfclient.Run(id), sfclient.ReviewOptions{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: review: %v; want a refusal saying %q", id, err, want)
		}
		if _, err := sc.Statement(it.ctx(10*time.Second), sfclient.Run(id), sfclient.StatementOptions{Deny: true}); err != nil {
			t.Errorf("%s: statement to deny: %v; want one", id, err)
		}
	}
}

// A namespace writer polls the task queue of a RunCode run with its own worker, whose "RunCode"
// waits for the reviewer's genuine signed approval and then schedules the sandbox activity twice
// at once and once more after both ended. The code runs at most once.
func TestIntegrationRogueWorkflowWorkerCannotRunAnApprovalTwice(t *testing.T) {
	it := newITest(t)
	it.worker(it.queue, it.localBackend(), nil)
	req, mark := markRequest(t)
	req.Env["SLEEP"] = "1"
	checked, err := integrationConfig(nil, nil, "").Policy.Check(req, "local")
	if err != nil {
		t.Fatal(err)
	}
	// The rogue answers with the outcome of each of its three activities ("" for a result).
	rogue := func(ctx workflow.Context, _ contract.Input) ([]string, error) {
		var d contract.Decision
		workflow.GetSignalChannel(ctx, contract.SignalApproval).Receive(ctx, &d)
		in := contract.RunInput{Checked: checked, Decision: d}
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: it.queue, StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		first := workflow.ExecuteActivity(ctx, contract.RunActivityName, in)
		second := workflow.ExecuteActivity(ctx, contract.RunActivityName, in)
		third := func() workflow.Future {
			_ = first.Get(ctx, nil)
			_ = second.Get(ctx, nil)
			return workflow.ExecuteActivity(ctx, contract.RunActivityName, in)
		}()
		var out []string
		for _, f := range []workflow.Future{first, second, third} {
			err := f.Get(ctx, nil)
			out = append(out, fmt.Sprint(err))
			if err == nil {
				out[len(out)-1] = ""
			}
		}
		return out, nil
	}
	run := it.approvedImpostor("sandboxflow-it-rogue", "it-rogue-worker", rogue, req, checked.Digest)
	var outcomes []string
	if err := run.Get(it.ctx(90*time.Second), &outcomes); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for i, o := range outcomes {
		switch {
		case o == "":
			ran++
		case !strings.Contains(o, guard.TypeApprovalRefused) || !strings.Contains(o, "an approval runs code once") || !strings.Contains(o, "nothing ran"):
			t.Errorf("activity %d: %s; want a result or the refusal saying an approval runs code once", i+1, o)
		}
	}
	// Each of the two at once may see the other's claim before the other withdrew it: then
	// neither runs. The approval is the rogue's to waste; what matters is that it never runs twice.
	if ran > 1 || outcomes[2] == "" {
		t.Errorf("outcomes %q: want at most one of the two concurrent activities to run and the later one refused", outcomes)
	}
	wantRuns(t, mark, ran)
}

// A namespace writer fails the running sandbox activity by id with a failure that says the code
// never started; the workflow, believing it, schedules a fresh activity. Host 1, still running the
// code, has no free slot, so the fresh activity goes to host 2, which has never seen the run: the
// claim host 1 left unreleased in the run's history refuses it. The code runs once.
func TestIntegrationForgedNotStartedFailureDoesNotRunTheCodeAgain(t *testing.T) {
	it := newITest(t)
	it.workerWithOptions(it.queue, integrationConfig(it.localBackend(), it.sink, it.reviewers),
		worker.Options{Identity: "host-1", MaxConcurrentActivityExecutionSize: 1})
	req, mark := markRequest(t)
	req.Env["SLEEP"] = "3"
	const id = "it-forged-failure"
	run := it.start(id, it.queue, req)
	it.waitState(id, contract.StatusAwaitingApproval)
	it.signal(id, it.signed(id, true))
	waitLines(t, mark, 1)
	it.workerWithOptions(it.queue, integrationConfig(it.localBackend(), it.sink, it.reviewers), worker.Options{Identity: "host-2"})
	activityID := ""
	for _, ev := range it.history(id) {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == contract.RunActivityName {
			activityID = a.GetActivityId()
		}
	}
	forged := contract.ToFailure(&guard.IntegrationError{Op: "connect", Err: errors.New("connection refused")})
	if err := it.c.CompleteActivityByID(it.ctx(10*time.Second), it.ts.GetDefaultNamespace(), id, "", activityID, nil, forged); err != nil {
		t.Fatalf("fail activity %q by id: %v", activityID, err)
	}
	_, err := it.result(run)
	var ar *guard.ApprovalRefused
	if !errors.As(contract.FromFailure(err), &ar) || ar.Reason != guard.RefusedAlreadyUsed || !strings.Contains(err.Error(), "never released it") {
		t.Fatalf("result error %v; want the refusal of the fresh activity, naming the unreleased claim", err)
	}
	history := it.history(id)
	if scheduled, _ := countRunActivities(history); scheduled != 2 {
		t.Errorf("%d sandbox activities scheduled; want 2 (the forged failure made the workflow try again)", scheduled)
	}
	var hosts []string
	claims := 0
	for _, ev := range history {
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			hosts = append(hosts, a.GetIdentity())
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == contract.SignalSandboxClaim {
			claims++
		}
	}
	if len(hosts) != 2 || hosts[0] != "host-1" || hosts[1] != "host-2" {
		t.Errorf("sandbox activities taken by %q; want host-1 then host-2", hosts)
	}
	if claims != 3 {
		t.Errorf("%d claim signals in the history; want 3 (host 1's claim, host 2's claim and its release)", claims)
	}
	time.Sleep(4 * time.Second) // past the first code's sleep
	wantRuns(t, mark, 1)
}

// approvedImpostor runs fn as "RunCode" on queue, as a namespace writer's worker would, starts the
// run id of it with req, and has the reviewer sign exactly this run, this digest and the sandbox
// task queue it.queue.
func (it *itest) approvedImpostor(queue, id string, fn any, req guard.Request, digest string) client.WorkflowRun {
	it.t.Helper()
	it.ts.NewWorker(queue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: contract.WorkflowName})
	})
	run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: queue}, contract.WorkflowName, contract.Input{Request: req})
	if err != nil {
		it.t.Fatal(err)
	}
	it.signal(id, it.alice.Decision(it.t, reviewertest.Fields(id, run.GetRunID(), digest, it.queue, true)))
	return run
}
