package client

import (
	"testing"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/internal/testkit/jsontest"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// TestReviewEncodings pins the JSON a reviewer's tools read of a Review and a SessionReview
// (starter review --json, the inbox): keys, their order and their omission, with every field
// of their own set. A change of the Go types that moves a field must not change a byte.
func TestReviewEncodings(t *testing.T) {
	extras := Extras{
		Env:               map[string]string{"MODE": "fast"},
		SensitiveEnvBytes: map[string]int{"TOKEN": 12},
		InputFiles:        map[string][]byte{"data.txt": []byte("hi")},
		Changes:           &Changes{Conversation: "conv", Diff: "-a\n+b\n", Added: 1, Removed: 1},
		ChangesError:      "previous run gone",
	}
	suspicious := []pysource.Suspicious{{Line: 1, Column: 2, Rune: "U+202E", Name: "RIGHT-TO-LEFT OVERRIDE"}}
	confusable := []pysource.ConfusableName{{Line: 1, Column: 1, Name: "pаth"}}
	run := Review{
		WorkflowID:           "run-1",
		Status:               contract.Status{State: contract.StatusAwaitingApproval, DecisionWait: contract.DecisionWait{Quorum: 2}},
		SuspiciousCharacters: suspicious,
		Warning:              "the code holds invisible characters",
		ConfusableNames:      confusable,
		NamesWarning:         "the code holds names that read as others",
		Extras:               extras,
	}
	session := SessionReview{
		SessionID:     "session-1",
		SessionStatus: contract.SessionStatus{State: contract.StatusAwaitingApproval, Quorum: 2},
		Waiting:       1,
		Views:         []CellView{{Cell: 1, SuspiciousCharacters: suspicious, Warning: "invisible characters"}},
		Extras:        extras,
	}
	jsontest.Pinned(t, "Review", run, wantReview)
	jsontest.Pinned(t, "SessionReview", session, wantSessionReview)
}

const (
	wantReview        = `{"workflow_id":"run-1","state":"awaiting_approval","request":{"language":"","code":"","code_bytes":0,"limits":{"max_stdout_bytes":0,"max_stderr_bytes":0,"max_files":0,"max_file_bytes":0,"max_total_file_bytes":0,"timeout":"0s"},"network":false,"backend":"","digest":"","metadata":{}},"quorum":2,"rejected_decisions":0,"ignored_decisions":0,"run_attempts":0,"suspicious_characters":[{"line":1,"column":2,"rune":"U+202E","name":"RIGHT-TO-LEFT OVERRIDE"}],"warning":"the code holds invisible characters","confusable_names":[{"line":1,"column":1,"name":"pаth","length":0,"reason":""}],"names_warning":"the code holds names that read as others","env_values":{"MODE":"fast"},"sensitive_env_bytes":{"TOKEN":12},"input_files":{"data.txt":"aGk="},"changes":{"conversation":"conv","diff":"-a\n+b\n","added":1,"removed":1,"notice":""},"changes_error":"previous run gone"}`
	wantSessionReview = `{"session_id":"session-1","state":"awaiting_approval","quorum":2,"settings":{"languages":null,"limits":{"max_stdout_bytes":0,"max_stderr_bytes":0,"max_files":0,"max_file_bytes":0,"max_total_file_bytes":0,"timeout":"0s"},"network":false,"backend":"","lifetime":0,"idle_timeout":0,"max_cells":0,"digest":"","metadata":{}},"cells":null,"rejected_decisions":0,"waiting_cell":1,"cell_views":[{"cell":1,"suspicious_characters":[{"line":1,"column":2,"rune":"U+202E","name":"RIGHT-TO-LEFT OVERRIDE"}],"warning":"invisible characters"}],"env_values":{"MODE":"fast"},"sensitive_env_bytes":{"TOKEN":12},"input_files":{"data.txt":"aGk="},"changes":{"conversation":"conv","diff":"-a\n+b\n","added":1,"removed":1,"notice":""},"changes_error":"previous run gone"}`
)
