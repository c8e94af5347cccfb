//go:build integration

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessionenv"
)

// Must show (issue 31): a session's cells chain: the export of a real session (Docker sandbox)
// verifies, and with a middle cell's record removed, or two cells swapped, the cell after the
// gap fails; a denied cell between them is no gap (it ran nothing and has no receipt).
func TestIntegrationAuditSessionCellsChain(t *testing.T) {
	e := sessionenv.Setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	opened, err := e.Client.OpenSession(ctx, guard.SessionRequest{Languages: []string{guard.Python}}, client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := opened.WorkflowID
	cell := func(code string, approve bool) {
		t.Helper()
		sub, err := e.Client.SubmitCell(ctx, id, contract.CellRequest{Code: code})
		if err != nil {
			t.Fatal(err)
		}
		sessionenv.Decide(t, e, id, approve)
		st, err := e.Client.AwaitCell(ctx, id, sub.Cell)
		if err != nil || (approve && (st.Result == nil || st.Result.Receipt == nil)) {
			t.Fatalf("cell %d: %+v, %v; want a result with a receipt", sub.Cell, st, err)
		}
	}
	cell("x = 1\nprint(x)\n", true)
	cell("x += 1\nprint(x)\n", true)
	cell("print('never')\n", false)
	cell("x += 1\nprint(x)\nopen('x.txt', 'w').write(str(x))\n", true)
	if _, err := e.Client.CloseSession(ctx, id, "done"); err != nil {
		t.Fatal(err)
	}

	exp := starterIn(t, e.Address, e.Namespace, "audit", id)
	if exp.code != 0 {
		t.Fatalf("starter audit: exit %d: %s %s", exp.code, exp.stdout, exp.stderr)
	}
	if err := validateAudit(t, []byte(exp.stdout)); err != nil {
		t.Errorf("the session's export does not match docs/schema/audit.schema.json: %v", err)
	}
	var rec contract.AuditRecord
	if err := json.Unmarshal([]byte(exp.stdout), &rec); err != nil || len(rec.Cells) != 3 {
		t.Fatalf("the export holds %d cells (%v); want the 3 that ran", len(rec.Cells), err)
	}
	dir := t.TempDir()
	verify := func(r contract.AuditRecord) verdict {
		t.Helper()
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		file := dir + "/session.json"
		if err := writeFile(file, b); err != nil {
			t.Fatal(err)
		}
		out := starterIn(t, e.Address, e.Namespace, "audit", "verify", file, "--reviewers", e.Reviewer.File, "--hosts", e.Host.File)
		var v verdict
		if err := json.Unmarshal([]byte(out.stdout), &v); err != nil {
			t.Fatalf("audit verify: %q: %v", out.stdout, err)
		}
		return v
	}
	if v := verify(rec); !v.OK {
		t.Fatalf("the session's export does not verify: %v", v.failed())
	}
	auditSinceListsTheSession(t, e.Address, e.Namespace, rec)
	for _, tc := range []struct {
		name  string
		cells []contract.AuditCell
		fails string
	}{
		{"the middle cell removed", []contract.AuditCell{rec.Cells[0], rec.Cells[2]}, "cell 4"},
		{"two cells swapped", []contract.AuditCell{rec.Cells[1], rec.Cells[0], rec.Cells[2]}, "cell 2"},
		{"the first cell removed", rec.Cells[1:], "cell 2"},
	} {
		r := rec
		r.Cells = tc.cells
		v := verify(r)
		t.Logf("%s: %v", tc.name, v.failed())
		if why, failed := v.failed()[tc.fails]; v.OK || !failed || !strings.Contains(why, "(cell.previous)") {
			t.Errorf("%s: ok=%t, failed %v; want %s to fail for its chain (cell.previous)", tc.name, v.OK, v.failed(), tc.fails)
		}
	}
}

// auditSinceListsTheSession: starter audit --since a moment before the session started lists the
// session's record, with its cells, as starter audit ID exports it (issue 47).
func auditSinceListsTheSession(t *testing.T, address, namespace string, rec contract.AuditRecord) {
	t.Helper()
	since := rec.Started.Add(-time.Millisecond).Format(time.RFC3339Nano)
	for deadline := time.Now().Add(20 * time.Second); ; {
		r := starterIn(t, address, namespace, "audit", "--since", since)
		if r.code != 0 {
			t.Fatalf("audit --since: exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var got contract.AuditRecord
			if line == "" || json.Unmarshal([]byte(line), &got) != nil || got.WorkflowID != rec.WorkflowID {
				continue
			}
			if got.Session == nil || len(got.Cells) != len(rec.Cells) {
				t.Fatalf("audit --since: the session's record has session %v and %d cells; want its settings and %d cells", got.Session, len(got.Cells), len(rec.Cells))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit --since %s never listed session %s:\n%s", since, rec.WorkflowID, r.stdout)
		}
		time.Sleep(200 * time.Millisecond) // visibility is eventually consistent
	}
}
