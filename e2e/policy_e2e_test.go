//go:build integration

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// The policy files of TestPolicyRules: the workflow worker's lenient one and the sandbox host's
// stricter one (the same, plus a rule that refuses code that imports subprocess).
const (
	lenientPolicy = `version: 1
groups:
  security: [sec]
rules:
  - name: no-raw-sockets
    when: request.code.contains("import socket")
    refuse: raw sockets are not allowed here; ask for egress instead
  - name: corp-needs-security
    when: request.code.contains("corp.example")
    require: {group: security, approvals: 1}
    warn: the code names the corporate network
limits:
  waiting: {per_agent: 2}
`
	strictRule = `  - name: no-subprocess
    when: request.code.contains("subprocess")
    refuse: this host runs no subprocesses
`
)

// TestPolicyRules drives worker --policy and the starter through a real server: a workflow
// worker with a lenient policy and a sandbox host with a stricter one. A rule refuses a run
// that imports socket at start with its reason; a rule that needs the security group keeps a run waiting after
// bob's approval (show says what is missing) and sec's approval runs it, with the host's policy
// hash in its receipt, which audit verify accepts; the host refuses code its stricter rule
// refuses that the workflow worker let through (nothing runs); an agent past its waiting-runs
// cap is refused with the cap named while another agent starts; the audit record holds the
// check's policy hash; worker doctor names a rule over a field that does not exist.
func TestPolicyRules(t *testing.T) {
	workerBin, starterBin := binaries(t)
	data, hostData := t.TempDir(), t.TempDir()
	bob, sec := reviewertest.New(t, "bob"), reviewertest.New(t, "sec")
	reviewers := reviewertest.WriteAllowedSigners(t, t.TempDir(), bob, sec)
	lenient, strict := filepath.Join(t.TempDir(), "lenient.yaml"), filepath.Join(t.TempDir(), "strict.yaml")
	if err := os.WriteFile(lenient, []byte(lenientPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	strictText := strings.Replace(lenientPolicy, "limits:", strictRule+"limits:", 1)
	if err := os.WriteFile(strict, []byte(strictText), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=policy-wf"}
	common := []string{"--backend", "local", "--allow-unsafe-local", "--sandbox-task-queue", "policy-sbx", "--reviewers", reviewers}
	startDevWorker(t, workerBin, env, append([]string{"--data-dir", data, "--ui-port", "-1", "--role", "workflows", "--policy", lenient}, common...)...)
	host := startWorker(t, workerBin, env, append([]string{"--role", "sandboxes", "--data-dir", hostData, "--policy", strict,
		"--host-key", filepath.Join(data, "host", "id_ed25519")}, common...)...)
	s := starterCLI{t: t, bin: starterBin, env: env}
	approve := func(r *reviewertest.Reviewer, st startedJSON) {
		t.Helper()
		s.mustJSON(&struct{}{}, "approve", st.WorkflowID, "--digest", st.Digest, "--key", r.KeyFile, "--reviewer", r.Principal)
	}

	// A rule refuses at start, with its name and reason, before any reviewer is asked.
	out, code := s.run("run", "--code", "import socket\nprint(1)", "--agent", "policy-test")
	var refused struct {
		Error struct{ Type, Rule, Reason string } `json:"error"`
	}
	if code == 0 || json.Unmarshal([]byte(out), &refused) != nil || refused.Error.Type != "PolicyRefused" ||
		refused.Error.Rule != "no-raw-sockets" || !strings.Contains(refused.Error.Reason, "raw sockets are not allowed") {
		t.Fatalf("a run that imports socket: exit %d, %s; want a PolicyRefused by no-raw-sockets with its reason", code, out)
	}

	// The security group: bob's approval leaves the run waiting for sec's.
	marker := filepath.Join(codeWritableDir(t), "ran")
	corp := "open(" + strconv.Quote(marker) + ", 'a').write('corp ')\nprint('to api.corp.example')\n"
	var run startedJSON
	s.mustJSON(&run, "run", "--code", corp, "--agent", "policy-test")
	waitPending(t, s, run.WorkflowID)
	approve(bob, run)
	var show struct {
		State   string   `json:"state"`
		Missing []string `json:"missing"`
		Rules   struct {
			PolicyHash string   `json:"policy_hash"`
			Warnings   []string `json:"warnings"`
			Groups     []struct {
				Group string `json:"group"`
			} `json:"groups"`
		} `json:"rules"`
	}
	s.mustJSON(&show, "show", run.WorkflowID, "--json")
	if show.State != "awaiting_approval" || len(show.Missing) != 1 || show.Missing[0] != "1 approval from security" ||
		len(show.Rules.Groups) != 1 || len(show.Rules.Warnings) != 1 || !strings.HasPrefix(show.Rules.PolicyHash, "sha256:") {
		t.Fatalf("after bob's approval show printed %+v; want the run waiting for 1 approval from security", show)
	}
	if text, _ := s.run("show", run.WorkflowID); !strings.Contains(text, "waiting for") || !strings.Contains(text, "1 approval from security") ||
		!strings.Contains(text, "the code names the corporate network") {
		t.Fatalf("starter show does not say what the run waits for, or the rule's warning:\n%s", text)
	}
	if b, _ := os.ReadFile(marker); len(b) != 0 {
		t.Fatalf("the code ran before the security group approved: %q", b)
	}
	approve(sec, run)
	resOut, code := s.run("result", run.WorkflowID, "--json")
	var res struct {
		OK      bool `json:"ok"`
		Receipt struct {
			Statement string `json:"statement"`
		} `json:"receipt"`
	}
	if code != 0 || json.Unmarshal([]byte(resOut), &res) != nil || !res.OK {
		t.Fatalf("result after sec's approval: exit %d, %s", code, resOut)
	}
	var stmt struct {
		PolicyHash string `json:"policy_hash"`
	}
	if err := json.Unmarshal([]byte(res.Receipt.Statement), &stmt); err != nil || stmt.PolicyHash == "" || stmt.PolicyHash == show.Rules.PolicyHash {
		t.Fatalf("receipt %q: policy hash %q (%v); want the host's own (not the workflow worker's %s)", res.Receipt.Statement, stmt.PolicyHash, err, show.Rules.PolicyHash)
	}
	if !strings.Contains(host.output(), stmt.PolicyHash) {
		t.Fatalf("the receipt's policy hash %s is not the one the host loaded:\n%s", stmt.PolicyHash, host.output())
	}
	record := filepath.Join(t.TempDir(), "record.json")
	auditOut, code := s.run("audit", run.WorkflowID)
	var audited struct {
		Rules struct {
			PolicyHash string `json:"policy_hash"`
		} `json:"rules"`
	}
	if code != 0 || os.WriteFile(record, []byte(auditOut), 0o600) != nil || json.Unmarshal([]byte(auditOut), &audited) != nil ||
		audited.Rules.PolicyHash != show.Rules.PolicyHash {
		t.Fatalf("audit: exit %d, rules %+v; want the check's policy hash %s", code, audited.Rules, show.Rules.PolicyHash)
	}
	if vOut, code := s.run("audit", "verify", record, "--reviewers", reviewers, "--hosts", filepath.Join(data, "host", "hosts")); code != 0 {
		t.Fatalf("audit verify of the record with the policy hash: exit %d, %s", code, vOut)
	}

	// The stricter host refuses what the lenient workflow worker let through: nothing runs.
	var sub startedJSON
	s.mustJSON(&sub, "run", "--code", "import subprocess\nopen("+strconv.Quote(marker)+", 'a').write('subprocess ')\n", "--agent", "policy-test")
	waitPending(t, s, sub.WorkflowID)
	approve(bob, sub)
	out, code = s.run("result", sub.WorkflowID, "--json")
	var hostRefused struct {
		Error struct{ Type, Reason, Message string } `json:"error"`
	}
	if code == 0 || json.Unmarshal([]byte(out), &hostRefused) != nil || hostRefused.Error.Type != "ApprovalRefused" ||
		hostRefused.Error.Reason != "policy" || !strings.Contains(hostRefused.Error.Message+out, "no-subprocess") {
		t.Fatalf("a run the host's rule refuses: exit %d, %s; want an ApprovalRefused (policy) naming no-subprocess", code, out)
	}
	if b, _ := os.ReadFile(marker); string(b) != "corp " {
		t.Fatalf("the marker holds %q; want only the corp run's write", b)
	}

	// Caps per agent: two runs of agent loop wait; the third is refused naming the cap, while
	// another agent starts.
	var loop [2]startedJSON
	for i := range loop {
		s.mustJSON(&loop[i], "run", "--code", "print("+strconv.Itoa(i)+")", "--agent", "loop")
		waitPending(t, s, loop[i].WorkflowID)
	}
	// Visibility lists the two waiting runs once pending shows them: the count sees both.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code = s.run("run", "--code", "print(2)", "--agent", "loop")
		var capped struct {
			Error struct{ Type, Cap, Reason string } `json:"error"`
		}
		if code != 0 && json.Unmarshal([]byte(out), &capped) == nil && capped.Error.Type == "PolicyRefused" && capped.Error.Cap == "waiting.per_agent" &&
			strings.Contains(capped.Error.Reason, "agent loop") {
			break
		}
		if code == 0 {
			// Started within visibility's delay: the documented race. Try again once it catches up.
			var st startedJSON
			_ = json.Unmarshal([]byte(out), &st)
			s.run("cancel", st.WorkflowID, "--reason", "past the cap in visibility's delay")
		}
		if time.Now().After(deadline) {
			t.Fatalf("a third waiting run of agent loop: exit %d, %s; want a PolicyRefused naming waiting.per_agent", code, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var other startedJSON
	s.mustJSON(&other, "run", "--code", "print('other')", "--agent", "other")
	if other.WorkflowID == "" {
		t.Fatal("another agent's run did not start")
	}

	// worker doctor validates the file: a rule over a field that does not exist is named.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nrules:\n  - {name: typo, when: 'request.langauge == \"sh\"', warn: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, want string
	}{{bad, "FAIL policy rules"}, {strict, "PASS policy rules"}} {
		cmd := exec.Command(workerBin, "doctor", "--role", "workflows", "--backend", "local", "--allow-unsafe-local", "--reviewers", reviewers, "--policy", tc.file)
		cmd.Env = append(os.Environ(), env...)
		doc, _ := cmd.CombinedOutput()
		if !strings.Contains(string(doc), tc.want) || (tc.file == bad && !strings.Contains(string(doc), "typo")) {
			t.Errorf("worker doctor --policy %s printed:\n%s\nwant %q", filepath.Base(tc.file), doc, tc.want)
		}
	}
}
