package workflows_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/backends/local"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// reviewersFile writes an allowed_signers file listing one key for alice (fixed here so that the
// examples print the same every time; a real one is the reviewer's own) and returns its path and
// the key.
func reviewersFile() (string, ssh.Signer) {
	signer, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed([]byte(strings.Repeat("k", ed25519.SeedSize))))
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sandboxflow-example-")
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "allowed_signers")
	line := "alice " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		log.Fatal(err)
	}
	return path, signer
}

// quietSuite is the SDK's test suite with its log (which it would print on stdout) discarded.
func quietSuite() *testsuite.WorkflowTestSuite {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	return &suite
}

// A worker that runs both the workflow and the sandboxes on one task queue. In production the
// registry is a worker (worker.New(c, "sandboxflow", worker.Options{MaxConcurrentActivityExecutionSize: 4}),
// then w.Run(worker.InterruptCh())); here it is the SDK's test environment, so the example runs:
// nobody decides, and at the approval timeout the run ends with nothing run.
func ExampleRegister() {
	reviewers, _ := reviewersFile()
	defer os.RemoveAll(filepath.Dir(reviewers))
	backend, err := local.New(local.Config{AllowUnsafeLocal: true})
	if err != nil {
		log.Fatal(err)
	}
	acts, err := activities.New(activities.Config{Policy: guard.Policy{ApprovalTimeout: time.Hour}, Backend: backend, ReviewersFile: reviewers})
	if err != nil {
		log.Fatal(err)
	}
	w := quietSuite().NewTestWorkflowEnvironment()
	workflows.Register(w)
	acts.Register(w)

	w.ExecuteWorkflow(contract.WorkflowName, contract.Input{Request: guard.Request{Code: "print(6 * 7)"}})
	var denied *guard.ApprovalDenied
	if errors.As(contract.FromFailure(w.GetWorkflowError()), &denied) {
		fmt.Println("not run:", denied.Reason)
	}
	// Output: not run: expired
}

// Workflow workers and sandbox hosts on separate task queues. Workflow workers get the policy and
// the name of the sandbox hosts' backend; sandbox hosts get the same policy, the backend itself
// and their own reviewers file (they verify every approval again before anything runs), and
// register on their own worker (worker.New(c, "sandboxflow-sandbox",
// worker.Options{DisableWorkflowWorker: true})). Here the workflow side runs in the SDK's test
// environment: the run shown to a reviewer names the sandbox task queue its approval is for.
func ExampleRegister_twoQueues() {
	reviewers, _ := reviewersFile()
	defer os.RemoveAll(filepath.Dir(reviewers))
	policy := guard.Policy{ApprovalTimeout: time.Hour}

	// On workflow workers.
	checks, err := activities.New(activities.Config{Policy: policy, BackendName: local.Name, SandboxTaskQueue: "sandboxflow-sandbox",
		ReviewersFile: reviewers})
	if err != nil {
		log.Fatal(err)
	}
	// On sandbox hosts.
	backend, err := local.New(local.Config{AllowUnsafeLocal: true})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := activities.New(activities.Config{Policy: policy, Backend: backend, ReviewersFile: reviewers}); err != nil {
		log.Fatal(err)
	}

	ww := quietSuite().NewTestWorkflowEnvironment()
	workflows.Register(ww)
	checks.Register(ww)
	ww.RegisterDelayedCallback(func() {
		v, err := ww.QueryWorkflow(contract.QueryStatus)
		if err != nil {
			log.Fatal(err)
		}
		var st contract.Status
		if err := v.Get(&st); err != nil {
			log.Fatal(err)
		}
		fmt.Println(st.State, st.Request.Backend, st.SandboxTaskQueue)
	}, time.Minute)
	ww.ExecuteWorkflow(contract.WorkflowName, contract.Input{Request: guard.Request{Code: "print(6 * 7)"}})
	// Output: awaiting_approval local sandboxflow-sandbox
}

// An orchestrator starts a run; a reviewer reads it, signs a decision on exactly this run, digest
// and sandbox task queue with a key listed in the workers' reviewers file, and sends it with the
// update (or, with any Temporal client, the "approval" signal and the same JSON object). Against
// a server that is c.ExecuteWorkflow, c.QueryWorkflow and c.UpdateWorkflow; here the SDK's test
// environment stands in for it, and the reviewer denies the run, so nothing runs.
func ExampleDecision() {
	reviewers, key := reviewersFile()
	defer os.RemoveAll(filepath.Dir(reviewers))
	acts, err := activities.New(activities.Config{Policy: guard.Policy{ApprovalTimeout: time.Hour}, BackendName: local.Name, ReviewersFile: reviewers})
	if err != nil {
		log.Fatal(err)
	}
	env := quietSuite().NewTestWorkflowEnvironment()
	workflows.Register(env)
	acts.Register(env)

	env.RegisterDelayedCallback(func() {
		// The reviewer reads the request and its digest.
		v, err := env.QueryWorkflow(contract.QueryStatus)
		if err != nil {
			log.Fatal(err)
		}
		var st contract.Status
		if err := v.Get(&st); err != nil {
			log.Fatal(err)
		}
		fmt.Println(st.State, st.Request.Code)

		// ... and signs a decision on exactly this run.
		// The statement version the status names (2 signs the reviewer's principal).
		d := contract.Decision{ApprovalID: "8a6e0804-2bd0-4672-b79d-d97027f9071a", Digest: st.Request.Digest, Approve: false,
			Reviewer: "alice", Expires: env.Now().Add(time.Hour).UTC().Truncate(time.Second), Reason: "not today"}
		f := d.Fields(st.WorkflowID, st.RunID, st.Request.Digest, st.SandboxTaskQueue)
		f.Version = st.StatementVersion
		stmt, err := f.Statement()
		if err != nil {
			log.Fatal(err)
		}
		if d.Signature, err = approval.Sign(key, stmt); err != nil {
			log.Fatal(err)
		}
		env.UpdateWorkflow(contract.UpdateDecide, "decide-1", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { fmt.Println("refused:", err) },
			OnComplete: func(v any, err error) {
				if r, ok := v.(contract.DecideResult); ok {
					fmt.Println("decided: approve", r.Approve, "by", r.Reviewer)
				}
			},
		}, d)
	}, time.Minute)
	env.ExecuteWorkflow(contract.WorkflowName, contract.Input{Request: guard.Request{Code: "print(6 * 7)"}})

	var res guard.Result
	err = env.GetWorkflowError()
	if err == nil {
		err = env.GetWorkflowResult(&res)
	}
	var denied *guard.ApprovalDenied
	// The typed errors: ToolUsageError, ConfigError, IntegrationError, ApprovalDenied or
	// ApprovalRefused.
	if errors.As(contract.FromFailure(err), &denied) {
		fmt.Println("not run:", denied.Reason)
		return
	}
	fmt.Printf("exit %d: %s", res.ExitCode, res.Stdout)
	// Output:
	// awaiting_approval print(6 * 7)
	// decided: approve false by alice
	// not run: denied
}
