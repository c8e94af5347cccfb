package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/internal/cli"
)

// TestAuditFollowUsage: --follow takes no run ID, and --cursor and --settle need --follow; each is
// a usage error before anything is dialled.
func TestAuditFollowUsage(t *testing.T) {
	for _, args := range [][]string{
		{"audit", "--follow", "sandbox-1"},
		{"audit", "--cursor", "abc", "sandbox-1"},
		{"audit", "--settle", "1s", "--since", "1h"},
	} {
		var out strings.Builder
		if code := run(context.Background(), args, strings.NewReader(""), &out, io.Discard); code != cli.ExitUsage || !strings.Contains(out.String(), "UsageError") {
			t.Errorf("starter %v: exit %d, %s; want %d and a UsageError", args, code, out.String(), cli.ExitUsage)
		}
	}
}

// TestReadStream: audit verify reads a file whose first value has a schema_version as audit
// stream records (one a line), refuses one of them that is not JSON, and leaves a run's audit
// record to the record's own check.
func TestReadStream(t *testing.T) {
	lines := `{"schema_version":"sandboxflow-audit-stream/v1","kind":"check","workflow_id":"a"}
{"schema_version":"sandboxflow-audit-stream/v1","kind":"end","workflow_id":"a"}
`
	recs, ok, err := readStream([]byte(lines))
	if err != nil || !ok || len(recs) != 2 || recs[1].Kind != "end" {
		t.Errorf("readStream(two lines) = %d records, %t, %v; want 2, true, nil", len(recs), ok, err)
	}
	if _, ok, err := readStream([]byte(lines + "{not json\n")); !ok || err == nil {
		t.Errorf("readStream with a broken third line: %t, %v; want an error", ok, err)
	}
	if _, ok, err := readStream([]byte(`{"audit":"sandboxflow-audit/v1","workflow_id":"a"}`)); ok || err != nil {
		t.Errorf("readStream(an audit record) = %t, %v; want not a stream", ok, err)
	}
}
