//go:build integration

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sandboxflow/sandboxflow/codec"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// decisionJQ is the jq program of docs/reviewing.md ("Signing with OpenSSH and the temporal CLI
// only"): the decision from a statement and its signature.
const decisionJQ = `{approval_id: ($st | capture("approval_id: (?<v>[^\n]*)").v), digest: ($st | capture("digest: (?<v>[^\n]*)").v),
    approve: true, reason: "", statement: $st, signature: $sig}`

// cliTest drives a run with the official temporal CLI, ssh-keygen and jq, and the starter only
// where docs/reviewing.md uses it (the statement).
type cliTest struct {
	t   *testing.T
	e   *agenttest.Env
	cli string
	// flags are added to every temporal command: the server, and the codec server if any.
	flags []string
	// env is added to the starter's environment.
	env []string
	dir string
}

// newCLITest returns a harness for e; it skips (or fails under make test) without the CLI.
func newCLITest(t *testing.T, e *agenttest.Env, env ...string) *cliTest {
	t.Helper()
	need.Need(t, need.TemporalCLI, need.SSHKeygen)
	cli := need.TemporalCLIPath()
	for _, tool := range []string{"ssh-keygen", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (make setup installs openssh-client and jq): %v", tool, err)
		}
	}
	return &cliTest{t: t, e: e, cli: cli, flags: []string{"--address", e.Address, "--namespace", e.Namespace},
		env: append([]string{"TEMPORAL_ADDRESS=" + e.Address, "TEMPORAL_NAMESPACE=" + e.Namespace, "SANDBOXFLOW_TASK_QUEUE=" + e.TaskQueue}, env...),
		dir: t.TempDir()}
}

// temporal runs the CLI with the harness's flags and returns its combined output. Each command
// gets two minutes: `workflow result` waits for the run, which may never end when the test fails.
func (c *cliTest) temporal(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.cli, append(args, c.flags...)...).CombinedOutput()
	return string(out), err
}

// must runs the CLI and fails the test when it fails.
func (c *cliTest) must(args ...string) string {
	c.t.Helper()
	out, err := c.temporal(args...)
	if err != nil {
		c.t.Fatalf("temporal %s: %v\n%s", strings.Join(args[:2], " "), err, out)
	}
	return out
}

func (c *cliTest) starter(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(c.e.Starter, args...)
	cmd.Env = append(os.Environ(), c.env...)
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("starter %v: %v", args, err)
	}
	return string(out)
}

// sign writes a statement and its signature by key (ssh-keygen -Y sign), and returns the recipe's
// decision JSON (jq).
func (c *cliTest) sign(name, statement, key string) string {
	c.t.Helper()
	st := filepath.Join(c.dir, name)
	if err := os.WriteFile(st, []byte(statement), 0o600); err != nil {
		c.t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-n", "sandboxflow-approval", "-f", key, st).CombinedOutput(); err != nil {
		c.t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	out, err := exec.Command("jq", "-n", "-c", "--rawfile", "st", st, "--rawfile", "sig", st+".sig", decisionJQ).Output()
	if err != nil {
		c.t.Fatalf("jq: %v", err)
	}
	return string(out)
}

// statement is the recipe's `starter statement ID --reviewer P`: the bytes the reviewer signs,
// naming the principal they sign as.
func (c *cliTest) statement(id string) string {
	c.t.Helper()
	return c.starter("statement", id, "--reviewer", c.e.Reviewer.Principal)
}

// start starts a RunCode run of code from JSON and returns its workflow id.
func (c *cliTest) start(code string) string {
	c.t.Helper()
	id := "sandbox-" + uuid.NewString()
	in, err := json.Marshal(map[string]any{"request": map[string]any{"code": code, "language": "python", "metadata": map[string]string{"agent": "temporal-cli"}}})
	if err != nil {
		c.t.Fatal(err)
	}
	c.must("workflow", "start", "--type", "RunCode", "--task-queue", c.e.TaskQueue, "--workflow-id", id, "--input", string(in))
	return id
}

// cliStatus is the status query's answer, in part.
type cliStatus struct {
	State             string `json:"state"`
	RejectedDecisions int    `json:"rejected_decisions"`
	LastRejection     string `json:"last_rejection"`
	Request           struct {
		Code   string `json:"code"`
		Digest string `json:"digest"`
	} `json:"request"`
}

// status queries the run's status once it has been checked.
func (c *cliTest) status(id string) cliStatus {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := c.temporal("workflow", "query", "--name", "status", "--workflow-id", id, "--output", "json")
		if err == nil {
			var q struct {
				QueryResult []json.RawMessage `json:"queryResult"`
			}
			var st cliStatus
			if err := json.Unmarshal([]byte(out), &q); err != nil || len(q.QueryResult) != 1 {
				c.t.Fatalf("temporal workflow query: %v\n%s", err, out)
			}
			if err := json.Unmarshal(q.QueryResult[0], &st); err != nil {
				c.t.Fatal(err)
			}
			if st.State != "checking" {
				return st
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the run never left checking: %v\n%s", err, out)
		}
	}
}

// listed waits until `temporal workflow list --query` finds the run id under query.
func (c *cliTest) listed(id, query string) {
	c.t.Helper()
	q := query + ` AND WorkflowId = "` + id + `"`
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err := c.temporal("workflow", "list", "--query", q, "--output", "json")
		if err == nil && strings.Contains(out, id) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("temporal workflow list --query %q never listed the run: %v\n%s", q, err, out)
		}
	}
}

