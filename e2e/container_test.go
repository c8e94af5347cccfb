//go:build integration

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/server/temporaltest"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/worker/service"
)

func slogDiscard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startInProcessWorker builds cfg's backend as the worker would and serves RunCode over it, with
// cfg's policy and alice as the one reviewer, on the shared server ts (agenttest).
func startInProcessWorker(t *testing.T, ts *temporaltest.TestServer, cfg *service.Options, alice *reviewertest.Reviewer) *agenttest.Env {
	t.Helper()
	backend, closeBackend, err := service.NewBackend(context.Background(), cfg, slogDiscard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeBackend)
	policy := cfg.Policy()
	return agenttest.Setup(t, agenttest.Options{Server: ts, Backend: backend, Policy: &policy, Reviewer: alice, NoStarter: true,
		Sink: activities.SlogSink{Logger: slogDiscard()}})
}

func testPythonImage() string {
	if img := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE"); img != "" {
		return img
	}
	return "sandboxflow-test-python:bookworm-full"
}

// testDataImage is the data-science image scripts/setup-docker.sh builds, which scripts/demo.sh
// runs by default.
func testDataImage() string {
	if img := os.Getenv("SANDBOXFLOW_DATA_PYTHON_IMAGE"); img != "" {
		return img
	}
	return "sandboxflow-data-python:bookworm"
}

// requireDataImage is requireDocker plus the data image: missing, the test skips, or fails where
// Docker is required.
func requireDataImage(t *testing.T) {
	t.Helper()
	requireDocker(t)
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", testDataImage()).CombinedOutput(); err != nil {
		need.Missing(t, need.Docker, fmt.Errorf("the data image %s is missing (%v: %s); run scripts/setup-docker.sh", testDataImage(), err, bytes.TrimSpace(out)))
	}
}

func requireDocker(t *testing.T) {
	t.Helper()
	need.Need(t, need.Docker)
}

