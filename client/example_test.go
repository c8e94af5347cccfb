package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/sandboxflow/sandboxflow/approval"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
)

func ExampleToolSchema() {
	schema, err := client.ToolSchema(client.FormatAnthropic, client.ToolOptions{Languages: []string{"python"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(schema) > 0)
	// Output: true
}

// A reviewer's view of code that hides a right-to-left override: WriteJSON escapes it, and the
// warning says where it is.
func ExampleWriteJSON() {
	code := "ok = False # \u202e ;ok = True\n"
	list := pysource.SuspiciousCharacters(code)
	_ = client.WriteJSON(os.Stdout, map[string]any{"code": code, "suspicious_characters": list})
	fmt.Println(client.SuspiciousWarning(list))
	// Output:
	// {"code":"ok = False # \u202e ;ok = True\n","suspicious_characters":[{"line":1,"column":14,"rune":"U+202E","name":"RIGHT-TO-LEFT OVERRIDE"}]}
	// WARNING: the code holds 1 invisible or direction-changing character(s) that may make it read differently from how it runs: U+202E RIGHT-TO-LEFT OVERRIDE at line 1 column 14
}

// A reviewer's tool signs cell 1 of a session: CellStatementFor recomputes the cell's digest
// from the status (settings digest, index, code digest, chain) before it makes the statement.
func ExampleCellStatementFor() {
	s, err := guard.Policy{}.CheckSession(guard.SessionRequest{}, "docker")
	if err != nil {
		log.Fatal(err)
	}
	code, chain := "x = 41\n", guard.ChainStart(s.Digest)
	codeDigest := guard.CellCodeDigest(guard.Python, code)
	digest := guard.CellDigest(s.Digest, 1, codeDigest, chain)
	st := contract.SessionStatus{State: contract.SessionOpen, WorkflowID: "session-1", RunID: "run-1", SandboxTaskQueue: "host-1",
		StatementVersion: approval.StatementVersion, Settings: s.Summary(), Chain: chain,
		Cells: []contract.CellStatus{{Cell: 1, Language: guard.Python, Code: code, CodeBytes: len(code), CodeDigest: codeDigest,
			Chain: chain, Digest: digest, State: contract.StatusAwaitingApproval}}}
	f, err := client.CellStatementFor(st, 1, client.StatementOptions{Reviewer: "alice"}, time.Now())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.WorkflowID, f.RunID, f.SandboxTaskQueue, f.Reviewer, f.Digest == digest)
	// Output: session-1 run-1 host-1 alice true
}

// A reviewer's tool names what it acts on once, and passes the target to Review, Statement,
// Approve, Deny, ApproveAndWait, Cancel and WaitResult alike.
func ExampleTarget() {
	for _, t := range []client.Target{client.Run("sandbox-7"), client.Cell("session-1", 3), client.Session("session-1")} {
		fmt.Printf("%s (a cell: %t)\n", t, t.IsCell())
	}
	// Output:
	// sandbox-7 (a cell: false)
	// cell 3 of session-1 (a cell: true)
	// the waiting cell of session-1 (a cell: true)
}

// A log shipper's follower: every audit stream record as one JSON line, resumed after the last
// cursor it wrote (kept in a file), until interrupted. Not run: it needs a Temporal server.
func ExampleClient_FollowAudit() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	tc, err := tclient.Dial(tclient.Options{HostPort: "localhost:7233", Namespace: "default"})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(client.Options{Temporal: tc, Namespace: "default"})
	if err != nil {
		log.Fatal(err)
	}
	last, _ := os.ReadFile("audit.cursor")
	enc := json.NewEncoder(os.Stdout)
	err = c.FollowAudit(ctx, client.FollowOptions{Cursor: strings.TrimSpace(string(last))}, func(rec contract.AuditStreamRecord) error {
		if err := enc.Encode(rec); err != nil {
			return err
		}
		return os.WriteFile("audit.cursor", []byte(rec.Cursor), 0o600)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// An orchestrator asks for packages with its run: the lock (pip's hash-checking format) goes
// into the request, is part of its digest, and every reviewer's view lists it.
func ExampleReadLockFile() {
	dir, err := os.MkdirTemp("", "lock")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := dir + "/requirements.lock"
	lock := "numpy==2.1.0 \\\n    --hash=sha256:" + strings.Repeat("0", 64) + "\n"
	if err := os.WriteFile(path, []byte(lock), 0o600); err != nil {
		log.Fatal(err)
	}
	packages, err := client.ReadLockFile(path)
	if err != nil {
		log.Fatal(err)
	}
	req := guard.Request{Code: "import numpy\n", Settings: guard.Settings{Packages: packages}}
	checked, err := guard.Policy{Packages: true}.Check(req, "docker")
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range checked.Summary().Packages {
		fmt.Println(p.Requirement(), len(p.Hashes))
	}
	// Output: numpy==2.1.0 1
}
