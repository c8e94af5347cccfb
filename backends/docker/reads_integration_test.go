//go:build integration

package docker

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/pysource"
)

// forged builds a Checked request the way a rogue checker could record it, skipping the policy:
// the digest matches what it holds.
func forged(t *testing.T, code string, files map[string][]byte, env map[string]string) guard.Checked {
	t.Helper()
	c := guard.Checked{Language: guard.Python, Code: code, CheckedSettings: guard.CheckedSettings{
		Backend: Name,
		Limits:  guard.Limits{Timeout: 20 * time.Second, MaxStdoutBytes: 4096, MaxStderrBytes: 4096, MaxFiles: 4, MaxFileBytes: 4096, MaxTotalFileBytes: 16384},
	},
		Owner: guard.Owner{WorkflowID: "test-" + randomHex(6), RunID: t.Name(), ActivityID: "1"}}
	for _, n := range slices.Sorted(maps.Keys(files)) {
		c.Files = append(c.Files, guard.InputFile{Name: n, Content: files[n]})
	}
	for _, n := range slices.Sorted(maps.Keys(env)) {
		c.Env = append(c.Env, guard.EnvVar{Name: n, Value: env[n]})
	}
	c.Digest = guard.Digest(&c)
	return c
}

// escapeModule is an input module whose second line every view draws as one comment; its coding
// declaration makes Python decode the \n in it to a line break, so the print after it is code.
const escapeModule = "# -*- coding: unicode_escape -*-\n# just a comment \\nprint('HIDDEN CODE RAN')\n"

// TestDockerReadsAsRuns: what issue 27's checks refuse is real in the sandbox's Python, and the
// sandbox host refuses it too (guard.Guarded rechecks), so a checker that skipped the policy
// runs nothing. A tab-indented line runs where ShowTabs draws it.
func TestDockerReadsAsRuns(t *testing.T) {
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		// The coding attack, run without the check: the "comment" runs.
		attack := forged(t, "import helper\n", map[string][]byte{"helper.py": []byte(escapeModule)}, nil)
		if res := mustRun(t, b, attack); !strings.Contains(string(res.Stdout), "HIDDEN CODE RAN") {
			t.Fatalf("the attack did not work in the sandbox (stdout %q, stderr %q): the test shows nothing", res.Stdout, res.Stderr)
		}
		// The same through shell code that writes the module from a here-document: the
		// declaration is on the third line of the code, the first of the file Python reads.
		sh := forged(t, "cat > m.py <<'EOF'\n"+escapeModule+"EOF\npython3 m.py\n", nil, nil)
		sh.Language = guard.Shell
		sh.Digest = guard.Digest(&sh)
		if res := mustRun(t, b, sh); !strings.Contains(string(res.Stdout), "HIDDEN CODE RAN") {
			t.Fatalf("the here-document attack did not work in the sandbox (stdout %q, stderr %q)", res.Stdout, res.Stderr)
		}
		shAgain := sh
		shAgain.Owner.WorkflowID = "test-" + randomHex(6)
		// The sandbox host's recheck refuses them and every other forged request, before any
		// container is made.
		guarded := guard.New(b, testPolicy)
		for name, c := range map[string]guard.Checked{
			"coding declaration": forged(t, "import helper\n", map[string][]byte{"helper.py": []byte(escapeModule)}, nil),
			"here-document":      shAgain,
			"PYTHONOPTIMIZE":     forged(t, "assert False, 'checks on'\n", nil, map[string]string{"PYTHONOPTIMIZE": "1"}),
			"mixed indentation":  forged(t, "if False:\n    x = 1\n    \tprint('out')\n", nil, nil),
			"NFC names":          forged(t, "print(1)\n", map[string][]byte{"caf\u00e9.py": nil, "cafe\u0301.py": nil}, nil),
		} {
			_, err := guarded.Run(context.Background(), c)
			if guard.TypeOf(err) != guard.TypeToolUsageError {
				t.Errorf("%s: guarded run: %v; want a ToolUsageError before anything runs", name, err)
			}
			if n := len(containersOf(t, c.Owner.WorkflowID)); n != 0 {
				t.Errorf("%s: %d containers were made for a refused request", name, n)
			}
		}
		// Mixed indentation, where the operator allows it: the line ShowTabs draws at the if's
		// column runs after the if.
		allow := testPolicy
		allow.AllowMixedIndentation = true
		code := "def main(dry_run):\n \t   \tif not dry_run:\n \t   \t    print('DELETED')\n    \t\tprint('LAUNCHED')\nmain(True)\n"
		c, err := allow.Check(guard.Request{Code: code}, Name)
		if err != nil {
			t.Fatal(err)
		}
		c.Owner = guard.Owner{WorkflowID: "test-" + randomHex(6), RunID: t.Name(), ActivityID: "1"}
		lines := strings.Split(code, "\n")
		indent := func(l string) int {
			s := pysource.ShowTabs(l)
			return len([]rune(s)) - len([]rune(strings.TrimLeft(s, " "+pysource.TabMarker)))
		}
		if indent(lines[3]) != indent(lines[1]) {
			t.Fatalf("ShowTabs draws the launch at %d, the if at %d", indent(lines[3]), indent(lines[1]))
		}
		res, err := guard.New(b, allow).Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Stdout) != "LAUNCHED\n" {
			t.Errorf("stdout %q; want only LAUNCHED (drawn, and run, after the if)", res.Stdout)
		}
	})
}

