package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// starter show prints the policy's hash, each group a run needs, what it still lacks while it
// waits, and the rules' warnings escaped for the terminal.
func TestShowPrintsPolicyRules(t *testing.T) {
	var r client.Review
	r.WorkflowID, r.State = "sandbox-1", contract.StatusAwaitingApproval
	r.Request = guard.Summary{Language: guard.Python, Code: "print(1)", Digest: "sha256:" + strings.Repeat("ab", 32)}
	r.Rules = &guard.RuleDecision{PolicyHash: "sha256:pol", Warnings: []string{"corp: reaches \x1b[31mcorp"},
		Groups: []guard.GroupNeed{{Group: "security", Approvals: 1, Principals: []string{"sec"}, Rules: []string{"corp"}}}}
	r.Missing = []string{"1 approval from security"}
	var b bytes.Buffer
	if err := printReview(&b, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"sha256:pol", "1 approval(s) from security (sec), by rule corp", "waiting for", "1 approval from security", `corp: reaches \x1b[31mcorp (policy rule)`} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape reaches the terminal:\n%s", out)
	}
}
