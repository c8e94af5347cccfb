package guard

import (
	"fmt"
	"slices"
)

// TypePolicyRefused is the Temporal type of a PolicyRefused.
const TypePolicyRefused = "PolicyRefused"

// PolicyRefused reports that the operators' policy rules (package rules) refuse a request, or
// that a start would pass one of the policy's caps on runs waiting or sandboxes running. Nothing
// was asked of a reviewer and nothing ran. Rule names the rule that refused; Cap, instead, the
// cap that was reached ("waiting.per_agent", "running.total", ...). It is never retried.
type PolicyRefused struct {
	Rule   string
	Cap    string
	Reason string
}

func (e *PolicyRefused) Error() string {
	if e.Cap != "" {
		return fmt.Sprintf("policy: cap %s reached: %s", e.Cap, e.Reason)
	}
	return fmt.Sprintf("policy: rule %q refuses this request: %s", e.Rule, e.Reason)
}

// GroupNeed is what the policy rules ask of one named group of reviewers: Approvals approvals
// by distinct members, whose principals (as the reviewers file names them) are Principals.
type GroupNeed struct {
	Group      string   `json:"group"`
	Approvals  int      `json:"approvals"`
	Principals []string `json:"principals"`
	// Rules are the names of the rules that asked for it.
	Rules []string `json:"rules,omitempty"`
}

// RuleDecision is what the operators' policy rules decide for a checked request: the policy's
// hash, a larger quorum, groups whose approvals it needs, and warnings every reviewer view shows.
// No rule approves anything: a decision only refuses (an error, not a RuleDecision), asks for
// more approvals, or warns.
type RuleDecision struct {
	// PolicyHash is "sha256:<hex>" of the policy file's bytes; empty when the worker has none.
	PolicyHash string `json:"policy_hash,omitempty"`
	// Quorum is the largest quorum a matching rule asks for; zero when none does.
	Quorum int `json:"quorum,omitempty"`
	// Groups are the approvals the matching rules need from named groups, one entry a group.
	Groups []GroupNeed `json:"groups,omitempty"`
	// Warnings are the matching rules' warnings, each prefixed with its rule's name.
	Warnings []string `json:"warnings,omitempty"`
}

// Missing says which groups' approvals the approvals by principals still lack, one text each
// ("1 approval from security"); nil when every group has what it needs.
func Missing(groups []GroupNeed, principals []string) []string {
	var out []string
	for _, g := range groups {
		have := 0
		for _, p := range principals {
			if slices.Contains(g.Principals, p) {
				have++
			}
		}
		if n := g.Approvals - have; n > 0 {
			noun := "approvals"
			if n == 1 {
				noun = "approval"
			}
			out = append(out, fmt.Sprintf("%d %s from %s", n, noun, g.Group))
		}
	}
	return out
}
