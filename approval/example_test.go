package approval_test

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sandboxflow/sandboxflow/approval"
)

// The whole round: a development key, a statement for one run, a signature, and the check that
// the workflow and the sandbox activity make.
func Example() {
	dir, _ := os.MkdirTemp("", "approval-example")
	defer os.RemoveAll(dir)
	keys, err := approval.EnsureDevKeys(dir, "alice")
	if err != nil {
		fmt.Println(err)
		return
	}
	reviewers, err := approval.LoadReviewers(keys.AllowedSigners)
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	fields := approval.Fields{
		WorkflowID:       "runcode-7f3a",
		RunID:            "0b9c2f6e-1d2a-4c5e-9f00-1234567890ab",
		Digest:           "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Approve:          true,
		ApprovalID:       "5f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
		SandboxTaskQueue: "sandbox",
		Expires:          now.Add(time.Hour),
	}
	statement, _ := fields.Statement()

	// The reviewer's side (starter approve): sign the statement.
	signer, _ := approval.LoadSigner(keys.PrivateKey, nil)
	signature, _ := approval.Sign(signer, statement)

	// The verifier's side: the fields come from its own knowledge and the decision.
	v, err := approval.Verify(reviewers, fields, approval.Proof{Signature: signature, Reviewer: "alice"}, now)
	fmt.Println(v.Principal, v.KeyType, err)

	// The same signature for another run is refused, and says why.
	other := fields
	other.RunID = "another-run"
	_, err = approval.Verify(reviewers, other, approval.Proof{Signature: signature}, now)
	fmt.Println(errors.Is(err, approval.ReasonBadSignature))
	// Output:
	// alice ssh-ed25519 <nil>
	// true
}

func ExampleFields_Statement() {
	f := approval.Fields{
		WorkflowID:       "runcode-7f3a",
		RunID:            "0b9c2f6e-1d2a-4c5e-9f00-1234567890ab",
		Digest:           "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Approve:          false,
		ApprovalID:       "5f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
		SandboxTaskQueue: "sandbox",
		Expires:          time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC),
	}
	b, _ := f.Statement()
	fmt.Print(string(b))
	// Output:
	// sandboxflow-approval-statement v1
	// workflow_id: runcode-7f3a
	// run_id: 0b9c2f6e-1d2a-4c5e-9f00-1234567890ab
	// digest: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
	// decision: deny
	// approval_id: 5f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0
	// sandbox_task_queue: sandbox
	// expires: 2026-11-30T11:00:00Z
}

func ExampleVerify_refusal() {
	dir, _ := os.MkdirTemp("", "approval-example")
	defer os.RemoveAll(dir)
	keys, _ := approval.EnsureDevKeys(dir, "alice")
	reviewers, _ := approval.LoadReviewers(keys.AllowedSigners)

	_, err := approval.Verify(reviewers, approval.Fields{}, approval.Proof{}, time.Now())
	var refusal *approval.RefusalError
	if errors.As(err, &refusal) {
		fmt.Println(refusal.Reason)
	}
	// Output: unsigned
}

func ExampleParseAllowedSigners() {
	file := `# sandboxflow reviewers
alice@example.com namespaces="sandboxflow-approval" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice
`
	r, err := approval.ParseAllowedSigners([]byte(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range r.Keys() {
		fmt.Println(k.Principals, k.KeyType, k.Fingerprint)
	}
	// The fingerprint is the one ssh-keygen -l prints.
	// Output: [alice@example.com] ssh-ed25519 SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU
}
