//go:build integration

package activities_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// The image a reviewer approves is the one that runs (Docker): the check records the ID of the
// image the host's --docker-image names, the status shows it and the digest binds it; when the
// tag is moved to another image between the check and the approval, the sandbox host refuses
// the run (an ApprovalRefused, reason image) and nothing runs; a run checked after the move
// names the new image and runs in it; a session's settings name the image as well.
func TestIntegrationImageMovedSinceTheCheckRunsNothing(t *testing.T) {
	need.Need(t, need.Docker)
	first, second := "sandboxflow-test-python:bookworm-full", os.Getenv("SANDBOXFLOW_DATA_PYTHON_IMAGE")
	if second == "" {
		second = "sandboxflow-data-python:bookworm"
	}
	tag := fmt.Sprintf("sandboxflow-image-moved:%d", os.Getpid())
	dockerCLI(t, "tag", first, tag)
	t.Cleanup(func() { _, _ = exec.Command("docker", "rmi", tag).CombinedOutput() })
	firstID, secondID := imageID(t, first), imageID(t, second)
	b, err := docker.New(docker.Config{Image: tag, Deployment: fmt.Sprintf("image-moved-%d", os.Getpid()),
		Labels: map[string]string{"test.sandboxflow.suite": "image-moved"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Close(ctx)
	})
	e := agenttest.Setup(t, agenttest.Options{Backend: b, NoStarter: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	moved := startAwaiting(ctx, t, e)
	if moved.Request.Image != firstID {
		t.Fatalf("the status shows image %q; want the checked image %s", moved.Request.Image, firstID)
	}
	unbound := guard.Checked{Language: moved.Request.Language, Code: moved.Request.Code, CheckedSettings: guard.CheckedSettings{
		Limits: moved.Request.Limits, Backend: moved.Request.Backend}}
	if guard.Digest(&unbound) == moved.Request.Digest {
		t.Fatal("the digest is the same without the image: it does not bind it")
	}
	dockerCLI(t, "tag", second, tag)
	agenttest.Decide(t, e, moved.WorkflowID, true)
	res, err := e.Client.Result(ctx, moved.WorkflowID)
	var ar *guard.ApprovalRefused
	if !errors.As(contract.FromFailure(err), &ar) || ar.Reason != guard.RefusedImage || !strings.Contains(ar.Msg, firstID) || !strings.Contains(ar.Msg, secondID) {
		t.Fatalf("result %+v, %v; want an ApprovalRefused (image) naming %s and %s", res, err, firstID, secondID)
	}
	if ran := dockerCLI(t, "ps", "-aq", "--filter", "label="+docker.LabelWorkflowID+"="+moved.WorkflowID); ran != "" {
		t.Errorf("containers were made for the refused run: %s", ran)
	}

	after := startAwaiting(ctx, t, e)
	if after.Request.Image != secondID {
		t.Fatalf("a run checked after the move shows image %q; want %s", after.Request.Image, secondID)
	}
	agenttest.Decide(t, e, after.WorkflowID, true)
	res, err = e.Client.Result(ctx, after.WorkflowID)
	if err != nil || string(res.Stdout) != "ran\n" || res.ImageID != secondID {
		t.Fatalf("result %+v, %v; want it ran in %s", res, err, secondID)
	}

	// A session's settings name the image too, and its sandbox is made from it.
	opened, err := e.Client.OpenSession(ctx, guard.SessionRequest{Languages: []string{guard.Python}}, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = e.Client.CloseSession(context.Background(), opened.WorkflowID, "test over") }()
	for {
		st, err := e.Client.SessionStatus(ctx, opened.WorkflowID)
		if err == nil && st.State == contract.SessionOpen {
			if st.Settings.Image != secondID {
				t.Fatalf("the session's settings show image %q; want %s", st.Settings.Image, secondID)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the session never opened: %+v, %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startAwaiting starts print('ran') and returns its status once it waits for a decision.
func startAwaiting(ctx context.Context, t *testing.T, e *agenttest.Env) contract.Status {
	t.Helper()
	s, err := e.Client.Start(ctx, guard.Request{Code: "print('ran')"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := e.Client.Status(ctx, s.WorkflowID)
		if err == nil && st.State == contract.StatusAwaitingApproval {
			st.WorkflowID = s.WorkflowID
			return st
		}
		if ctx.Err() != nil {
			t.Fatalf("run %s never waited: %+v, %v", s.WorkflowID, st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func dockerCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func imageID(t *testing.T, ref string) string {
	t.Helper()
	return dockerCLI(t, "image", "inspect", "-f", "{{.Id}}", ref)
}
