//go:build integration

package client_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// exampleWorker starts what a deployment provides: a Temporal server (here in-process, as
// `worker --dev` embeds one) with RunCode's search attributes, and a worker on queue whose
// reviewers file lists key for alice (the local backend: DEVELOPMENT ONLY). stop ends both.
func exampleWorker(ctx context.Context, queue string, key ssh.Signer) (srv *temporaltest.TestServer, stop func()) {
	srv = temporaltest.NewServer()
	tc := srv.GetDefaultClient()
	if err := contract.RegisterSearchAttributes(ctx, tc.OperatorService(), srv.GetDefaultNamespace()); err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sandboxflow-example-")
	if err != nil {
		log.Fatal(err)
	}
	reviewers := filepath.Join(dir, "allowed_signers")
	line := "alice " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey()))) + "\n"
	if err := os.WriteFile(reviewers, []byte(line), 0o600); err != nil {
		log.Fatal(err)
	}
	backend, err := local.New(local.Config{AllowUnsafeLocal: true})
	if err != nil {
		log.Fatal(err)
	}
	acts, err := activities.New(activities.Config{Policy: guard.Policy{ApprovalTimeout: time.Hour}, Backend: backend, ReviewersFile: reviewers})
	if err != nil {
		log.Fatal(err)
	}
	w := worker.New(tc, queue, worker.Options{})
	workflows.Register(w)
	acts.Register(w)
	if err := w.Start(); err != nil {
		log.Fatal(err)
	}
	return srv, func() { w.Stop(); srv.Stop(); os.RemoveAll(dir) }
}

// An orchestrator starts a run, a reviewer approves the digest they read, and the orchestrator
// waits for the result. Against a deployment, the Temporal client comes from
// client.Dial(ctx, client.ConnectionFromEnv()) and the reviewer's key from
// client.LoadReviewerKey("/home/alice/.ssh/id_ed25519"); here the example starts its own server
// and worker (exampleWorker), so it runs under the integration tests.
func Example() {
	ctx := context.Background()
	key, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed([]byte(strings.Repeat("k", ed25519.SeedSize))))
	if err != nil {
		log.Fatal(err)
	}
	srv, stop := exampleWorker(ctx, "sandboxflow", key)
	defer stop()

	c, err := client.New(client.Options{Temporal: srv.GetDefaultClient(), TaskQueue: "sandboxflow", Reviewer: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	started, err := c.Start(ctx, guard.Request{Code: "print(6 * 7)"}, client.StartOptions{})
	if err != nil {
		log.Fatal(err) // a *guard.ToolUsageError or *guard.ConfigError says what to fix
	}
	fmt.Println("waiting for a person to approve", strings.HasPrefix(started.Digest, "sha256:"))

	// Elsewhere, a reviewer who has read the code (c.Status) signs an approval of that exact
	// digest for this run with a key listed in the workers' reviewers file.
	if _, err := c.Approve(ctx, client.Run(started.WorkflowID), started.Digest, key, ""); err != nil {
		log.Fatal(err)
	}

	res, err := c.Result(ctx, started.WorkflowID)
	var denied *guard.ApprovalDenied
	switch {
	case errors.As(err, &denied):
		fmt.Println("not run:", denied.Reason)
	case err != nil:
		log.Fatal(err)
	case res.TimedOut:
		fmt.Println("timed out; try faster code")
	default:
		fmt.Printf("exit %d by %s: %s", res.ExitCode, res.Reviewer, res.Stdout)
	}
	// Output:
	// waiting for a person to approve true
	// exit 0 by alice: 42
}
