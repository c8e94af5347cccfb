//go:build integration

package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
)

// worker doctor against a real server: a missing reviewers file and a queue no worker polls are
// FAIL lines naming them; once workers poll both queues, their lines pass.
func TestIntegrationDoctorNamesTheUnpolledQueueAndTheMissingReviewers(t *testing.T) {
	ts := devtest.Start(t)
	o := validOptions(t, "local")
	o.Role = RoleWorkflows
	o.TaskQueue, o.SandboxTaskQueue = "doctor-agents", "doctor-sandboxes"
	o.Conn.Address, o.Conn.Namespace = ts.GetFrontendHostPort(), ts.GetDefaultNamespace()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out strings.Builder
	if failed := doctor(ctx, o, &out); !failed {
		t.Errorf("doctor passed:\n%s", out.String())
	}
	for _, want := range []string{
		"FAIL reviewers: config: no reviewers file",
		"FAIL pollers doctor-agents (workflow tasks): no worker polls task queue doctor-agents",
		"FAIL pollers doctor-sandboxes (activity tasks): no worker polls task queue doctor-sandboxes",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor said:\n%s\nwant a line with %q", out.String(), want)
		}
	}

	for _, q := range []string{o.TaskQueue, o.SandboxTaskQueue} {
		w := worker.New(ts.GetDefaultClient(), q, worker.Options{})
		w.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: "idle"})
		w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "idle"})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
	}
	for {
		out.Reset()
		doctor(ctx, o, &out)
		if strings.Contains(out.String(), "PASS pollers doctor-agents") && strings.Contains(out.String(), "PASS pollers doctor-sandboxes") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("doctor never saw the pollers:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
