package rules

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

const sample = `version: 1
groups:
  security: [alice@corp.example, sec-bot@corp.example]
rules:
  - name: no-shell-for-ci
    when: request.language == "sh" && metadata.agent == "ci"
    refuse: CI agents run Python only
  - name: corp-needs-security
    when: request.egress.exists(e, e.matches("(^|[.*])corp[.]example(:[0-9]+)?$"))
    require: {group: security, approvals: 1}
    warn: reaches the corporate network
  - name: secrets-two
    when: size(request.secrets) > 0
    quorum: 2
limits:
  waiting: {per_agent: 3, total: 50}
`

func run(code, lang, agent string, egress, secrets []string) Input {
	c := &guard.Checked{Language: lang, Code: code}
	c.Egress, c.Secrets, c.Metadata.Agent = egress, secrets, agent
	c.Limits.Timeout = 30 * time.Second
	return ForRun(c)
}

func TestDecide(t *testing.T) {
	s, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Hash(), "sha256:") || len(s.Hash()) != 71 {
		t.Fatalf("hash %q", s.Hash())
	}
	if s.Limits().Waiting.PerAgent != 3 {
		t.Fatalf("limits %+v", s.Limits())
	}
	_, err = s.Decide(run("ls", "sh", "ci", nil, nil))
	var pr *guard.PolicyRefused
	if !errors.As(err, &pr) || pr.Rule != "no-shell-for-ci" || pr.Reason != "CI agents run Python only" {
		t.Fatalf("got %v; want a refusal by no-shell-for-ci", err)
	}
	d, err := s.Decide(run("ls", "sh", "dev", []string{"api.corp.example:443"}, []string{"TOKEN"}))
	if err != nil {
		t.Fatal(err)
	}
	if d.Quorum != 2 || len(d.Groups) != 1 || d.Groups[0].Group != "security" || d.Groups[0].Approvals != 1 ||
		len(d.Groups[0].Principals) != 2 || len(d.Warnings) != 1 || d.PolicyHash != s.Hash() {
		t.Fatalf("decision %+v", d)
	}
	if got := guard.Missing(d.Groups, []string{"bob@corp.example"}); len(got) != 1 || got[0] != "1 approval from security" {
		t.Fatalf("missing %q", got)
	}
	if got := guard.Missing(d.Groups, []string{"bob@corp.example", "alice@corp.example"}); got != nil {
		t.Fatalf("missing %q; want none", got)
	}
	d, err = s.Decide(run("print(1)", "python", "dev", []string{"pypi.org"}, nil))
	if err != nil || d.Quorum != 0 || d.Groups != nil || d.Warnings != nil {
		t.Fatalf("got %+v, %v; want no action", d, err)
	}
}