// TestWorkerInItsContainer builds the worker image without a registry, runs the worker inside it
// (host network, Docker socket mounted) against an in-process Temporal server, and shows that a run
// launched through it creates its sandbox as a sibling container and returns the right result.
func TestWorkerInItsContainer(t *testing.T) {
	requireDocker(t)
	tag := "sandboxflow-worker:test"
	if out, err := exec.Command("../scripts/build-worker-image.sh", tag).CombinedOutput(); err != nil {
		t.Fatalf("build-worker-image.sh: %v\n%s", err, out)
	}
	ts := devtest.Start(t)
	queue := "container-" + uuid.NewString()[:8]
	name := "sandboxflow-worker-test-" + uuid.NewString()[:8]
	alice := reviewertest.New(t, "alice")
	run := exec.Command("docker", "run", "-d", "--rm", "--name", name, "--network", "host",
		"-v", "/var/run/docker.sock:/var/run/docker.sock",
		"-v", alice.File+":/etc/sandboxflow/allowed_signers:ro", "-e", "SANDBOXFLOW_REVIEWERS=/etc/sandboxflow/allowed_signers",
		"-e", "SANDBOXFLOW_LANGUAGES=python,sh",
		tag, "--address", ts.GetFrontendHostPort(), "--namespace", ts.GetDefaultNamespace(),
		"--task-queue", queue, "--backend", "docker", "--docker-image", testPythonImage())
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	deployment := "io.sandboxflow.deployment=" + ts.GetDefaultNamespace() + "/" + queue
	t.Cleanup(func() { removeLabelled(t, deployment) })
	deadline := time.Now().Add(time.Minute)
	for {
		logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
		if strings.Contains(string(logs), "worker running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the containerized worker did not start:\n%s", logs)
		}
		time.Sleep(200 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc, err := client.New(client.Options{Temporal: ts.GetDefaultClient(), TaskQueue: queue, Reviewer: alice.Principal})
	if err != nil {
		t.Fatal(err)
	}
	// The worker image holds no Python: the output can only come from a sibling sandbox container.
	code := "import os, sys\nprint(sys.version_info[0], os.getuid(), open('/etc/debian_version').read().split('.')[0])\n"
	started, err := sc.Start(ctx, guard.Request{Code: code}, client.StartOptions{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := sc.Approve(ctx, client.Run(started.WorkflowID), started.Digest, alice.Signer, ""); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	res, err := sc.Result(ctx, started.WorkflowID)
	if err != nil {
		logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
		t.Fatalf("Result: %v\nworker logs:\n%s", err, logs)
	}
	var sum, uid, n int
	if _, err := fmt.Sscanf(string(res.Stdout), "%d %d %d\n", &sum, &uid, &n); err != nil || !res.OK || sum != 3 || n != 12 ||
		uid < 100000 || uid > 100999 || res.Backend != "docker" {
		t.Fatalf("got %+v (stdout %q, stderr %q); want ok, \"3 UID 12\" with UID in the sandbox range 100000-100999, backend docker", res, res.Stdout, res.Stderr)
	}

	// Stopped as Docker stops a container (SIGTERM), the worker empties its warm pool: no
	// container of its deployment is left behind.
	if out, err := exec.Command("docker", "stop", "-t", "30", name).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v\n%s", err, out)
	}
	if left := removeLabelled(t, deployment); len(left) > 0 {
		t.Errorf("containers of the stopped worker's deployment left behind: %v", left)
	}
}

// removeLabelled removes every container that carries label (key=value) and returns their names.
func removeLabelled(t *testing.T, label string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label="+label, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Errorf("docker ps: %v", err)
		return nil
	}
	names := strings.Fields(string(out))
	for _, n := range names {
		_ = exec.Command("docker", "rm", "-f", n).Run()
	}
	return names
}

// TestWorkflowThroughDockerBackend runs RunCode end to end on an in-process Temporal server with an
// in-process worker over the Docker backend, under runc and under runsc (gVisor).
func TestWorkflowThroughDockerBackend(t *testing.T) {
	requireDocker(t)
	ts := devtest.Start(t)
	for _, runtime := range []string{"runc", "runsc"} {
		t.Run(runtime, func(t *testing.T) {
			cfg := &service.Options{Backend: kinds.Docker, Docker: service.DockerOptions{Image: testPythonImage(), Runtime: runtime}, Languages: "python,sh", ReapInterval: time.Minute}
			alice := reviewertest.New(t, "alice")
			sc := startInProcessWorker(t, ts, cfg, alice).Client

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			req := guard.Request{
				Code: "import os\nprint(open('in.txt').read().upper(), os.environ['WHO'])\nopen('out.txt','w').write('done')\n",
				Settings: guard.Settings{
					Files:    map[string][]byte{"in.txt": []byte("hello")},
					Env:      map[string]string{"WHO": "sandbox"},
					Metadata: guard.Metadata{Agent: "test"},
				},
			}
			started, err := sc.Start(ctx, req, client.StartOptions{})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if _, err := sc.Approve(ctx, client.Run(started.WorkflowID), started.Digest, alice.Signer, "looks fine"); err != nil {
				t.Fatalf("Approve: %v", err)
			}
			res, err := sc.Result(ctx, started.WorkflowID)
			if err != nil {
				t.Fatalf("Result: %v", err)
			}
			if !res.OK || string(res.Stdout) != "HELLO sandbox\n" || len(res.Files) != 1 || string(res.Files[0].Content) != "done" ||
				res.Reviewer != "alice" || res.Backend != "docker" || res.Digest != started.Digest {
				t.Fatalf("got %+v (stdout %q stderr %q)", res, res.Stdout, res.Stderr)
			}
		})
	}
}

// TestDoctorChecksDocker: worker doctor reports the Docker checks, including a probe run with every
// hardening flag, one PASS line each, under runc and runsc.
func TestDoctorChecksDocker(t *testing.T) {
	requireDocker(t)
	workerBin, _ := binaries(t)
	ts := devtest.Start(t)
	alice := reviewertest.New(t, "alice")
	for _, runtime := range []string{"runc", "runsc"} {
		cmd := exec.Command(workerBin, "doctor", "--address", ts.GetFrontendHostPort(), "--namespace", ts.GetDefaultNamespace(),
			"--docker-image", testPythonImage(), "--docker-runtime", runtime, "--reviewers", alice.File)
		out, _ := cmd.CombinedOutput()
		// No worker polls the test's queue: those lines fail, and only those.
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "FAIL ") && !strings.HasPrefix(line, "FAIL pollers ") {
				t.Fatalf("%s: doctor failed: %s\n%s", runtime, line, out)
			}
		}
		for _, want := range []string{"PASS temporal", "PASS namespace", "PASS search attributes", "PASS docker daemon reachable",
			"PASS docker API version", "PASS docker image present", "PASS docker runtime present: " + runtime,
			"PASS docker probe run: uid=100", "capeff=0000000000000000", "interfaces=lo root=read-only",
			"docker user namespaces", "docker AppArmor", "docker cgroup version"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s: doctor output lacks %q:\n%s", runtime, want, out)
			}
		}
	}
}
