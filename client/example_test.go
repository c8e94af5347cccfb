package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
)

// An orchestrator starts a run, a reviewer approves the digest they read, and the orchestrator
// waits for the result. (It needs a running Temporal server and worker, so it has no output.)
func Example() {
	ctx := context.Background()
	tc, err := client.Dial(ctx, client.ConnectionFromEnv())
	if err != nil {
		log.Fatal(err)
	}
	defer tc.Close()
	c, err := client.New(client.Options{Temporal: tc})
	if err != nil {
		log.Fatal(err)
	}
	started, err := c.Start(ctx, guard.Request{Code: "print(6 * 7)"}, client.StartOptions{})
	if err != nil {
		log.Fatal(err) // a *guard.ToolUsageError or *guard.ConfigError says what to fix
	}
	fmt.Println("waiting for a person to approve", started.WorkflowID, started.Digest)

	// Elsewhere, a reviewer who has read the code (c.Status) signs an approval of that exact
	// digest for this run with a key listed in the workers' reviewers file:
	key, done, err := client.LoadReviewerKey("/home/alice/.ssh/id_ed25519")
	if err != nil {
		log.Fatal(err)
	}
	defer done.Close()
	if _, err := c.Approve(ctx, started.WorkflowID, started.Digest, key, ""); err != nil {
		log.Fatal(err)
	}

	res, err := c.Result(ctx, started.WorkflowID)
	var denied *guard.ApprovalDenied
	switch {
	case errors.As(err, &denied):
		fmt.Println("not run:", denied.Reason)
	case err != nil:
		log.Fatal(err)
	case res.TimedOut:
		fmt.Println("timed out; try faster code")
	default:
		fmt.Printf("exit %d: %s", res.ExitCode, res.Stdout)
	}
}

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
	list := guard.SuspiciousCharacters(code)
	_ = client.WriteJSON(os.Stdout, map[string]any{"code": code, "suspicious_characters": list})
	fmt.Println(client.SuspiciousWarning(list))
	// Output:
	// {"code":"ok = False # \u202e ;ok = True\n","suspicious_characters":[{"line":1,"column":14,"rune":"U+202E","name":"RIGHT-TO-LEFT OVERRIDE"}]}
	// WARNING: the code holds 1 invisible or direction-changing character(s) that may make it read differently from how it runs: U+202E RIGHT-TO-LEFT OVERRIDE at line 1 column 14
}
