package httpservice

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/startuptest"
)

// runRunner runs examples/modal/runner.py on c, as the Modal Sandbox does.
func runRunner(t *testing.T, c guard.Checked) guard.Result {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", filepath.Join(modalDir, "runner.py"))
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("runner.py: %v", err)
	}
	var res guard.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("runner.py's answer %q: %v", out, err)
	}
	return res
}

// TestModalRunnerStartupHooksDoNotRun: the Modal recipe's runner runs nothing of the start-up
// hooks (startuptest) planted in the input files and, past the guard, the env; the hooks write
// their markers to a folder outside the runner's.
func TestModalRunnerStartupHooksDoNotRun(t *testing.T) {
	marks := t.TempDir()
	p := guard.Policy{Languages: []string{guard.Python, guard.Shell}}
	check := func(req guard.Request) guard.Checked {
		c, err := p.Check(req, "http")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	probe := runRunner(t, check(guard.Request{Code: startuptest.PycProbe(marks)}))
	in, err := startuptest.ParseProbe(probe.Stdout)
	if err != nil {
		t.Fatalf("%v (stderr %q)", err, probe.Stderr)
	}
	for _, tc := range startuptest.Cases(in, marks) {
		t.Run(tc.Name, func(t *testing.T) {
			c := check(guard.Request{Code: tc.Code, Language: tc.Language, Settings: guard.Settings{Files: tc.Files}})
			for name, value := range tc.Env {
				c.Env = append(c.Env, guard.EnvVar{Name: name, Value: value})
			}
			res := runRunner(t, c)
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
				t.Errorf("hooks ran: %q", ran)
			}
			if string(res.Stdout) != tc.Stdout || strings.Contains(string(res.Stderr), "HOOK") || res.ExitCode != 0 {
				t.Errorf("got exit %d stdout %q stderr %q; want exit 0 and stdout %q", res.ExitCode, res.Stdout, res.Stderr, tc.Stdout)
			}
		})
	}
}
