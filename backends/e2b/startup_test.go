package e2b

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/startuptest"
)

// TestStartupHooksDoNotRun: with the working folder at the sandbox user's home (where HOME
// pointed before), input files where Python and sh look at start-up and PYTHON*, ENV and
// BASH_ENV variables set past the guard run nothing before the code; the fake runs the command
// line the backend sends with the local python3 and sh, and the hooks write their markers to a
// folder outside the sandbox.
func TestStartupHooksDoNotRun(t *testing.T) {
	t.Parallel()
	_, b, _ := setup(t, func(c *Config) { c.WorkDir = "/home/user" })
	marks := t.TempDir()
	p := guard.Policy{Languages: []string{guard.Python, guard.Shell}}
	probe, err := run(t, b, p, guard.Request{Code: startuptest.PycProbe(marks)})
	if err != nil || !probe.OK {
		t.Fatalf("pyc probe: %v %q", err, probe.Stderr)
	}
	in, err := startuptest.ParseProbe(probe.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range startuptest.Cases(in, marks) {
		t.Run(tc.Name, func(t *testing.T) {
			c, err := p.Check(guard.Request{Code: tc.Code, Language: tc.Language, Settings: guard.Settings{Files: tc.Files}}, b.Name())
			if err != nil {
				t.Fatal(err)
			}
			for name, value := range tc.Env {
				c.Env = append(c.Env, guard.EnvVar{Name: name, Value: value})
			}
			res, err := b.Run(t.Context(), c)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			entries, err := os.ReadDir(marks)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
				os.Remove(filepath.Join(marks, e.Name()))
			}
			if ran := startuptest.Markers(names); len(ran) > 0 {
				t.Errorf("hooks ran: %q (stdout %q)", ran, res.Stdout)
			}
			if strings.Contains(string(res.Stdout)+string(res.Stderr), "HOOK") {
				t.Errorf("a hook printed: stdout %q stderr %q", res.Stdout, res.Stderr)
			}
		})
	}
}

// TestSessionStartupHooksDoNotRun: the same attacks against a session: nothing among the input
// files or in the env (past the guard) runs when the sandbox opens, when the interpreter starts
// or before a cell's code.
func TestSessionStartupHooksDoNotRun(t *testing.T) {
	t.Parallel()
	_, b, _ := setup(t, func(c *Config) { c.WorkDir = "/home/user" })
	marks := t.TempDir()
	probe, err := run(t, b, sessionPolicy, guard.Request{Code: startuptest.PycProbe(marks)})
	if err != nil || !probe.OK {
		t.Fatalf("pyc probe: %v %q", err, probe.Stderr)
	}
	in, err := startuptest.ParseProbe(probe.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range startuptest.Cases(in, marks) {
		t.Run(tc.Name, func(t *testing.T) {
			s, err := sessionPolicy.CheckSession(guard.SessionRequest{Settings: guard.Settings{Files: tc.Files}}, Name)
			if err != nil {
				t.Fatal(err)
			}
			for name, value := range tc.Env {
				s.Env = append(s.Env, guard.EnvVar{Name: name, Value: value})
			}
			sb, err := b.OpenSession(t.Context(), s)
			if err != nil {
				t.Fatalf("OpenSession: %v", err)
			}
			defer sb.Close(context.Background())
			// Past the guard too, which refuses some of the env names.
			c := guard.Cell{Index: 1, Language: tc.Language, Code: tc.Code, CodeDigest: guard.CellCodeDigest(tc.Language, tc.Code)}
			res, err := sb.RunCell(t.Context(), c, s.Limits)
			if err != nil {
				t.Fatalf("RunCell: %v", err)
			}
			entries, err := os.ReadDir(marks)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
				os.Remove(filepath.Join(marks, e.Name()))
			}
			if ran := startuptest.Markers(names); len(ran) > 0 {
				t.Errorf("hooks ran: %q (stdout %q)", ran, res.Stdout)
			}
			if strings.Contains(string(res.Stdout)+string(res.Stderr), "HOOK") {
				t.Errorf("a hook printed: stdout %q stderr %q", res.Stdout, res.Stderr)
			}
		})
	}
}
