package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// wrapAttack is code whose sixth line, padded with spaces to the width of an 80-column terminal
// (after "6 | "), goes on with "  |     delete()": left to the terminal, that tail starts a row of
// its own and reads as a line of the if's body, drawn under its print. Python runs it on line 6,
// after the if: x = 0 | delete().
var wrapAttack = "import os\n" +
	"def delete(): print('DELETED'); return 0\n" +
	"dry_run = True\n" +
	"if not dry_run:\n" +
	"    print('about to delete')\n" +
	"x = 0" + strings.Repeat(" ", 80-len("6 | ")-len("x = 0")) + "  |     delete()\n" +
	// Wide characters: 45 of them fill 90 columns, which a terminal breaks where a count of
	// characters would not.
	"s = '" + strings.Repeat("\uff58", 45) + "'\n"

// TestShowHelperProcess is not a test: TestShowInTerminal runs the test binary as this, in a
// tmux pane, so that printReview writes to a real terminal.
func TestShowHelperProcess(t *testing.T) {
	if os.Getenv("SANDBOXFLOW_SHOW_HELPER") != "1" {
		t.Skip("run by TestShowInTerminal")
	}
	r := client.Review{WorkflowID: "sandbox-1", Status: contract.Status{Request: guard.Summary{
		Language: guard.Python, Code: wrapAttack, CodeBytes: len(wrapAttack), Backend: "docker", Digest: "sha256:" + strings.Repeat("ab", 32),
	}}}
	if err := printReview(os.Stdout, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("END OF SHOW")
}

// TestShowInTerminal: starter show's output in a real terminal (tmux, 80 and 60 columns wide, as
// capture-pane reads the screen) never has a row of code without its line number or the
// continued-line marker, so the padded tail of wrapAttack's line 6 cannot pass for a line of the
// if's body; and the attack is real (python3 prints DELETED with dry_run True).
func TestShowInTerminal(t *testing.T) {
	need.Need(t, need.Tmux, need.Python3)
	if out, err := exec.Command("python3", "-c", wrapAttack).CombinedOutput(); err != nil || !strings.Contains(string(out), "DELETED") {
		t.Fatalf("python3 ran the attack: %v, %q; want DELETED: the test shows nothing", err, out)
	}
	row := regexp.MustCompile(`^ *([0-9]+|` + ContinuedMarker + `) \| `)
	for _, cols := range []int{80, 60} {
		screen := tmuxShow(t, cols)
		rows := strings.Split(screen, "\n")
		start := -1
		for i, r := range rows {
			if r == "code:" {
				start = i + 1
			}
		}
		if start < 0 {
			t.Fatalf("%d columns: no code section on the screen:\n%s", cols, screen)
		}
		var code []string
		for _, r := range rows[start:] {
			if strings.HasPrefix(r, "(") || strings.HasPrefix(r, "END OF SHOW") {
				break
			}
			code = append(code, r)
			if !row.MatchString(r) {
				t.Errorf("%d columns: the row %q has neither a line number nor %s:\n%s", cols, r, ContinuedMarker, screen)
			}
		}
		for _, r := range code {
			if strings.Contains(r, "delete()") && !strings.Contains(r, "def delete") && !strings.HasPrefix(strings.TrimLeft(r, " "), ContinuedMarker) && !strings.HasPrefix(r, "6 | ") {
				t.Errorf("%d columns: the call to delete() is on a row of its own, not marked as line 6 going on: %q\n%s", cols, r, screen)
			}
		}
		if !strings.Contains(screen, ContinuedMarker+" continues the line above") {
			t.Errorf("%d columns: the view does not say what %s is:\n%s", cols, ContinuedMarker, screen)
		}
	}
}

// tmuxShow runs TestShowHelperProcess in a detached tmux session cols columns wide, with a
// server of its own, and returns the screen once it has written everything.
func tmuxShow(t *testing.T, cols int) string {
	t.Helper()
	sock := fmt.Sprintf("sandboxflow-test-%d-%d", os.Getpid(), cols)
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-L", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		return string(out), err
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := fmt.Sprintf("env SANDBOXFLOW_SHOW_HELPER=1 COLUMNS= %s -test.run='^TestShowHelperProcess$'; sleep 60", self)
	if out, err := tmux("new-session", "-d", "-x", fmt.Sprint(cols), "-y", "60", "-s", "show", cmd); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = tmux("kill-server") })
	deadline := time.Now().Add(20 * time.Second)
	for {
		screen, err := tmux("capture-pane", "-p", "-t", "show")
		if err != nil {
			t.Fatalf("tmux capture-pane: %v: %s", err, screen)
		}
		if strings.Contains(screen, "END OF SHOW") {
			return screen
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d columns: the helper did not finish:\n%s", cols, screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