// TestDockerReadsAsRunsShellVariants: shell code that a reviewer reads as writing and running a
// harmless Python file, where sh or the file's later coding declaration makes Python run code
// the views draw as part of a string or as dead code. Each runs unchecked in the sandbox to show
// the attack is real, and the sandbox host's recheck refuses it before any container is made.
func TestDockerReadsAsRunsShellVariants(t *testing.T) {
	attacks := map[string]string{
		// shift_jis reads the UTF-8 bytes of "Á" and the backslash after them as two
		// characters, so the \" every view draws inside the string ends it.
		"shift_jis on line 3": "echo start\ncat > m.py <<'EOF'\n# coding: shift_jis\nlabel = \"\u00c1\\\"; print('HIDDEN CODE RAN') #\"\nprint('label', label)\nEOF\npython3 m.py\n",
		// gbk, the same with a character whose last byte starts a two-byte GBK character.
		"gbk on line 3": "echo start\ncat > m.py <<'EOF'\n# coding: gbk\nlabel = \"\u0801\\\"; print('HIDDEN CODE RAN') #\"\nprint('label', label)\nEOF\npython3 m.py\n",
		// hz removes "~" and the line end after it: the line that sets dry_run back to True
		// joins the comment above it.
		"hz on line 3": "echo start\ncat > m.py <<'EOF'\n# coding: hz\ndry_run = False\n# for this review, a dry run: ~\ndry_run = True\nif not dry_run:\n    print('HIDDEN CODE RAN')\nEOF\npython3 m.py\n",
		// <<- removes the leading tabs of the here-document: the print the views draw at
		// column 8, in the if's body after pass, runs at column 0, after the if.
		// sh passes a lone carriage return and a form feed on; Python ends the line at the
		// one (the print drawn in a comment runs) and resets its column at the other (the
		// print drawn in the if's body runs after it).
		"a carriage return in a here-document": "python3 - <<'EOF'\n# a note\rprint('HIDDEN CODE RAN')\nEOF\n",
		"a carriage return in python3 -c":      "python3 -c \"# a note\rprint('HIDDEN CODE RAN')\"\n",
		"a form feed in a here-document":       "python3 - <<'EOF'\nif False:\n    x = 1\n    \fprint('HIDDEN CODE RAN')\nEOF\n",
		"tabs in <<-":                          "python3 - <<-EOF\nif False:\n        pass\n\tprint('HIDDEN CODE RAN')\nEOF\n",
		// An unquoted delimiter: sh joins a line ending in a backslash to the next, so the line
		// that sets dry_run back joins the comment above it.
		// <<\ with EOF on the next line is <<EOF, unquoted: sh removes the backslash and the
		// line end before it reads the word.
		"a backslash ending a comment, the delimiter on the next line": "python3 - <<\\\nEOF\ndry_run = False\n# for this review, a dry run \\\ndry_run = True\nif not dry_run:\n    print('HIDDEN CODE RAN')\nEOF\n",
		// "<<\" and "-EOF" on the next line are <<-EOF to sh, which strips the tab.
		"<<- broken after <<": "python3 - <<\\\n-EOF\nif False:\n        pass\n\tprint('HIDDEN CODE RAN')\nEOF\n",
		// "<\" and "<EOF" on the next line are one <<EOF operator to sh.
		"an operator broken across lines": "python3 - <\\\n<EOF\ndry_run = False\n# for this review, a dry run \\\ndry_run = True\nif not dry_run:\n    print('HIDDEN CODE RAN')\nEOF\n",
		"a backslash ending a comment":    "python3 - <<EOF\ndry_run = False\n# for this review, a dry run \\\ndry_run = True\nif not dry_run:\n    print('HIDDEN CODE RAN')\nEOF\n",
		// sh reads the \\ drawn before \" as one backslash, which escapes the quote no more: the
		// string ends there and the print after it is code.
		"an escaped backslash before a quote": "python3 - <<EOF\nlabel = \"C:\\\\\\\"; print('HIDDEN CODE RAN') #\"\nprint('label', label)\nEOF\n",
	}
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		guarded := guard.New(b, testPolicy)
		for _, name := range slices.Sorted(maps.Keys(attacks)) {
			sh := forged(t, attacks[name], nil, nil)
			sh.Language = guard.Shell
			sh.Digest = guard.Digest(&sh)
			if res := mustRun(t, b, sh); !strings.Contains(string(res.Stdout), "HIDDEN CODE RAN") {
				t.Fatalf("%s: the attack did not work in the sandbox (stdout %q, stderr %q): the test shows nothing", name, res.Stdout, res.Stderr)
			}
			sh.Owner.WorkflowID = "test-" + randomHex(6)
			_, err := guarded.Run(context.Background(), sh)
			if guard.TypeOf(err) != guard.TypeToolUsageError {
				t.Errorf("%s: guarded run: %v; want a ToolUsageError before anything runs", name, err)
			}
			if n := len(containersOf(t, sh.Owner.WorkflowID)); n != 0 {
				t.Errorf("%s: %d containers were made for a refused request", name, n)
			}
		}
	})
}

