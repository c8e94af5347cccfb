//go:build integration

package workflows_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
)

// rogueHost starts a sandbox host: its sandbox activities on queue and its own host queue.
func (it *itest) rogueHost(b guard.Backend, queue, hostQueue string) {
	it.t.Helper()
	cfg := integrationConfig(b, it.sink, it.reviewers)
	cfg.HostTaskQueue = hostQueue
	acts, err := activities.New(cfg)
	if err != nil {
		it.t.Fatal(err)
	}
	it.ts.NewWorkerWithOptions(queue, func(r worker.Registry) { acts.Register(r) }, worker.Options{})
	it.ts.NewWorkerWithOptions(hostQueue, func(r worker.Registry) { acts.RegisterHost(r) }, worker.Options{})
}

// A namespace writer's own "Session" worker with two sandbox hosts, A and B. It opens its
// sandbox on A but tells the reviewer the sandbox is on B (a forged SessionOpened), and holds
// the reviewer's genuine signatures for: cell 1 on B; cell 1 on A; cell 2 on A over a chain it
// made up (as if cell 1 had printed nothing: its result hidden); and a new cell 1 (the index
// reused) on A over the true chain. It schedules cell 1 on B (B keeps no sandbox for the run)
// and on A with B's approval, then cell 1 on A, then the made-up chain's cell 2 and the reused
// index on A, and a second SessionHold beside its first. Only the honest cell 1 on A runs;
// every other is refused, and the second hold too.
func TestIntegrationRogueSessionHostsChainsIndexes(t *testing.T) {
	it := newITest(t)
	ba, bb := &sessiontest.Backend{}, &sessiontest.Backend{}
	qa, qb := it.queue+"-a", it.queue+"-b"
	hostA, hostB := it.queue+"-host-a", it.queue+"-host-b"
	it.rogueHost(ba, qa, hostA)
	it.rogueHost(bb, qb, hostB)
	policy := integrationConfig(nil, nil, "").Policy
	s, err := policy.CheckSession(guard.SessionRequest{}, sessiontest.Name)
	if err != nil {
		t.Fatal(err)
	}
	check := func(index int, code string) guard.Cell {
		c, err := policy.CheckCell(s, index, "", code)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cell1, cell2, reused := check(1, "print('one')"), check(2, "print('two')"), check(1, "print('again')")
	start := guard.ChainStart(s.Digest)
	type plan struct {
		Outcomes []string
		Chain    string // the true chain after cell 1, from its result
	}
	rogue := func(ctx workflow.Context, _ contract.SessionInput) (plan, error) {
		var p plan
		opts := func(queue string) workflow.Context {
			return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: queue, StartToCloseTimeout: time.Minute,
				ScheduleToStartTimeout: 10 * time.Second, HeartbeatTimeout: 10 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		}
		var opened contract.SessionOpened
		if err := workflow.ExecuteActivity(opts(qa), contract.SessionOpenActivityName, contract.SessionOpenInput{Session: s}).Get(ctx, &opened); err != nil {
			return p, err
		}
		hctx, cancelHolds := workflow.WithCancel(opts(opened.HostTaskQueue))
		hold1 := workflow.ExecuteActivity(hctx, contract.SessionHoldActivityName, contract.SessionHoldInput{SandboxID: opened.SandboxID})
		_ = workflow.Sleep(ctx, time.Second)
		hold2 := workflow.ExecuteActivity(hctx, contract.SessionHoldActivityName, contract.SessionHoldInput{SandboxID: opened.SandboxID})
		record := func(f workflow.Future, out any) {
			err := f.Get(ctx, out)
			if err == nil {
				p.Outcomes = append(p.Outcomes, "ran")
				return
			}
			p.Outcomes = append(p.Outcomes, guard.TypeOf(contract.FromFailure(err)))
		}
		record(hold2, nil)
		var onB, onA contract.Decision
		sig := workflow.GetSignalChannel(ctx, contract.SignalApproval)
		sig.Receive(ctx, &onB)
		sig.Receive(ctx, &onA)
		run := func(queue string, c guard.Cell, chain string, d contract.Decision, out any) {
			record(workflow.ExecuteActivity(opts(queue), contract.SessionCellActivityName, contract.CellRunInput{Cell: c, Chain: chain, Decision: d}), out)
		}
		run(hostB, cell1, start, onB, nil)
		run(hostA, cell1, start, onB, nil)
		var res guard.Result
		run(hostA, cell1, start, onA, &res)
		p.Chain = guard.ChainNext(start, guard.CellDigest(s.Digest, 1, cell1.CodeDigest, start), guard.ResultDigest(res))
		workflow.SetQueryHandler(ctx, "chain", func() (string, error) { return p.Chain, nil })
		var madeUp, again contract.Decision
		sig.Receive(ctx, &madeUp)
		sig.Receive(ctx, &again)
		run(hostA, cell2, start, madeUp, nil)
		run(hostA, reused, p.Chain, again, nil)
		cancelHolds()
		_ = hold1.Get(ctx, nil)
		return p, nil
	}
	const rogueQueue = "sandboxflow-it-rogue-hosts"
	it.ts.NewWorker(rogueQueue, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.SessionWorkflowName})
	})
	id := "it-rogue-hosts-" + uuid.NewString()[:8]
	run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: rogueQueue},
		contract.SessionWorkflowName, contract.SessionInput{})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(digest, queue string) contract.Decision {
		return it.alice.Decision(t, reviewertest.Fields(id, run.GetRunID(), digest, queue, true))
	}
	d1 := guard.CellDigest(s.Digest, 1, cell1.CodeDigest, start)
	it.signal(id, sign(d1, hostB))
	it.signal(id, sign(d1, hostA))
	var chain string
	deadline := time.Now().Add(time.Minute)
	for chain == "" {
		if v, err := it.c.QueryWorkflow(it.ctx(10*time.Second), id, "", "chain"); err == nil {
			_ = v.Get(&chain)
		}
		if time.Now().After(deadline) {
			t.Fatal("cell 1 never ran")
		}
		time.Sleep(100 * time.Millisecond)
	}
	it.signal(id, sign(guard.CellDigest(s.Digest, 2, cell2.CodeDigest, start), hostA))
	it.signal(id, sign(guard.CellDigest(s.Digest, 1, reused.CodeDigest, chain), hostA))
	var p plan
	if err := run.Get(it.ctx(2*time.Minute), &p); err != nil {
		t.Fatal(err)
	}
	want := []string{guard.TypeConfigError, guard.TypeSandboxLost, guard.TypeApprovalRefused, "ran", guard.TypeApprovalRefused, guard.TypeApprovalRefused}
	if len(p.Outcomes) != len(want) {
		t.Fatalf("outcomes %q; want %q", p.Outcomes, want)
	}
	for i := range want {
		if p.Outcomes[i] != want[i] {
			t.Fatalf("outcomes %q; want %q (second hold, cell 1 on B, B's approval on A, cell 1 on A, a made-up chain, a reused index)", p.Outcomes, want)
		}
	}
	if ba.Cells() != 1 || bb.Cells() != 0 || len(bb.Sandboxes()) != 0 {
		t.Fatalf("host A ran %d cells, host B %d in %d sandboxes; want 1 on A, none on B", ba.Cells(), bb.Cells(), len(bb.Sandboxes()))
	}
}