// cliRunResult is `temporal workflow result --output json`, in part.
type cliRunResult struct {
	Result struct {
		OK       bool   `json:"ok"`
		Stdout   string `json:"stdout"`
		Reviewer string `json:"reviewer"`
	} `json:"result"`
}

// approveAndWait signs the run's statement with the reviewer's key, decides with the update and
// returns the result.
func (c *cliTest) approveAndWait(id string) cliRunResult {
	c.t.Helper()
	c.must("workflow", "update", "execute", "--name", "decide", "--workflow-id", id, "--input", c.sign("st-"+id, c.statement(id), c.e.Reviewer.KeyFile))
	out := c.must("workflow", "result", "--workflow-id", id, "--output", "json")
	var res cliRunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		c.t.Fatalf("temporal workflow result: %v\n%s", err, out)
	}
	return res
}

// TestIntegrationTemporalCLIAndOpenSSH does what docs/reviewing.md says a reviewer and an orchestrator
// can do with nothing but the official temporal CLI, ssh-keygen and jq: start a run from JSON, read
// its status, sign the statement, decide with the update, read the result. On the way, decisions
// an attacker could send with the same tools are refused with their reason and run nothing: a key
// that is not in the reviewers file, a statement whose digest was edited after it was signed, and
// a signature of another run's statement.
func TestIntegrationTemporalCLIAndOpenSSH(t *testing.T) {
	e := agenttest.Setup(t)
	c := newCLITest(t, e)
	id := c.start("print(6*7)")
	if st := c.status(id); st.State != "awaiting_approval" || !strings.HasPrefix(st.Request.Digest, "sha256:") {
		t.Fatalf("status %+v; want awaiting_approval with a digest", st)
	}
	c.listed(id, `SandboxStatus = "awaiting_approval"`)
	statement := c.statement(id)
	if !strings.Contains(statement, "\nreviewer: "+e.Reviewer.Principal+"\n") {
		t.Fatalf("statement %q; want it to name the reviewer %s", statement, e.Reviewer.Principal)
	}
	// The same code in another run: the same digest, another run id.
	otherStatement := c.statement(c.start("print(6*7)"))
	// The genuine decision, as relayed by someone who names another principal in it, or edits
	// the principal in the statement too.
	relay := func(edit func(map[string]any)) string {
		var d map[string]any
		if err := json.Unmarshal([]byte(c.sign("relayed", statement, e.Reviewer.KeyFile)), &d); err != nil {
			t.Fatal(err)
		}
		edit(d)
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	renamed := relay(func(d map[string]any) { d["reviewer"] = "mallory" })
	restated := relay(func(d map[string]any) {
		d["reviewer"] = "mallory"
		d["statement"] = strings.Replace(d["statement"].(string), "reviewer: "+e.Reviewer.Principal+"\n", "reviewer: mallory\n", 1)
	})

	stranger := reviewertest.New(t, e.Reviewer.Principal)
	for _, attack := range []struct {
		name, decision, reason string
	}{
		{"a key that is not in the reviewers file", c.sign("stranger", statement, stranger.KeyFile), "unknown_key"},
		{"another run's statement", c.sign("other", otherStatement, e.Reviewer.KeyFile), "statement_mismatch"},
		{"the decision relayed with another reviewer", renamed, "statement_mismatch"},
		{"the decision relayed with the statement's reviewer edited", restated, "bad_signature"},
	} {
		out, err := c.temporal("workflow", "update", "execute", "--name", "decide", "--workflow-id", id, "--input", attack.decision)
		if err == nil || !strings.Contains(out, attack.reason) {
			t.Errorf("%s: temporal workflow update execute: %v\n%s\nwant it refused with %q", attack.name, err, out, attack.reason)
		}
	}
	// A statement edited after it was signed, sent as the signal: recorded as rejected.
	var edited map[string]any
	if err := json.Unmarshal([]byte(c.sign("edited", statement, e.Reviewer.KeyFile)), &edited); err != nil {
		t.Fatal(err)
	}
	edited["statement"] = strings.Replace(statement, "digest: sha256:", "digest: sha256:0", 1)
	edited["digest"] = strings.Replace(edited["digest"].(string), "sha256:", "sha256:0", 1)
	editedJSON, err := json.Marshal(edited)
	if err != nil {
		t.Fatal(err)
	}
	c.must("workflow", "signal", "--name", "approval", "--workflow-id", id, "--input", string(editedJSON))
	for deadline := time.Now().Add(20 * time.Second); c.status(id).RejectedDecisions < 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the edited statement's signal was not recorded as rejected")
		}
	}
	if st := c.status(id); st.State != "awaiting_approval" || st.RejectedDecisions != 1 || !strings.Contains(st.LastRejection, "digest") {
		t.Fatalf("after the attacks: %+v; want still awaiting_approval, with the edited statement rejected for its digest", st)
	}

	if res := c.approveAndWait(id); !res.Result.OK || res.Result.Stdout != "42\n" || res.Result.Reviewer != e.Reviewer.Principal {
		t.Errorf("result %+v; want ok, stdout 42 and the reviewer %s", res, e.Reviewer.Principal)
	}
	c.listed(id, `SandboxStatus = "succeeded" AND SandboxReviewer = "`+e.Reviewer.Principal+`"`)
}

