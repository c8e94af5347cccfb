//go:build integration

package workflows_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// holdBeatDropper drops the heartbeats of the host's SessionHold while dropping is set, as a
// cut connection or a loaded server would: the server times the hold out, and the host learns
// it only from the answer to its next heartbeat.
type holdBeatDropper struct {
	interceptor.WorkerInterceptorBase
	dropping atomic.Bool
	dropped  atomic.Int32
}

func (d *holdBeatDropper) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &dropInbound{d: d}
	i.Next = next
	return i
}

type dropInbound struct {
	interceptor.ActivityInboundInterceptorBase
	d *holdBeatDropper
}

func (i *dropInbound) Init(out interceptor.ActivityOutboundInterceptor) error {
	o := &dropOutbound{d: i.d}
	o.Next = out
	return i.Next.Init(o)
}

type dropOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	d *holdBeatDropper
}

func (o *dropOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if o.d.dropping.Load() && activity.GetInfo(ctx).ActivityType.Name == contract.SessionHoldActivityName {
		o.d.dropped.Add(1)
		return
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

// TestIntegrationSessionOutlivesALostHold: the host's hold heartbeats are lost for longer than
// the heartbeat timeout (2 s here), so the real server times the hold out. The session holds its
// sandbox again on the same host, which kept it: the session stays open, its next cell runs in
// the same sandbox, and closing it removes the sandbox. Before, the session ended SandboxLost and
// the host removed the sandbox ("session hold: context canceled").
func TestIntegrationSessionOutlivesALostHold(t *testing.T) {
	it := newITest(t)
	b := &sessiontest.Backend{}
	hostQueue := it.queue + "-host-rehold"
	cfg := integrationConfig(b, it.sink, it.reviewers)
	cfg.HostTaskQueue = hostQueue
	acts, err := activities.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dropper := &holdBeatDropper{}
	it.ts.NewWorkerWithOptions(it.queue, func(r worker.Registry) {
		workflows.Register(r)
		acts.Register(r)
	}, worker.Options{})
	it.ts.NewWorkerWithOptions(hostQueue, func(r worker.Registry) { acts.RegisterHost(r) },
		worker.Options{Interceptors: []interceptor.WorkerInterceptor{dropper}})

	id := "it-session-rehold-" + uuid.NewString()[:8]
	run := it.startSession(id, guard.SessionRequest{})
	opened := it.sessionStatus(id)
	if st := it.cell(id, "x = 1"); st.State != contract.StatusSucceeded {
		t.Fatalf("cell 1: %s; want succeeded", st.State)
	}

	dropper.dropping.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for holdsScheduled(t, it, id) < 2 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	dropper.dropping.Store(false)
	if n := holdsScheduled(t, it, id); n < 2 {
		t.Fatalf("%d holds scheduled after %d heartbeats dropped; want the server to time the first out and the session to hold again", n, dropper.dropped.Load())
	}

	st := it.cell(id, "x += 1")
	if st.State != contract.StatusSucceeded {
		t.Fatalf("cell 2 after the lost hold: %s (%s); want succeeded", st.State, st.Error)
	}
	if now := it.sessionStatus(id); now.SandboxID != opened.SandboxID {
		t.Errorf("sandbox %s after the lost hold; want %s, the same", now.SandboxID, opened.SandboxID)
	}
	if n := len(b.Sandboxes()); n != 1 || b.Cells() != 2 {
		t.Errorf("%d sandboxes, %d cells; want both cells in one sandbox", n, b.Cells())
	}
	if err := it.sessionUpdate(id, contract.UpdateCloseSession, contract.CloseSession{Reason: "done"}, nil); err != nil {
		t.Fatalf("close: %v", err)
	}
	var res contract.SessionResult
	if err := run.Get(it.ctx(30*time.Second), &res); err != nil || res.End != contract.EndClosed {
		t.Fatalf("session ended %q, %v; want closed", res.End, err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for acts.OpenSessions() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if acts.OpenSessions() != 0 || !b.Sandboxes()[0].Closed() {
		t.Errorf("after the close: %d sandboxes kept; want the sandbox removed", acts.OpenSessions())
	}
}

// holdsScheduled counts the SessionHold activities the session scheduled.
func holdsScheduled(t *testing.T, it *itest, id string) int {
	t.Helper()
	n := 0
	for _, e := range it.history(id) {
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED &&
			e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.SessionHoldActivityName {
			n++
		}
	}
	return n
}
