//go:build integration

// Package agenttest sets up what the integration tests with an in-process worker share: a Temporal
// server in-process, a worker (the local backend unless a test gives its own), a built starter,
// and the one helper through which every such test approves or denies a run.
package agenttest

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// Env is a running server and worker.
type Env struct {
	Address, Namespace, TaskQueue string
	// Temporal is the Temporal client the worker and Client use (with the payload codec when
	// Options.KeyFile is set).
	Temporal tclient.Client
	// Client reads and decides runs.
	Client *client.Client
	// Starter is the path of a freshly built starter binary.
	Starter string
	// Reviewer is the reviewer whose key the worker's reviewers file lists; nil when
	// Options.ReviewersFile was given.
	Reviewer *reviewertest.Reviewer
	// Host is the sandbox host whose key signs the worker's receipts, and whose hosts file the
	// worker's check records (so every result is verified against it).
	Host *hosttest.Host
	// ReviewersFile is the worker's reviewers file.
	ReviewersFile string
}

// Options adjust Setup.
type Options struct {
	// Sink receives the activity's events. Optional: a MemorySink.
	Sink activities.Sink
	// Interceptors are the worker's. Optional.
	Interceptors []interceptor.WorkerInterceptor
	// KeyFile is a payload key file (codec.LoadKeyRing): the worker and Env.Client encrypt every
	// payload with it, as a worker and starter given --key-file do. Optional: plain payloads.
	KeyFile string
	// Server is the Temporal server to use. Optional: a fresh one (devtest.Start).
	Server *temporaltest.TestServer
	// Backend runs the code. Optional: the local backend with the host's python3.
	Backend guard.Backend
	// Policy is the worker's policy. Optional: python, with an approval timeout of an hour.
	Policy *guard.Policy
	// Reviewer is the one reviewer the worker's reviewers file lists. Optional: a fresh
	// "test-reviewer".
	Reviewer *reviewertest.Reviewer
	// ReviewersFile is the worker's reviewers file, which the test writes itself (it may not
	// exist yet when Setup returns). Optional: Reviewer's file. With it, no reviewer is made:
	// Env.Reviewer is nil, Env.Client names no reviewer, and Decide cannot be used.
	ReviewersFile string
	// PasskeyOrigin and PasskeyCountersFile are the worker's (activities.Config). Optional.
	PasskeyOrigin, PasskeyCountersFile string
	// Host signs the receipts. Optional: a fresh "test-host".
	Host *hosttest.Host
	// NoStarter skips building the starter (Env.Starter is then empty).
	NoStarter bool
	// TaskQueue is the worker's task queue. Optional: one named after the test.
	TaskQueue string
	// Register registers more on the worker (another workflow, say). Optional.
	Register func(worker.Registry)
	// Notify is the worker's activities.Config.Notify: with it, checks record it and runs
	// schedule the notify activity (which Register must then register). Optional.
	Notify *contract.NotifyOptions
}

// Setup starts a server, a worker whose policy allows python, and builds the starter.
func Setup(t *testing.T, opts ...Options) *Env {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Sink == nil {
		o.Sink = &activities.MemorySink{}
	}
	ts := o.Server
	if ts == nil {
		ts = devtest.Start(t)
	}
	tc, dc := temporalClient(t, ts, o.KeyFile)
	b := o.Backend
	if b == nil {
		b = localPython(t)
	}
	policy := guard.Policy{Languages: []string{guard.Python}, ApprovalTimeout: time.Hour}
	if o.Policy != nil {
		policy = *o.Policy
	}
	reviewer, reviewers, principal := reviewerOf(t, o)
	host := o.Host
	if host == nil {
		host = hosttest.New(t, "test-host")
	}
	queue := o.TaskQueue
	if queue == "" {
		queue = "agents-" + strings.ReplaceAll(t.Name(), "/", "-")
	}
	// A backend that keeps a sandbox for a session serves sessions on a host queue of its own,
	// as worker/service does.
	hostQueue := ""
	if guard.SessionsOffered(b) {
		hostQueue = queue + "-host"
	}
	acts, err := activities.New(activities.Config{
		Policy:        policy,
		Backend:       b,
		HostTaskQueue: hostQueue,
		// Past the heartbeat timeout the server takes a live host for lost: a session's hold
		// survives that (it is held again), a running cell does not yet. On a loaded 2-core CI
		// machine, under -race, a worker can miss 5 s.
		Sink: o.Sink, HeartbeatTimeout: 12 * time.Second,
		ReviewersFile:       reviewers,
		PasskeyOrigin:       o.PasskeyOrigin,
		PasskeyCountersFile: o.PasskeyCountersFile,
		HostKeyFile:         host.KeyFile,
		HostName:            host.Name,
		HostsFile:           host.File,
		Notify:              o.Notify,
		DataConverter:       dc,
	})
	if err != nil {
		t.Fatal(err)
	}
	startWorkers(t, tc, queue, hostQueue, acts, o)
	sc, err := client.New(client.Options{Temporal: tc, TaskQueue: queue, Reviewer: principal})
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Address: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace(), TaskQueue: queue, Temporal: tc, Client: sc, Reviewer: reviewer, Host: host, ReviewersFile: reviewers}
	if !o.NoStarter {
		e.Starter = buildStarter(t)
	}
	return e
}

