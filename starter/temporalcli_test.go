//go:build integration

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxflow/sandboxflow/internal/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/reviewertest"
)

// temporalCLI returns the official temporal CLI: SANDBOXFLOW_TEMPORAL_CLI (make test installs it
// with go install), else the one on PATH.
func temporalCLI(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SANDBOXFLOW_TEMPORAL_CLI"); p != "" {
		return p
	}
	p, err := exec.LookPath("temporal")
	if err != nil {
		if os.Getenv("SANDBOXFLOW_REQUIRE_DOCKER") != "" {
			t.Fatal("the official temporal CLI is required: make test installs it (SANDBOXFLOW_TEMPORAL_CLI)")
		}
		t.Skip("the official temporal CLI is not on PATH (make test installs it)")
	}
	return p
}

// decisionJQ is the README's jq program ("Signing with OpenSSH and the temporal CLI only"): the
// decision from a statement and its signature.
const decisionJQ = `{approval_id: ($st | capture("approval_id: (?<v>[^\n]*)").v), digest: ($st | capture("digest: (?<v>[^\n]*)").v),
    approve: true, reason: "", statement: $st, signature: $sig}`

// TestIntegrationTemporalCLIAndOpenSSH does what the README says a reviewer and an orchestrator
// can do with nothing but the official temporal CLI, ssh-keygen and jq: start a run from JSON, read
// its status, sign the statement, decide with the update, read the result. On the way, decisions
// an attacker could send with the same tools are refused with their reason and run nothing: a key
// that is not in the reviewers file, a statement whose digest was edited after it was signed, and
// a signature of another run's statement.
func TestIntegrationTemporalCLIAndOpenSSH(t *testing.T) {
	tcli := temporalCLI(t)
	for _, tool := range []string{"ssh-keygen", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (make setup installs openssh-client and jq): %v", tool, err)
		}
	}
	e := agenttest.Setup(t)
	dir := t.TempDir()
	conn := []string{"--address", e.Address, "--namespace", e.Namespace}
	temporal := func(args ...string) (string, error) {
		out, err := exec.Command(tcli, append(args, conn...)...).CombinedOutput()
		return string(out), err
	}
	starter := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(e.Starter, args...)
		cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+e.Address, "TEMPORAL_NAMESPACE="+e.Namespace, "SANDBOXFLOW_TASK_QUEUE="+e.TaskQueue)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("starter %v: %v", args, err)
		}
		return string(out)
	}
	// sign writes a statement and its signature by key, and returns the README's decision JSON.
	sign := func(name, statement, key string) string {
		t.Helper()
		st := filepath.Join(dir, name)
		if err := os.WriteFile(st, []byte(statement), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-n", "sandboxflow-approval", "-f", key, st).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
		}
		out, err := exec.Command("jq", "-n", "-c", "--rawfile", "st", st, "--rawfile", "sig", st+".sig", decisionJQ).Output()
		if err != nil {
			t.Fatalf("jq: %v", err)
		}
		return string(out)
	}
	start := func() string {
		t.Helper()
		id := "sandbox-" + uuid.NewString()
		if out, err := temporal("workflow", "start", "--type", "RunCode", "--task-queue", e.TaskQueue, "--workflow-id", id,
			"--input", `{"request": {"code": "print(6*7)", "language": "python", "metadata": {"agent": "temporal-cli"}}}`); err != nil {
			t.Fatalf("temporal workflow start: %v\n%s", err, out)
		}
		return id
	}
	status := func(id string) (st struct {
		State             string `json:"state"`
		RejectedDecisions int    `json:"rejected_decisions"`
		LastRejection     string `json:"last_rejection"`
		Request           struct {
			Digest string `json:"digest"`
		} `json:"request"`
	}) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			out, err := temporal("workflow", "query", "--name", "status", "--workflow-id", id, "--output", "json")
			if err == nil {
				var q struct {
					QueryResult []json.RawMessage `json:"queryResult"`
				}
				if err := json.Unmarshal([]byte(out), &q); err != nil || len(q.QueryResult) != 1 {
					t.Fatalf("temporal workflow query: %v\n%s", err, out)
				}
				if err := json.Unmarshal(q.QueryResult[0], &st); err != nil {
					t.Fatal(err)
				}
				if st.State != "checking" {
					return st
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run never left checking: %v\n%s", err, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	id := start()
	if st := status(id); st.State != "awaiting_approval" || !strings.HasPrefix(st.Request.Digest, "sha256:") {
		t.Fatalf("status %+v; want awaiting_approval with a digest", st)
	}
	statement := starter("statement", id)
	other := start()
	otherStatement := starter("statement", other)

	stranger := reviewertest.New(t, e.Reviewer.Principal)
	forgedDigest := strings.Replace(statement, "digest: sha256:", "digest: sha256:0", 1)
	for _, attack := range []struct {
		name, decision, reason string
	}{
		{"a key that is not in the reviewers file", sign("stranger", statement, stranger.KeyFile), "unknown_key"},
		{"another run's statement", sign("other", otherStatement, e.Reviewer.KeyFile), "statement_mismatch"},
	} {
		out, err := temporal("workflow", "update", "execute", "--name", "decide", "--workflow-id", id, "--input", attack.decision)
		if err == nil || !strings.Contains(out, attack.reason) {
			t.Errorf("%s: temporal workflow update execute: %v\n%s\nwant it refused with %q", attack.name, err, out, attack.reason)
		}
	}
	// A statement edited after it was signed, sent as the signal: recorded as rejected.
	var edited map[string]any
	if err := json.Unmarshal([]byte(sign("edited", statement, e.Reviewer.KeyFile)), &edited); err != nil {
		t.Fatal(err)
	}
	edited["statement"] = forgedDigest
	edited["digest"] = strings.Replace(edited["digest"].(string), "sha256:", "sha256:0", 1)
	editedJSON, err := json.Marshal(edited)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := temporal("workflow", "signal", "--name", "approval", "--workflow-id", id, "--input", string(editedJSON)); err != nil {
		t.Fatalf("temporal workflow signal: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(20 * time.Second); status(id).RejectedDecisions < 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the edited statement's signal was not recorded as rejected")
		}
	}
	if st := status(id); st.State != "awaiting_approval" || st.RejectedDecisions != 1 || !strings.Contains(st.LastRejection, "digest") {
		t.Fatalf("after the attacks: %+v; want still awaiting_approval, with the edited statement rejected for its digest", st)
	}

	out, err := temporal("workflow", "update", "execute", "--name", "decide", "--workflow-id", id, "--input", sign("st", statement, e.Reviewer.KeyFile))
	if err != nil {
		t.Fatalf("the reviewer's decision: temporal workflow update execute: %v\n%s", err, out)
	}
	out, err = temporal("workflow", "result", "--workflow-id", id, "--output", "json")
	if err != nil {
		t.Fatalf("temporal workflow result: %v\n%s", err, out)
	}
	var res struct {
		Status string `json:"status"`
		Result struct {
			OK       bool   `json:"ok"`
			Stdout   string `json:"stdout"`
			Reviewer string `json:"reviewer"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("temporal workflow result: %v\n%s", err, out)
	}
	if !res.Result.OK || res.Result.Stdout != "42\n" || res.Result.Reviewer != e.Reviewer.Principal {
		t.Errorf("result %s; want ok, stdout 42 and the reviewer %s", out, e.Reviewer.Principal)
	}
}
