package guard

import (
	"strings"
	"testing"
)

func TestCheckWorkflowID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"sandboxflow-run-0b7f3c1e-2d4a-4f6b-9c8d-1e2f3a4b5c6d", true},
		{"team.a:task_7@bot", true},
		{strings.Repeat("a", MaxWorkflowIDBytes), true},
		{"", false},
		{strings.Repeat("a", MaxWorkflowIDBytes+1), false},
		{"Approved by alice: see https://evil.example/x", false}, // a sentence and a link in a notification
		{"a/b", false},
		{"a<b>", false},
		{"a\r\nSubject: x", false},
		{"caf\u00e9", false},
		{"a\u202eb", false},
	} {
		err := CheckWorkflowID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("CheckWorkflowID(%q) = %v; want ok=%t", tc.id, err, tc.ok)
		}
		if err != nil && TypeOf(err) != TypeToolUsageError {
			t.Errorf("CheckWorkflowID(%q): %T; want a ToolUsageError", tc.id, err)
		}
	}
}