// TestDockerReadsAsRunsTextInputs: an input file with no Python name that the code runs as Python
// (exec of its text, runpy.run_path): a lone carriage return, drawn as a \r inside one comment
// line by every view, ends the line for Python, so the print after it runs; a form feed in the
// indentation moves a line out of an if. Each runs unchecked in the sandbox, and the sandbox host
// refuses it.
func TestDockerReadsAsRunsTextInputs(t *testing.T) {
	inputs := []map[string][]byte{
		{"notes.txt": []byte("# a harmless note\rprint('HIDDEN CODE RAN')\n")},
		// A form feed in the indentation: Python resets its column there, so the print drawn
		// in the if's body runs after it.
		{"notes.txt": []byte("if False:\n    x = 1\n    \fprint('HIDDEN CODE RAN')\n")},
	}
	eachRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		guarded := guard.New(b, testPolicy)
		for i, code := range []string{"exec(open('notes.txt').read())\n", "import runpy\nrunpy.run_path('notes.txt')\n", "exec(open('notes.txt').read())\n"} {
			attack := forged(t, code, inputs[i/2], nil)
			if res := mustRun(t, b, attack); !strings.Contains(string(res.Stdout), "HIDDEN CODE RAN") {
				t.Fatalf("%q: the attack did not work in the sandbox (stdout %q, stderr %q): the test shows nothing", code, res.Stdout, res.Stderr)
			}
			attack.Owner.WorkflowID = "test-" + randomHex(6)
			if _, err := guarded.Run(context.Background(), attack); guard.TypeOf(err) != guard.TypeToolUsageError {
				t.Errorf("%q: guarded run: %v; want a ToolUsageError before anything runs", code, err)
			}
			if n := len(containersOf(t, attack.Owner.WorkflowID)); n != 0 {
				t.Errorf("%q: %d containers were made for a refused request", code, n)
			}
		}
	})
}
