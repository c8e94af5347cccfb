package mcpserver

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

func TestFileResource(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content []byte
		mime    string
		text    bool
	}{
		{"report.txt", []byte("hi\n"), "text/plain; charset=utf-8", true},
		{"data.json", []byte(`{"a":1}`), "application/json", true},
		{"noext", []byte("plain"), "text/plain; charset=utf-8", true},
		{"blob", []byte{0xff, 0}, "application/octet-stream", false},
		{"img.png", []byte("\x89PNG"), "image/png", false},
	} {
		rc := fileResource("sandbox-1", guard.File{Name: tc.name, Size: int64(len(tc.content)), Content: tc.content})
		if rc.MIMEType != tc.mime || (rc.Text != "") != tc.text || !strings.HasSuffix(rc.URI, "/files/"+tc.name) {
			t.Errorf("%s: got %+v; want MIME %s, text %t", tc.name, rc, tc.mime, tc.text)
		}
	}
}

func TestErrorResultNamesTheType(t *testing.T) {
	for _, err := range []error{
		&guard.ToolUsageError{Msg: "code is empty"},
		&guard.ConfigError{Msg: "timeout too long"},
		&guard.IntegrationError{Op: "docker: ping"},
		&guard.ApprovalDenied{Reason: guard.DeniedByReviewer, Reviewer: "bob", Message: "no"},
		&guard.ApprovalRefused{Reason: guard.RefusedAlreadyUsed, Msg: "used"},
	} {
		res := errorResult(err)
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || !strings.HasPrefix(text, guard.TypeOf(err)+": ") {
			t.Errorf("errorResult(%v) = %t %q; want isError and the type first", err, res.IsError, text)
		}
	}
}

func TestErrorResultSaysARefusalRanNothing(t *testing.T) {
	res := errorResult(&guard.ApprovalRefused{Reason: guard.RefusedNotVerified, Msg: "does not verify"})
	text := res.Content[0].(*mcp.TextContent).Text
	out, ok := res.StructuredContent.(client.ErrorOutput)
	if !res.IsError || !strings.Contains(text, "did not run") || !ok || out.Error.Type != guard.TypeApprovalRefused || out.Error.Reason != "not_verified" {
		t.Errorf("errorResult = %q, %+v; want an ApprovalRefused with its reason that says the code did not run", text, res.StructuredContent)
	}
}

func TestParseArguments(t *testing.T) {
	s := &Server{cfg: Config{Languages: []string{guard.Python, guard.Shell}}}
	if _, err := s.parseArguments([]byte(`{"code":"x","language":"ruby"}`)); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("ruby: %v; want a ToolUsageError", err)
	}
	if _, err := s.parseArguments([]byte(`{"code":"x","language":"sh","timeout":"1h"}`)); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("an argument the model may not set: %v; want a ToolUsageError", err)
	}
	if a, err := s.parseArguments([]byte(`{"code":"x","language":"sh"}`)); err != nil || a.Language != guard.Shell {
		t.Errorf("sh: %+v, %v", a, err)
	}
}

// The model is told, in its waiting text, what the policy rules warn reviewers of and which
// group approvals the run still waits for.
func TestPolicyText(t *testing.T) {
	st := contract.Status{Rules: &guard.RuleDecision{Warnings: []string{"corp: reaches corp"}}, DecisionWait: contract.DecisionWait{Missing: []string{"1 approval from security"}}}
	got := policyText(st)
	if !strings.Contains(got, "WARNING shown to reviewers (policy rule): corp: reaches corp.") || !strings.Contains(got, "still need 1 approval from security") {
		t.Errorf("policyText = %q", got)
	}
	if policyText(contract.Status{}) != "" {
		t.Error("policyText without rules is not empty")
	}
}
