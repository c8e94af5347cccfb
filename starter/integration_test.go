//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"

	"github.com/sandboxflow/sandboxflow/backends/httpservice"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

type cliResult struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// starterIn runs the starter in-process against the server at addr.
func starterIn(t *testing.T, addr, ns string, args ...string) cliResult {
	t.Helper()
	t.Setenv("TEMPORAL_ADDRESS", addr)
	t.Setenv("TEMPORAL_NAMESPACE", ns)
	t.Setenv("SANDBOXFLOW_TASK_QUEUE", "cli")
	t.Setenv("SANDBOXFLOW_KEY_FILE", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	begin := time.Now()
	code := run(ctx, args, strings.NewReader(""), &out, &errb)
	return cliResult{code: code, stdout: out.String(), stderr: errb.String(), took: time.Since(begin)}
}

func (r cliResult) errorType(t *testing.T) string {
	t.Helper()
	var e client.ErrorOutput
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
		t.Fatalf("stdout %q is not one JSON document: %v", r.stdout, err)
	}
	return e.Error.Type
}

// cliWorker serves the starter's default task queue on ts (agenttest) with a backend that
// succeeds at once, bob as the reviewer, and a second workflow type, "Other", that never ends.
func cliWorker(t *testing.T, ts *temporaltest.TestServer) *reviewertest.Reviewer {
	t.Helper()
	bob := reviewertest.New(t, "bob")
	b, err := httpservice.New("fake", func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		return guard.Result{OK: true}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Setup(t, agenttest.Options{Server: ts, Backend: b, Policy: &guard.Policy{ApprovalTimeout: time.Hour}, Reviewer: bob,
		TaskQueue: "cli", NoStarter: true, Register: func(r worker.Registry) {
			r.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
				return workflow.Await(ctx, func() bool { return false })
			}, workflow.RegisterOptions{Name: "Other"})
		}})
	return bob
}

// The findings of issue 17 through the starter's command line, against a real server.
func TestIntegrationStarterEdges(t *testing.T) {
	ts := devtest.Start(t)
	addr, ns := ts.GetFrontendHostPort(), ts.GetDefaultNamespace()

	// 3: no worker polls the task queue: a typed error within seconds, not a hang.
	r := starterIn(t, addr, ns, "run", "--code", "print(1)")
	if r.code != 1 || r.errorType(t) != client.TypeNoWorker || r.took > 15*time.Second {
		t.Fatalf("run with no worker: exit %d after %s, %s; want 1 and NoWorker at once", r.code, r.took, r.stdout)
	}

	bob := cliWorker(t, ts)
	// 1 and 6: the id is printed once started; the code's invisible characters are shown.
	trojan := "access = 'user' # \u202e } \u2066 if admin: \u2069 \u2066\nprint(access)\n"
	helper := filepath.Join(t.TempDir(), "helper.py")
	if err := os.WriteFile(helper, []byte("ROLE = 'guest'\x1b[1A\x1b[2K\r\nROLE = 'admin'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = starterIn(t, addr, ns, "run", "--code", trojan, "--workflow-id", "cli-run", "--input", "helper.py="+helper)
	if r.code != 0 || !strings.Contains(r.stderr, "started workflow cli-run") {
		t.Fatalf("run: exit %d, stdout %s, stderr %s", r.code, r.stdout, r.stderr)
	}
	r = starterIn(t, addr, ns, "run", "--code", "print('other code')", "--workflow-id", "cli-run")
	if r.code != 1 || r.errorType(t) != guard.TypeConfigError || !strings.Contains(r.stdout, "cli-run") {
		t.Errorf("run with an open run's id: exit %d, %s; want 1 and a ConfigError naming it", r.code, r.stdout)
	}
	r = starterIn(t, addr, ns, "show", "cli-run")
	if r.code != 0 || strings.ContainsAny(r.stdout, "\u202e\u2066\u2069") || !strings.Contains(r.stdout, `1 | access = 'user' # \u202e } \u2066`) {
		t.Errorf("show of code with bidi controls: exit %d, stdout %s; want the code numbered with them escaped", r.code, r.stdout)
	}
	if !strings.Contains(r.stdout, "--input-files shows them") || strings.Contains(r.stdout, "ROLE") {
		t.Errorf("show without --input-files: stdout %s; want the input file's name and size only, with the hint", r.stdout)
	}
	// An input file can be a module the code imports: --input-files shows it, escaped like the code.
	r = starterIn(t, addr, ns, "show", "cli-run", "--input-files")
	if r.code != 0 || !strings.Contains(r.stdout, "input file helper.py:\n1 | ROLE = 'guest'\\x1b[1A\\x1b[2K\\r\n2 | ROLE = 'admin'\n") || strings.ContainsAny(r.stdout, "\x1b\r") {
		t.Errorf("show --input-files: exit %d, stdout %s; want helper.py numbered with its escapes visible", r.code, r.stdout)
	}
	r = starterIn(t, addr, ns, "show", "cli-run", "--json")
	if r.code != 0 || strings.ContainsAny(r.stdout, "\u202e\u2066\u2069") || !strings.Contains(r.stdout, `\u202e`) ||
		!strings.Contains(r.stdout, "suspicious_characters") || !strings.Contains(r.stderr, "WARNING") {
		t.Errorf("show of code with bidi controls: exit %d, stdout %s, stderr %s; want them escaped, listed and warned of", r.code, r.stdout, r.stderr)
	}

	// 3: result --timeout ends a wait for a run nobody decided.
	r = starterIn(t, addr, ns, "result", "cli-run", "--timeout", "500ms")
	if r.code != 1 || r.errorType(t) != client.TypeWaitTimeout || r.took > 15*time.Second {
		t.Errorf("result --timeout: exit %d after %s, %s; want 1 and WaitTimeout", r.code, r.took, r.stdout)
	}
	if r := starterIn(t, addr, ns, "deny", "cli-run", "--key", bob.KeyFile, "--reviewer", "bob", "--reason", "no"); r.code != 0 {
		t.Fatalf("deny: exit %d %s", r.code, r.stdout)
	}
	// 1: the id of a closed run is refused too.
	r = starterIn(t, addr, ns, "run", "--code", "print('other code')", "--workflow-id", "cli-run", "--wait")
	if r.code != 1 || r.errorType(t) != guard.TypeConfigError {
		t.Errorf("run with a closed run's id: exit %d, %s; want 1 and a ConfigError", r.code, r.stdout)
	}

	// 3: commands on a workflow of another type are refused with a typed error.
	if _, err := ts.GetDefaultClient().ExecuteWorkflow(context.Background(), tclient.StartWorkflowOptions{ID: "cli-other", TaskQueue: "cli"}, "Other"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"show", "cli-other"},
		{"approve", "cli-other", "--digest", "sha256:00", "--key", bob.KeyFile},
		{"deny", "cli-other", "--key", bob.KeyFile, "--reason", "no"},
		{"result", "cli-other"},
	} {
		r := starterIn(t, addr, ns, args...)
		if r.code != 1 || r.errorType(t) != client.TypeNotRunCode || r.took > 15*time.Second {
			t.Errorf("%v: exit %d after %s, %s; want 1 and NotRunCode", args, r.code, r.took, r.stdout)
		}
	}
}