func TestSubjects(t *testing.T) {
	s, err := Parse([]byte(`{"version": 1, "rules": [
	  {"name": "cells-warn", "when": "subject == 'cell' && cell > 2", "warn": "a long session"},
	  {"name": "no-big-sessions", "when": "subject == 'session' && request.limits.timeout_seconds > 600", "refuse": "too long"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cs := &guard.CheckedSession{}
	cs.Limits.Timeout = time.Hour
	if _, err := s.Decide(ForSession(cs)); err == nil {
		t.Fatal("a session over 600 s was not refused")
	}
	if d, err := s.Decide(ForCell(cs, 3, "python", "x")); err != nil || len(d.Warnings) != 1 {
		t.Fatalf("cell 3: %+v, %v; want one warning", d, err)
	}
	if d, err := s.Decide(ForCell(cs, 1, "python", "x")); err != nil || len(d.Warnings) != 0 {
		t.Fatalf("cell 1: %+v, %v; want none", d, err)
	}
}

// A rule that costs too much to evaluate refuses (rules fail closed).
func TestCostLimitRefuses(t *testing.T) {
	s, err := Parse([]byte(`{"version": 1, "rules": [{"name": "costly", "when":
	  "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, request.code.matches('(a+)+b') || true)))", "warn": "x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	in := run(strings.Repeat("a", 100_000), "python", "", nil, nil)
	_, err = s.Decide(in)
	var pr *guard.PolicyRefused
	if !errors.As(err, &pr) || pr.Rule != "costly" || !strings.Contains(pr.Reason, "could not be evaluated") {
		t.Fatalf("got %v; want a refusal by costly", err)
	}
}

func TestMalformed(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"no version", `{"rules": []}`, "version 0"},
		{"unknown field", "version: 1\nrulez: []\n", "unknown field"},
		{"bad CEL", `{"version":1,"rules":[{"name":"r1","when":"request.language ==","warn":"w"}]}`, "rule 1 (r1): when"},
		{"unknown field in CEL", `{"version":1,"rules":[{"name":"r1","when":"request.langauge == 'sh'","warn":"w"}]}`, "langauge"},
		{"not bool", `{"version":1,"rules":[{"name":"r1","when":"request.code","warn":"w"}]}`, "want bool"},
		{"no action", `{"version":1,"rules":[{"name":"r1","when":"true"}]}`, "no action"},
		{"refuse and more", `{"version":1,"rules":[{"name":"r1","when":"true","refuse":"x","quorum":2}]}`, "no other action"},
		{"unknown group", `{"version":1,"rules":[{"name":"r1","when":"true","require":{"group":"sec"}}]}`, `no group "sec"`},
		{"too many approvals", `{"version":1,"groups":{"sec":["a"]},"rules":[{"name":"r1","when":"true","require":{"group":"sec","approvals":2}}]}`, "has 1 members"},
		{"quorum too high", `{"version":1,"rules":[{"name":"r1","when":"true","quorum":17}]}`, "quorum 17"},
		{"duplicate name", `{"version":1,"rules":[{"name":"r","when":"true","warn":"a"},{"name":"r","when":"true","warn":"b"}]}`, "taken"},
		{"bad name", `{"version":1,"rules":[{"name":"a b","when":"true","warn":"a"}]}`, "rule name"},
		{"negative cap", `{"version":1,"limits":{"running":{"total":-1}}}`, "limits.running.total"},
		{"not yaml", "version: [1\n", "not JSON or YAML"},
	} {
		_, err := Parse([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v; want an error with %q", tc.name, err, tc.want)
		}
	}
}

// No field of a rule can approve: a rule's actions are refuse, quorum, require and warn, and a
// quorum of zero or less is no action.
func TestNoRuleApproves(t *testing.T) {
	for _, f := range []string{
		`{"version":1,"rules":[{"name":"r","when":"true","approve":true}]}`,
		`{"version":1,"rules":[{"name":"r","when":"true","quorum":0}]}`,
		`{"version":1,"rules":[{"name":"r","when":"true","quorum":-1}]}`,
	} {
		if _, err := Parse([]byte(f)); err == nil {
			t.Errorf("%s: loaded", f)
		}
	}
}

// BenchmarkDecide100 evaluates 100 rules over a request (the target: at most 1 ms).
func BenchmarkDecide100(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("version: 1\ngroups: {security: [alice]}\nrules:\n")
	for i := range 100 {
		switch i % 4 {
		case 0:
			sb.WriteString("  - {name: r" + itoa(i) + ", when: 'request.egress.exists(e, e.endsWith(\".corp.example\"))', require: {group: security}}\n")
		case 1:
			sb.WriteString("  - {name: r" + itoa(i) + ", when: 'metadata.agent == \"agent-" + itoa(i) + "\" && request.language == \"sh\"', refuse: 'agent not allowed'}\n")
		case 2:
			sb.WriteString("  - {name: r" + itoa(i) + ", when: 'request.code.contains(\"subprocess\") && size(request.secrets) > 0', quorum: 2}\n")
		default:
			sb.WriteString("  - {name: r" + itoa(i) + ", when: '\"requests\" in request.packages || request.limits.timeout_seconds > 300', warn: slow}\n")
		}
	}
	s, err := Parse([]byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	in := run(strings.Repeat("print('hello')\n", 1000), "python", "dev", []string{"api.corp.example", "pypi.org"}, []string{"TOKEN"})
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Decide(in); err != nil {
			b.Fatal(err)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
