//go:build integration

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/hosttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// auditDoc is the document that holds the ssh-keygen + jq recipe.
const auditDoc = "docs/receipts-and-audit.md"

// auditRecipe returns auditDoc's ssh-keygen + jq recipe, the lines of the sh block after the
// audit-recipe marker.
func auditRecipe(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../" + auditDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- audit-recipe")
	if !ok {
		t.Fatal(auditDoc + " has no audit-recipe marker")
	}
	_, rest, _ = strings.Cut(rest, "```sh\n")
	recipe, _, ok := strings.Cut(rest, "```")
	if !ok || !strings.Contains(recipe, "ssh-keygen -Y verify") {
		t.Fatalf("%s's audit recipe is not an sh block with ssh-keygen: %q", auditDoc, recipe)
	}
	return recipe
}

// verdict is starter audit verify's output.
type verdict struct {
	OK     bool `json:"ok"`
	Checks []struct {
		Name  string `json:"name"`
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	} `json:"checks"`
}

func (v verdict) failed() map[string]string {
	out := map[string]string{}
	for _, c := range v.Checks {
		if !c.OK {
			out[c.Name] = c.Error
		}
	}
	return out
}

// Must show (issue 31): a run's export verifies with starter audit verify and with the
// ssh-keygen + jq recipe of docs/receipts-and-audit.md; changing a byte of the code, the
// output, a file, an egress entry or a signature makes both fail, and starter audit verify
// names what; a receipt signed by a key the hosts file lacks fails; a reviewer's SSH signature
// presented as a receipt fails.
func TestIntegrationAuditExportVerifies(t *testing.T) {
	need.Need(t, need.SSHKeygen)
	if _, err := exec.LookPath("jq"); err != nil {
		need.Missing(t, need.SSHKeygen, err) // jq comes with the same set-up (scripts/setup-browser.sh)
	}
	e := agenttest.Setup(t, agenttest.Options{TaskQueue: "cli", NoStarter: true})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	started, err := e.Client.Start(ctx, guard.Request{
		Code: "import sys\nprint('the output ' * 400)\nprint('warn', file=sys.stderr)\nopen('out.csv', 'w').write('a,b\\n1,2\\n')\n",
		Settings: guard.Settings{
			Limits: guard.Limits{MaxStdoutBytes: 1000},
		},
	}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Decide(t, e, started.WorkflowID, true)
	res, err := e.Client.WaitResult(ctx, client.Run(started.WorkflowID), 0)
	if err != nil || res.Receipt == nil || !res.StdoutTruncated || len(res.Files) != 1 {
		t.Fatalf("result %+v, %v; want a truncated stdout, a file and a receipt", res, err)
	}
	if r := starterIn(t, e.Address, e.Namespace, "result", started.WorkflowID, "--hosts", e.Host.File); r.code != 0 {
		t.Fatalf("starter result --hosts: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if r := starterIn(t, e.Address, e.Namespace, "result", started.WorkflowID, "--hosts", hosttest.New(t, "test-host").File); r.code != 1 || r.errorType(t) != guard.TypeReceiptRefused {
		t.Errorf("starter result against another host's key: exit %d, %s; want 1, a ReceiptRefused", r.code, r.stdout)
	}

	exp := starterIn(t, e.Address, e.Namespace, "audit", started.WorkflowID)
	if exp.code != 0 {
		t.Fatalf("starter audit: exit %d: %s %s", exp.code, exp.stdout, exp.stderr)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hostsB, _ := os.ReadFile(e.Host.File)
	reviewersB, _ := os.ReadFile(e.Reviewer.File)
	write("hosts", hostsB)
	write("allowed_signers", reviewersB)
	verify := func(doc []byte, hosts string) verdict {
		t.Helper()
		r := starterIn(t, e.Address, e.Namespace, "audit", "verify", write("check.json", doc), "--reviewers", e.Reviewer.File, "--hosts", hosts)
		var v verdict
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("audit verify: %q is not a verdict: %v (%s)", r.stdout, err, r.stderr)
		}
		if (r.code == 0) != v.OK {
			t.Errorf("audit verify: exit %d with ok=%t", r.code, v.OK)
		}
		return v
	}
	recipe := auditRecipe(t)
	runRecipe := func(doc []byte) error {
		t.Helper()
		write("export.json", doc)
		cmd := exec.Command("sh", "-ec", recipe)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return &recipeError{err: err, out: string(out)}
		}
		return nil
	}

	doc := []byte(exp.stdout)
	if err := validateAudit(t, doc); err != nil {
		t.Errorf("the export does not match docs/schema/audit.schema.json: %v", err)
	}
	if err := validateAudit(t, []byte(strings.Replace(exp.stdout, `"decisions":[`, `"decisions":"none","x":[`, 1))); err == nil {
		t.Error("a record whose decisions are a string matched the schema")
	}
	if v := verify(doc, e.Host.File); !v.OK {
		t.Fatalf("the export does not verify: %v", v.failed())
	}
	if err := runRecipe(doc); err != nil {
		t.Fatalf("the audit recipe of docs/receipts-and-audit.md does not verify the export: %v", err)
	}

	// edit returns the export with one change made on its decoded form.
	edit := func(change func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		change(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	obj := func(m map[string]any, path ...string) map[string]any {
		for _, p := range path {
			m = m[p].(map[string]any)
		}
		return m
	}
	accepted := func(m map[string]any) map[string]any {
		for _, d := range m["decisions"].([]any) {
			if d.(map[string]any)["accepted"] == true {
				return d.(map[string]any)["decision"].(map[string]any)
			}
		}
		t.Fatal("the export has no accepted decision")
		return nil
	}
	flip := func(s string, i int) string { // one byte of s changed
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	cases := []struct {
		name   string
		doc    []byte
		hosts  string
		failed string // the check that must fail
		why    string // what its error must say
	}{
		{"the code", edit(func(m map[string]any) {
			obj(m, "request")["code"] = "print('other')\n"
			obj(m, "checked")["code"] = "print('other')\n"
		}), "", "digest", "digest"},
		{"the output", edit(func(m map[string]any) {
			obj(m, "result")["stdout"] = strings.Replace(obj(m, "result")["stdout"].(string), "output", "outpUt", 1)
		}), "", "result", "stdout"},
		{"a file", edit(func(m map[string]any) {
			obj(m, "result")["files"].([]any)[0].(map[string]any)["content"] = base64.StdEncoding.EncodeToString([]byte("a,b\n1,3\n"))
		}), "", "result", "files[0]"},
		{"an egress entry", edit(func(m map[string]any) {
			obj(m, "result")["egress"] = map[string]any{"attempts": []any{map[string]any{"host": "exfil.example", "port": 443, "allowed": true, "bytes_out": 1, "bytes_in": 0}}}
		}), "", "result", "egress"},
		{"the approval's signature", edit(func(m map[string]any) {
			d := accepted(m)
			d["signature"] = flip(d["signature"].(string), 120)
		}), "", "approval", "approval"},
		{"the receipt's signature", edit(func(m map[string]any) {
			r := obj(m, "result", "receipt")
			r["signature"] = flip(r["signature"].(string), 120)
		}), "", "receipt", "signature"},
		{"the receipt's statement", edit(func(m map[string]any) {
			r := obj(m, "result", "receipt")
			r["statement"] = strings.Replace(r["statement"].(string), `"exit_code":0`, `"exit_code":1`, 1)
		}), "", "receipt", "signature"},
		{"a reviewer's signature as the receipt", edit(func(m map[string]any) {
			r := obj(m, "result", "receipt")
			r["signature"] = accepted(m)["signature"]
			for _, d := range m["decisions"].([]any) {
				if d.(map[string]any)["accepted"] == true {
					r["statement"] = d.(map[string]any)["statement"]
				}
			}
		}), "", "receipt", "sandboxflow-receipt"},
		{"a host key the hosts file lacks", doc, hosttest.New(t, "test-host").File, "receipt", "not in the hosts file"},
		// Fields a reader acts on that the receipt signs only through what they derive from.
		{"ok", edit(func(m map[string]any) { obj(m, "result")["ok"] = false }), "", "result", "ok"},
		{"the reviewer", edit(func(m map[string]any) { obj(m, "result")["reviewer"] = "mallory" }), "", "result", "reviewer"},
		{"a cancel that never happened", edit(func(m map[string]any) {
			obj(m, "result")["cancelled"] = map[string]any{"by": "mallory", "time": "2026-12-06T00:00:00Z"}
		}), "", "result", "cancelled"},
		{"an edit that never happened", edit(func(m map[string]any) {
			obj(m, "result")["edit"] = map[string]any{"editor": "mallory", "original_digest": "sha256:00", "digest": obj(m, "checked")["digest"]}
		}), "", "result", "edit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hosts := tc.hosts
			if hosts == "" {
				hosts = e.Host.File
			}
			v := verify(tc.doc, hosts)
			why, failed := v.failed()[tc.failed]
			if v.OK || !failed || !strings.Contains(why, tc.why) {
				t.Errorf("audit verify: ok=%t, failed %v; want %q to fail saying %q", v.OK, v.failed(), tc.failed, tc.why)
			}
			if tc.hosts != "" {
				write("hosts", []byte(hosttest.New(t, "test-host").Line()))
				defer write("hosts", hostsB)
			}
			if err := runRecipe(tc.doc); err == nil && tc.name != "the code" && tc.name != "an edit that never happened" {
				t.Errorf("the audit recipe of docs/receipts-and-audit.md verified the export with %s changed", tc.name)
			}
		})
	}
}

type recipeError struct {
	err error
	out string
}

func (e *recipeError) Error() string { return e.err.Error() + ": " + e.out }

// Must show (issue 31): starter audit --since T lists exactly the runs that finished after T, one
// JSON record a line.
func TestIntegrationAuditSince(t *testing.T) {
	e := agenttest.Setup(t, agenttest.Options{TaskQueue: "cli", NoStarter: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	runOne := func(code string) string {
		t.Helper()
		started, err := e.Client.Start(ctx, guard.Request{Code: code}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		agenttest.Decide(t, e, started.WorkflowID, true)
		if _, err := e.Client.WaitResult(ctx, client.Run(started.WorkflowID), 0); err != nil {
			t.Fatal(err)
		}
		return started.WorkflowID
	}
	before := runOne("print('before')")
	d, err := e.Temporal.DescribeWorkflowExecution(ctx, before, "")
	if err != nil {
		t.Fatal(err)
	}
	since := d.GetWorkflowExecutionInfo().GetCloseTime().AsTime().Add(time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	after := []string{runOne("print('after 1')"), runOne("print('after 2')")}
	wantSorted := []string{after[0], after[1]}
	slices.Sort(wantSorted)
	want := strings.Join(wantSorted, ",")
	var got string
	for deadline := time.Now().Add(20 * time.Second); ; {
		r := starterIn(t, e.Address, e.Namespace, "audit", "--since", since.Format(time.RFC3339Nano))
		if r.code != 0 {
			t.Fatalf("audit --since: exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if line == "" {
				continue
			}
			var rec struct {
				WorkflowID string `json:"workflow_id"`
				Result     *struct {
					Receipt *guard.Receipt `json:"receipt"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("audit --since: line %q: %v", line, err)
			}
			if rec.Result == nil || rec.Result.Receipt == nil {
				t.Errorf("audit --since: %s's record has no result with a receipt", rec.WorkflowID)
			}
			ids = append(ids, rec.WorkflowID)
		}
		slices.Sort(ids)
		got = strings.Join(ids, ",")
		if got == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // visibility is eventually consistent
	}
	if got != want {
		t.Errorf("audit --since %s listed %q; want exactly %q (not %s, which finished before)", since.Format(time.RFC3339Nano), got, wantSorted, before)
	}
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }

// validateAudit checks an exported record against docs/schema/audit.schema.json.
func validateAudit(t *testing.T, doc []byte) error {
	t.Helper()
	return validateSchema(t, "audit.schema.json", doc)
}

// validateSchema checks doc against docs/schema/NAME.
func validateSchema(t *testing.T, name string, doc []byte) error {
	t.Helper()
	b, err := os.ReadFile("../docs/schema/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	return rs.Validate(v)
}