// temporalClient is the server's client, encrypting every payload with keyFile's ring when given
// (dc is then the ring's data converter, else nil: Temporal's default).
func temporalClient(t *testing.T, ts *temporaltest.TestServer, keyFile string) (tclient.Client, converter.DataConverter) {
	t.Helper()
	tc := ts.GetDefaultClient()
	if keyFile == "" {
		return tc, nil
	}
	ring, err := codec.LoadKeyRing(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return ts.NewClientWithOptions(codec.ClientOptions(tclient.Options{}, ring)), codec.DataConverter(ring)
}

// localPython is the local backend with the host's python3.
func localPython(t *testing.T) guard.Backend {
	t.Helper()
	need.Need(t, need.Python3)
	py, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("agenttest: python3: %v", err)
	}
	b, err := local.New(local.Config{AllowUnsafeLocal: true, Python: strings.TrimSpace(string(py))})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reviewerOf is the worker's reviewers file and the reviewer it lists (Options.Reviewer, else a
// fresh one), or Options.ReviewersFile with no reviewer and no principal.
func reviewerOf(t *testing.T, o Options) (reviewer *reviewertest.Reviewer, file, principal string) {
	t.Helper()
	if o.ReviewersFile != "" {
		if o.Reviewer != nil {
			t.Fatal("agenttest: Options.Reviewer and Options.ReviewersFile are both set")
		}
		return nil, o.ReviewersFile, ""
	}
	reviewer = o.Reviewer
	if reviewer == nil {
		reviewer = reviewertest.New(t, "test-reviewer")
	}
	return reviewer, reviewer.File, reviewer.Principal
}

// startWorkers starts the worker on queue, and the host worker on hostQueue when there is one;
// the test's cleanup stops them.
func startWorkers(t *testing.T, tc tclient.Client, queue, hostQueue string, acts *activities.Activities, o Options) {
	t.Helper()
	w := worker.New(tc, queue, activities.WorkerOptions(worker.Options{Interceptors: o.Interceptors}))
	workflows.Register(w)
	acts.Register(w)
	if o.Register != nil {
		o.Register(w)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if hostQueue == "" {
		return
	}
	hw := worker.New(tc, hostQueue, activities.WorkerOptions(worker.Options{Interceptors: o.Interceptors}))
	acts.RegisterHost(hw)
	if err := hw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hw.Stop)
}

// buildStarter builds the starter into a temporary folder and returns its path.
func buildStarter(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", "github.com/sandboxflow/sandboxflow/starter").CombinedOutput()
	if err != nil {
		t.Fatalf("agenttest: go build starter: %v\n%s", err, out)
	}
	return filepath.Join(dir, "starter")
}

// Decide is the ONE place where these tests approve or deny a run, as a reviewer would. When
// approvals need a reviewer's signature, only this function changes.
func Decide(t *testing.T, e *Env, id string, approve bool) {
	t.Helper()
	if e.Reviewer == nil {
		t.Fatal("agenttest: Decide needs Env.Reviewer (Setup was given a ReviewersFile)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := e.Client.Status(ctx, id)
	if err != nil {
		t.Fatalf("agenttest: status of %s: %v", id, err)
	}
	if approve {
		_, err = e.Client.Approve(ctx, client.Run(id), st.Request.Digest, e.Reviewer.Signer, "")
	} else {
		_, err = e.Client.Deny(ctx, client.Run(id), e.Reviewer.Signer, "not today")
	}
	if err != nil {
		t.Fatalf("agenttest: decide on %s (approve=%t): %v", id, approve, err)
	}
}

// ServeMCPHTTP starts the built starter as `starter ARGS... --http ADDR` on a free loopback port,
// waits until it listens, and returns ADDR; the test's end stops it.
func (e *Env) ServeMCPHTTP(t *testing.T, args ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(e.Starter, append(args, "--http", addr)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if i == 200 {
			t.Fatalf("agenttest: starter %s --http: nothing listens on %s: %v", args[0], addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ToolInputSchema returns run_code's input schema as `starter tool-schema` prints it, decoded.
func (e *Env) ToolInputSchema(t *testing.T) any {
	t.Helper()
	out, err := exec.Command(e.Starter, "tool-schema", "--format", "anthropic").Output()
	if err != nil {
		t.Fatalf("agenttest: starter tool-schema: %v", err)
	}
	var tool struct {
		InputSchema any `json:"input_schema"`
	}
	if err := json.Unmarshal(out, &tool); err != nil {
		t.Fatalf("agenttest: starter tool-schema: %v", err)
	}
	return tool.InputSchema
}
