//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// dockerWorker runs RunCode workflows on queue with the real Docker backend (runc, the test
// image) under policy, or skips without Docker (fails under SANDBOXFLOW_REQUIRE_DOCKER).
func dockerWorker(t *testing.T, tc tclient.Client, queue string, policy guard.Policy, reviewers string) {
	t.Helper()
	img := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE")
	if img == "" {
		img = "sandboxflow-test-python:bookworm-full"
	}
	b, err := docker.New(docker.Config{Image: img, Deployment: "starter-reads-" + queue, Labels: map[string]string{"test.sandboxflow.suite": "starter-reads"}})
	if err != nil {
		need.Missing(t, need.Docker, fmt.Errorf("docker backend: %w", err))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = b.Close(ctx)
	})
	policy.ApprovalTimeout = time.Hour
	acts, err := activities.New(activities.Config{Policy: policy, Backend: b, ReviewersFile: reviewers})
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(tc, queue, worker.Options{})
	workflows.Register(w)
	acts.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// tabAttack: Python (tab stops 8 apart) runs the LAUNCHED line after the if; a view with tabs 4
// wide, or the terminal's tab stops moved by starter show's line numbers, drew it inside.
const tabAttack = "def main(dry_run):\n" +
	" \t   \tif not dry_run:\n" +
	" \t   \t    print('DELETED')\n" +
	"    \t\tprint('LAUNCHED')\n" +
	"main(True)\n"

