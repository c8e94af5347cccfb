package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/cli"
	"github.com/sandboxflow/sandboxflow/rules"
)

// policyDecision is what `starter policy test` prints: what a policy's rules decide for a
// request.
type policyDecision struct {
	PolicyHash string `json:"policy_hash"`
	// Refused is set when a rule refuses the request; Rule and Reason say which and why.
	Refused bool   `json:"refused"`
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Quorum, Groups and Warnings are what the matching rules ask and warn of.
	Quorum   int               `json:"quorum,omitempty"`
	Groups   []guard.GroupNeed `json:"groups,omitempty"`
	Warnings []string          `json:"warnings,omitempty"`
	// Digest is the request's digest as checked here (for the backend given).
	Digest string `json:"digest"`
}

// policyMain runs `starter policy test FILE REQUEST.json`: it loads the policy file, checks the
// request (a guard.Request as JSON) under a policy that lets through its network, egress,
// secrets and packages (the worker's own flags are not known here), and prints what the rules
// decide. Nothing is started. Exit 0 when the rules accept, 1 when they refuse or a file is bad.
func policyMain(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("starter policy test", stderr)
	backend := fs.String("backend", "docker", "the backend the request is checked for (it names the request's backend and digest)")
	var pos []string
	var err error
	if len(args) == 0 || args[0] != "test" {
		err = &cli.UsageError{Msg: "starter policy test FILE REQUEST.json"}
	} else {
		pos, err = cli.Parse(fs, args[1:], 2, 2)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		_ = client.WriteJSON(stdout, client.ErrorOutput{Error: client.ErrorBody{Type: client.TypeUsageError, Message: err.Error()}})
		fmt.Fprintln(stderr, "starter:", err)
		return cli.ExitUsage
	}
	out, err := policyTest(pos[0], pos[1], *backend)
	if err != nil {
		_ = client.WriteJSON(stdout, client.NewErrorOutput(err))
		fmt.Fprintln(stderr, "starter:", err)
		return 1
	}
	_ = client.WriteJSON(stdout, out)
	if out.Refused {
		fmt.Fprintf(stderr, "starter: rule %s refuses this request: %s\n", out.Rule, out.Reason)
		return 1
	}
	return 0
}

func policyTest(policyFile, requestFile, backend string) (policyDecision, error) {
	s, err := rules.Load(policyFile)
	if err != nil {
		return policyDecision{}, &guard.ConfigError{Msg: err.Error()}
	}
	b, err := os.ReadFile(requestFile)
	if err != nil {
		return policyDecision{}, fmt.Errorf("policy test: %w", err)
	}
	var req guard.Request
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return policyDecision{}, &guard.ToolUsageError{Msg: fmt.Sprintf("%s: not a request: %v", requestFile, err)}
	}
	p := guard.Policy{Languages: []string{guard.Python, guard.Shell}, AllowOpenNetwork: true, EgressAllow: req.Egress, SecretNames: req.Secrets, Packages: req.Packages != "",
		MaxTimeout: guard.MaxTimeoutCap}
	c, err := p.Check(req, backend)
	if err != nil {
		return policyDecision{}, fmt.Errorf("policy test: %s does not check: %w", requestFile, err)
	}
	out := policyDecision{PolicyHash: s.Hash(), Digest: c.Digest}
	d, err := s.Decide(rules.ForRun(&c))
	var pr *guard.PolicyRefused
	switch {
	case errors.As(err, &pr):
		out.Refused, out.Rule, out.Reason = true, pr.Rule, pr.Reason
	case err != nil:
		return policyDecision{}, err
	default:
		out.Quorum, out.Groups, out.Warnings = d.Quorum, d.Groups, d.Warnings
	}
	return out, nil
}
