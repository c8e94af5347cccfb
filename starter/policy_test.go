package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// starter policy test prints what a policy file decides for a request, starting nothing: a
// refusal (exit 1) with its rule and reason, a group and a warning (exit 0); a bad file or
// request is an error, a bad command line a usage error.
func TestPolicyTest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	policy := write("policy.yaml", `version: 1
groups: {security: [sec]}
rules:
  - {name: corp, when: 'request.egress.exists(e, e.endsWith(".corp.example"))', require: {group: security}, warn: corp}
  - {name: no-shell, when: 'request.language == "sh"', refuse: no shell}
`)
	bad := write("bad.yaml", "version: 1\nrules: [{name: r, when: 'request.nope', warn: x}]\n")
	corp := write("corp.json", `{"code": "print(1)", "egress": ["api.corp.example"], "metadata": {"agent": "a"}}`)
	shell := write("shell.json", `{"code": "ls", "language": "sh"}`)
	notReq := write("not.json", `{"cod": "x"}`)
	call := func(args ...string) (map[string]any, int) {
		var out bytes.Buffer
		code := run(context.Background(), append([]string{"policy"}, args...), strings.NewReader(""), &out, &bytes.Buffer{})
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("policy %v printed %q", args, out.String())
		}
		return m, code
	}
	m, code := call("test", policy, corp)
	groups, _ := m["groups"].([]any)
	if code != 0 || m["refused"] != false || len(groups) != 1 || !strings.HasPrefix(m["policy_hash"].(string), "sha256:") {
		t.Errorf("a corp request: exit %d, %v; want the security group, not refused", code, m)
	}
	if m, code := call("test", policy, shell); code != 1 || m["refused"] != true || m["rule"] != "no-shell" || m["reason"] != "no shell" {
		t.Errorf("a shell request: exit %d, %v; want refused by no-shell", code, m)
	}
	if m, code := call("test", bad, corp); code != 1 || !strings.Contains(m["error"].(map[string]any)["message"].(string), "nope") {
		t.Errorf("a bad policy: exit %d, %v; want an error naming the field", code, m)
	}
	if _, code := call("test", policy, notReq); code != 1 {
		t.Errorf("not a request: exit %d; want 1", code)
	}
	if _, code := call("check", policy, corp); code != 2 {
		t.Errorf("policy check: exit %d; want 2 (usage)", code)
	}
}
