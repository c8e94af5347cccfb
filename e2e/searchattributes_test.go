//go:build integration

package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"go.temporal.io/server/temporaltest"

	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
)

// TestWorkerChecksSearchAttributes: without --dev the worker refuses a namespace that lacks the
// search attributes and prints the command that creates them.
func TestWorkerChecksSearchAttributes(t *testing.T) {
	workerBin, _ := binaries(t)
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	alice := reviewertest.New(t, "alice")
	cmd := exec.Command(workerBin, "--address", ts.GetFrontendHostPort(), "--namespace", ts.GetDefaultNamespace(),
		"--backend", "local", "--allow-unsafe-local", "--reviewers", alice.File)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the worker started on a namespace without the search attributes:\n%s", out)
	}
	for _, want := range []string{"lacks the search attributes", "temporal operator search-attribute create", "--name SandboxStatus --type Keyword"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