func writeInput(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue 27 through the real tools: starter run refuses what Python would read other than it is
// drawn, with a ToolUsageError naming the file and line; what it accepts (mixed indentation,
// where the operator allows it) starter show draws as Python reads it, and the Docker sandbox
// runs what was drawn.
func TestIntegrationStarterReadsAsRuns(t *testing.T) {
	ts := devtest.Start(t)
	addr, ns := ts.GetFrontendHostPort(), ts.GetDefaultNamespace()
	bob := reviewertest.New(t, "bob")
	dockerWorker(t, ts.GetDefaultClient(), "cli", guard.Policy{SensitiveEnv: []string{"TOKEN"}}, bob.File)

	helperEscape := writeInput(t, "helper.py", "# -*- coding: unicode_escape -*-\n# a comment \\nprint('HIDDEN')\n")
	nfc := writeInput(t, "a", "x = 1\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a coding declaration in the code", []string{"--code", "# coding: raw_unicode_escape\nprint(1)\n"}, "code line 1: coding declaration"},
		{"utf-7 on the second line", []string{"--code", "#!/usr/bin/env python3\n# vim: fileencoding=utf-7\nprint(1)\n"}, "code line 2: coding declaration"},
		{"an input module that decodes escapes", []string{"--code", "import helper\n", "--input", "helper.py=" + helperEscape}, "input file helper.py line 1: coding declaration"},
		{"a .pth file in UTF-16", []string{"--code", "print(1)\n", "--input", "x.pth=" + writeInput(t, "x.pth", "\xff\xfei\x00m\x00")}, "input file x.pth: starts with a UTF-16"},
		{"mixed indentation", []string{"--code", tabAttack}, "code line 2: the indentation mixes tabs and spaces"},
		{"a lone carriage return", []string{"--code", "if not dry_run:\r    delete()\rprint('launch')\n"}, "code line 1: a carriage return without a line feed"},
		{"a form feed in the indentation", []string{"--code", "if False:\n    x = 1\n    \fprint('out')\n"}, "code line 3: a form feed"},
		{"PYTHONOPTIMIZE", []string{"--code", "assert False\n", "--env", "PYTHONOPTIMIZE=1"}, "PYTHONOPTIMIZE"},
		{"PYTHONPYCACHEPREFIX", []string{"--code", "import helper\n", "--env", "PYTHONPYCACHEPREFIX=/work/c"}, "PYTHONPYCACHEPREFIX"},
		{"names equal under NFC", []string{"--code", "print(1)\n", "--input", "caf\u00e9.py=" + nfc, "--input", "cafe\u0301.py=" + nfc}, "collide"},
	} {
		r := starterIn(t, addr, ns, append([]string{"run"}, tc.args...)...)
		if r.code != 1 || r.errorType(t) != guard.TypeToolUsageError || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("%s: exit %d, %s; want 1 and a ToolUsageError with %q", tc.name, r.code, r.stdout, tc.want)
		}
	}

	// A name that mixes scripts is accepted and flagged, with its code points.
	r := starterIn(t, addr, ns, "run", "--workflow-id", "cli-names", "--code", "p\u0430ypal = 1\nprint(p\u0430ypal)\n",
		"--input", "m.py="+writeInput(t, "m.py", "\uff45\uff58\uff45\uff43('1')\n"))
	if r.code != 0 {
		t.Fatalf("run: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	r = starterIn(t, addr, ns, "show", "cli-names")
	if r.code != 0 || !strings.Contains(r.stdout, "WARNING: the code or its source input files hold 3 name(s) that can read as other names") ||
		!strings.Contains(r.stdout, `at input file m.py line 1 column 1 not in NFKC: Python reads this identifier as "exec"`) ||
		!strings.Contains(r.stdout, `written p\u0430ypal`) || !strings.Contains(r.stderr, "mixes scripts (Cyrillic, Latin)") {
		t.Errorf("show of a mixed-script name: exit %d, stdout %s, stderr %s", r.code, r.stdout, r.stderr)
	}

	// The operator allows mixed indentation: the run is shown as Python reads it.
	dockerWorker(t, ts.GetDefaultClient(), "cli-tabs", guard.Policy{AllowMixedIndentation: true, SensitiveEnv: []string{"TOKEN"}}, bob.File)
	r = starterIn(t, addr, ns, "run", "--task-queue", "cli-tabs", "--workflow-id", "cli-tabs", "--code", tabAttack,
		"--input", "json.py="+writeInput(t, "json.py", "loads = eval\n"), "--input", "hook.pth="+writeInput(t, "hook.pth", "import os\n"),
		"--env", "MODE=dry\trun", "--env", "TOKEN=tok-0123456789abcdef0123456789ab")
	if r.code != 0 {
		t.Fatalf("run: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	r = starterIn(t, addr, ns, "show", "cli-tabs", "--task-queue", "cli-tabs")
	if r.code != 0 {
		t.Fatalf("show: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	ifCol, bodyCol, launchCol := columnOf(r.stdout, "if not"), columnOf(r.stdout, "print('DELETED')"), columnOf(r.stdout, "print('LAUNCHED')")
	if launchCol != ifCol || bodyCol <= ifCol || strings.Contains(r.stdout, "\t") {
		t.Errorf("show draws if at %d, body at %d, launch at %d (tabs left raw: %t); want the launch at the if's column:\n%s",
			ifCol, bodyCol, launchCol, strings.Contains(r.stdout, "\t"), r.stdout)
	}
	for _, want := range []string{
		"WARNING: 2 input file(s) may run without the code calling them",
		"input file hook.pth: a .pth file", "input file json.py: module json shadows the standard module",
		`MODE = "dry\trun"`, "TOKEN = ‹sensitive, 32 bytes›",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "tok-0123") || !strings.Contains(r.stderr, "WARNING: input file json.py") {
		t.Errorf("show: a sensitive value printed, or no warning on stderr:\n%s\n%s", r.stdout, r.stderr)
	}
	r = starterIn(t, addr, ns, "show", "cli-tabs", "--task-queue", "cli-tabs", "--json")
	var review client.Review
	if err := json.Unmarshal([]byte(r.stdout), &review); err != nil {
		t.Fatalf("show --json: %v\n%s", err, r.stdout)
	}
	if len(review.Request.Warnings) != 2 || review.SensitiveEnvBytes["TOKEN"] != 32 || review.Env["MODE"] != "dry\trun" || review.Env["TOKEN"] != "" {
		t.Errorf("show --json: warnings %v, env %v, sensitive %v", review.Request.Warnings, review.Env, review.SensitiveEnvBytes)
	}
	r = starterIn(t, addr, ns, "statement", "cli-tabs", "--task-queue", "cli-tabs", "--reviewer", bob.Principal)
	if r.code != 0 || !strings.Contains(r.stderr, "WARNING: input file hook.pth") || strings.Contains(r.stdout, "WARNING") {
		t.Errorf("statement: exit %d, stdout %q, stderr %q; want the warnings on stderr, the statement alone on stdout", r.code, r.stdout, r.stderr)
	}
	// Approved, the Docker sandbox runs what show drew: the launch, not the deletion.
	r = starterIn(t, addr, ns, "approve", "cli-tabs", "--task-queue", "cli-tabs", "--digest", review.Request.Digest, "--key", bob.KeyFile, "--reviewer", bob.Principal, "--wait")
	var out guard.Result
	if err := json.Unmarshal([]byte(lastLine(r.stdout)), &out); err != nil || r.code != 0 {
		t.Fatalf("approve --wait: exit %d, %v\n%s %s", r.code, err, r.stdout, r.stderr)
	}
	if string(out.Stdout) != "LAUNCHED\n" {
		t.Errorf("the sandbox printed %q; want only LAUNCHED, as drawn", out.Stdout)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