// TestIntegrationTemporalCLIThroughTheCodecServer runs docs/operating.md's encrypted set-up with the
// official CLI: payloads encrypted with a key file, the CLI given --codec-endpoint and
// --codec-auth for the codec server. The CLI's input is encrypted through the server, its query,
// update and result decrypted through it, and the run's history read without the codec, or with
// a wrong token, shows nothing of the code or its output.
func TestIntegrationTemporalCLIThroughTheCodecServer(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "keys")
	line, err := codec.GenerateKeyLine("k1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ring, err := codec.LoadKeyRing(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	token, err := codec.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	server, err := codec.NewServer(ring, codec.ServerOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(server)
	t.Cleanup(hs.Close)

	e := agenttest.Setup(t, agenttest.Options{KeyFile: keyFile})
	c := newCLITest(t, e, "SANDBOXFLOW_KEY_FILE="+keyFile)
	plain := append([]string(nil), c.flags...)
	c.flags = append(c.flags, "--codec-endpoint", hs.URL, "--codec-auth", "Bearer "+token)

	const secret = "CLI-CODEC-SECRET-5ec7"
	id := c.start("print('" + secret + "')")
	if st := c.status(id); st.State != "awaiting_approval" || !strings.Contains(st.Request.Code, secret) {
		t.Fatalf("status through the codec server: %+v; want awaiting_approval with the code", st)
	}
	if res := c.approveAndWait(id); !res.Result.OK || res.Result.Stdout != secret+"\n" {
		t.Errorf("result through the codec server %+v; want ok with the output", res)
	}
	if out := c.must("workflow", "show", "--workflow-id", id, "--output", "json"); !shows(out, secret) {
		t.Errorf("the history shown through the codec server lacks the code and output")
	}

	wrong := append(append([]string(nil), plain...), "--codec-endpoint", hs.URL, "--codec-auth", "Bearer "+strings.Repeat("x", len(token)))
	for name, flags := range map[string][]string{"without the codec": plain, "with a wrong token": wrong} {
		c.flags = flags
		out, _ := c.temporal("workflow", "show", "--workflow-id", id, "--output", "json")
		if shows(out, secret) {
			t.Errorf("the history shown %s holds the code or output in the clear", name)
		}
		if name == "without the codec" && !strings.Contains(out, "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED") {
			t.Errorf("the history shown %s is not the run's history:\n%.2000s", name, out)
		}
	}
}

var payloadData = regexp.MustCompile(`"data":\s*"([A-Za-z0-9+/=]+)"`)

// shows reports whether the CLI's JSON output holds s, as text or in a payload's data (base64).
func shows(out, s string) bool {
	if strings.Contains(out, s) {
		return true
	}
	for _, m := range payloadData.FindAllStringSubmatch(out, -1) {
		if b, err := base64.StdEncoding.DecodeString(m[1]); err == nil && strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}
