//go:build integration

package workflows_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// rogueDockerOutcome is what the rogue Session worker of TestIntegrationRogueSessionDocker
// returns: the sandbox it opened, how a second SessionOpen of the same run ended, and the error
// type of each of the three runs of the approved cell ("" for one that ran).
type rogueDockerOutcome struct {
	SandboxID  string
	SecondOpen string
	Cells      []string
}

// A namespace writer's own "Session" worker, against the real Docker backend under runc and
// runsc: it opens the sandbox, opens it again for the same run, waits for the reviewer's
// genuine signed approval of cell 1 (which appends a line to /work/count), schedules the cell's
// activity twice at once and once more after both ended on the real host queue, and waits. The
// file, read from outside the sandbox with docker exec as the sandbox uid, holds one line: the cell ran once, and
// the second open was refused with a ConfigError.
func TestIntegrationRogueSessionDocker(t *testing.T) {
	need.Need(t, need.Docker)
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			it := newITest(t)
			b, err := docker.New(docker.Config{Image: "sandboxflow-test-python:bookworm-full", Runtime: rt,
				Deployment: "it-rogue-session-" + rt, Labels: map[string]string{"test.sandboxflow.suite": "workflows-rogue-session"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_ = b.Close(ctx)
			})
			hostQueue := it.queue + "-host-rogue-" + rt
			it.sessionWorkers(b, hostQueue)
			policy := integrationConfig(nil, nil, "").Policy
			s, err := policy.CheckSession(guard.SessionRequest{}, b.Name())
			if err != nil {
				t.Fatal(err)
			}
			cell, err := policy.CheckCell(s, 1, guard.Python, "with open('/work/count', 'a') as f:\n    f.write('ran\\n')\nprint('once')")
			if err != nil {
				t.Fatal(err)
			}
			chain := guard.ChainStart(s.Digest)
			rogue := func(ctx workflow.Context, _ contract.SessionInput) (rogueDockerOutcome, error) {
				var out rogueDockerOutcome
				octx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: it.queue, StartToCloseTimeout: 2 * time.Minute,
					RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
				var opened contract.SessionOpened
				if err := workflow.ExecuteActivity(octx, contract.SessionOpenActivityName, contract.SessionOpenInput{Session: s}).Get(octx, &opened); err != nil {
					return out, err
				}
				out.SandboxID = opened.SandboxID
				err := workflow.ExecuteActivity(octx, contract.SessionOpenActivityName, contract.SessionOpenInput{Session: s}).Get(octx, nil)
				out.SecondOpen = guard.TypeOf(contract.FromFailure(err))
				var d contract.Decision
				workflow.GetSignalChannel(ctx, contract.SignalApproval).Receive(ctx, &d)
				in := contract.CellRunInput{Cell: cell, Chain: chain, Decision: d}
				cctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: opened.HostTaskQueue, StartToCloseTimeout: time.Minute,
					RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
				first := workflow.ExecuteActivity(cctx, contract.SessionCellActivityName, in)
				second := workflow.ExecuteActivity(cctx, contract.SessionCellActivityName, in)
				_ = first.Get(ctx, nil)
				_ = second.Get(ctx, nil)
				third := workflow.ExecuteActivity(cctx, contract.SessionCellActivityName, in)
				for _, f := range []workflow.Future{first, second, third} {
					out.Cells = append(out.Cells, guard.TypeOf(contract.FromFailure(f.Get(ctx, nil))))
				}
				workflow.SetQueryHandler(ctx, "rogue", func() (rogueDockerOutcome, error) { return out, nil })
				workflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
				return out, nil
			}
			rogueQueue := "sandboxflow-it-rogue-session-docker-" + rt
			it.ts.NewWorker(rogueQueue, func(r worker.Registry) {
				r.RegisterWorkflowWithOptions(rogue, workflow.RegisterOptions{Name: contract.SessionWorkflowName})
			})
			id := "it-rogue-session-docker-" + uuid.NewString()[:8]
			run, err := it.c.ExecuteWorkflow(it.ctx(10*time.Second), client.StartWorkflowOptions{ID: id, TaskQueue: rogueQueue},
				contract.SessionWorkflowName, contract.SessionInput{})
			if err != nil {
				t.Fatal(err)
			}
			d := it.alice.Decision(t, reviewertest.Fields(id, run.GetRunID(), guard.CellDigest(s.Digest, 1, cell.CodeDigest, chain), hostQueue, true))
			it.signal(id, d)
			var out rogueDockerOutcome
			deadline := time.Now().Add(2 * time.Minute)
			for {
				v, err := it.c.QueryWorkflow(it.ctx(10*time.Second), id, "", "rogue")
				if err == nil && v.Get(&out) == nil && len(out.Cells) == 3 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the rogue never ran its cells: %v", err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			// /work is the sandbox uid's (mode 0700), and under runsc the container's user is root
			// without CAP_DAC_OVERRIDE: read it as that uid, named by the tmpfs's options.
			opts, err := exec.Command("docker", "inspect", "-f", `{{index .HostConfig.Tmpfs "/work"}}`, out.SandboxID).Output()
			if err != nil {
				t.Fatalf("docker inspect %s: %v", out.SandboxID, err)
			}
			uid := ""
			for _, o := range strings.Split(strings.TrimSpace(string(opts)), ",") {
				if v, ok := strings.CutPrefix(o, "uid="); ok {
					uid = v
				}
			}
			count, err := exec.Command("docker", "exec", "--user", uid+":"+uid, out.SandboxID, "cat", "/work/count").CombinedOutput()
			if err != nil {
				t.Fatalf("docker exec %s cat /work/count: %v: %s", out.SandboxID, err, count)
			}
			_ = it.c.SignalWorkflow(it.ctx(10*time.Second), id, "", "finish", nil)
			ran, refused := 0, 0
			for _, o := range out.Cells {
				switch o {
				case "":
					ran++
				case guard.TypeApprovalRefused:
					refused++
				}
			}
			if ran != 1 || refused != 2 || strings.Count(string(count), "ran\n") != 1 || out.SecondOpen != guard.TypeConfigError {
				t.Fatalf("outcomes %q, second open %q, /work/count %q; want one run and two ApprovalRefused, one line, a ConfigError", out.Cells, out.SecondOpen, count)
			}
		})
	}
}
