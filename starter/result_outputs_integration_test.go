//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/httpservice"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// hostileStdout is what the code prints: a screen clear, a window title, a colour, a bell and a
// carriage return that would let "ALL TESTS PASSED" overwrite the failure before it.
const hostileStdout = "3 tests FAILED\x1b[2J\x1b]0;pwned\x07\x1b[32m\rALL TESTS PASSED\n"

// outputsEnv is a server and a worker whose backend answers every run with hostileStdout, a
// produced file and outputs: a 3×2 PNG figure (with its text representation), a table and a
// text output that holds an escape sequence too. It returns the env and an approved run's id.
func outputsEnv(t *testing.T) (*agenttest.Env, string) {
	t.Helper()
	var pngBytes bytes.Buffer
	if err := png.Encode(&pngBytes, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	table := `{"columns":["a","b"],"rows":[["1","2"],["3","\u001b[31m4"]]}`
	b, err := httpservice.New("outputs", func(ctx context.Context, c guard.Checked) (guard.Result, error) {
		return guard.Result{ExitCode: 0, Stdout: []byte(hostileStdout),
			Files: []guard.File{{Name: "report.txt", Content: []byte("a report\n")}},
			Outputs: []guard.Output{
				{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEPNG, Data: pngBytes.Bytes()},
				{Index: 1, Source: guard.OutputFigure, MIME: guard.MIMEText, Data: []byte("<Figure size 3x2>")},
				{Index: 2, Source: guard.OutputDisplay, MIME: guard.MIMETable, Data: []byte(table)},
				{Index: 3, Source: guard.OutputValue, MIME: guard.MIMEText, Data: []byte("value\x1b[8m hidden\n")},
			}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e := agenttest.Setup(t, agenttest.Options{Backend: b, Policy: &guard.Policy{ApprovalTimeout: time.Hour}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started, err := e.Client.Start(ctx, guard.Request{Code: "print(1)"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Decide(t, e, started.WorkflowID, true)
	return e, started.WorkflowID
}

// TestIntegrationResultJSONAndOut: starter result, its stdout a pipe, prints the one JSON
// document it always printed (outputs included), with --json too; --out DIR writes the file
// and the outputs and names them on stderr, stdout still the JSON; a symlink planted in DIR
// where a file goes is refused, and what it points to is untouched.
func TestIntegrationResultJSONAndOut(t *testing.T) {
	e, id := outputsEnv(t)
	want, err := e.Client.Result(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"result", id}, {"result", id, "--json"}} {
		r := binary(t, e, "", args...)
		var got guard.Result
		if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil {
			t.Fatalf("%v: exit %d, %v: %s %s", args, r.code, err, r.stdout, r.stderr)
		}
		if len(got.Outputs) != 4 || !bytes.Equal(got.Outputs[0].Data, want.Outputs[0].Data) || string(got.Stdout) != hostileStdout {
			t.Errorf("%v: outputs %+v, stdout %q; want the result as JSON, outputs with their data", args, got.Outputs, got.Stdout)
		}
	}

	dir := filepath.Join(t.TempDir(), "out")
	r := binary(t, e, "", "result", id, "--out", dir)
	if r.code != 0 || !json.Valid([]byte(r.stdout)) {
		t.Fatalf("--out: exit %d, stdout %s, stderr %s", r.code, r.stdout, r.stderr)
	}
	for name, content := range map[string][]byte{"report.txt": []byte("a report\n"), "output-1-1.png": want.Outputs[0].Data,
		"output-1-2.txt": want.Outputs[1].Data, "output-2-1.table.json": want.Outputs[2].Data, "output-3-1.txt": want.Outputs[3].Data} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, content) {
			t.Errorf("--out: %s holds %q, %v; want %q", name, b, err, content)
		}
		if !strings.Contains(r.stderr, "wrote "+dir+"/"+name) {
			t.Errorf("--out: stderr does not name %s:\n%s", name, r.stderr)
		}
	}
	if r := binary(t, e, "", "result", id, "--out", dir); r.code != 1 || !strings.Contains(r.stdout, "--force") {
		t.Errorf("--out again: exit %d, %s; want 1 and a refusal naming --force", r.code, r.stdout)
	}

	hostile := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(hostile, "report.txt")); err != nil {
		t.Fatal(err)
	}
	r = binary(t, e, "", "result", id, "--out", hostile, "--force")
	if r.code != 1 || r.errorType(t) == "" || !strings.Contains(r.stdout, "symlink") {
		t.Errorf("--out into a folder with a planted symlink: exit %d, %s; want 1 and a refusal naming the symlink", r.code, r.stdout)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the symlink's target holds %q; want it untouched", b)
	}
}

// TestIntegrationResultInTerminal runs starter result in a real terminal (tmux): the screen shows
// the summary, with the code's escape sequences drawn as text; the bytes the starter wrote to the
// terminal (tmux pipe-pane) hold no escape byte, no bell. With --json, the terminal gets JSON.
func TestIntegrationResultInTerminal(t *testing.T) {
	need.Need(t, need.Tmux)
	e, id := outputsEnv(t)
	env := fmt.Sprintf("env TEMPORAL_ADDRESS=%s TEMPORAL_NAMESPACE=%s SANDBOXFLOW_TASK_QUEUE=%s SANDBOXFLOW_KEY_FILE= SANDBOXFLOW_HOSTS=%s COLUMNS=",
		e.Address, e.Namespace, e.TaskQueue, e.Host.File)
	screen, raw := tmuxRun(t, "summary", env+" "+e.Starter+" result "+id)
	if strings.ContainsAny(raw, "\x1b\x07") {
		t.Errorf("the starter wrote an escape or a bell to the terminal: %q", raw)
	}
	for _, want := range []string{
		`1 | 3 tests FAILED\x1b[2J\x1b]0;pwned\x07\x1b[32m\rALL TESTS PASSED`,
		"outcome",
		"succeeded, exit code 0 (measured by the sandbox host)",
		"by " + e.Reviewer.Principal,
		"signed by host " + e.Host.Name,
		"verified against the hosts file " + e.Host.File,
		"report.txt, 9 B",
		"figure, image/png, ",
		"table, 2 rows × 2 columns",
		`1 | value\x1b[8m hidden`,
		"wait for a person ", ", sandbox start ", ", run ", ", receipt ", // where the time went
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("the screen lacks %q:\n%s", want, screen)
		}
	}
	// Without a hosts file, the receipt verifies against the hosts the run's check recorded.
	recorded := strings.Replace(env, "SANDBOXFLOW_HOSTS="+e.Host.File, "SANDBOXFLOW_HOSTS=", 1)
	screen, _ = tmuxRun(t, "recorded", recorded+" "+e.Starter+" result "+id)
	if want := "signed by host " + e.Host.Name; !strings.Contains(screen, want) || !strings.Contains(screen, "verified against the hosts the run's check recorded") {
		t.Errorf("result without a hosts file:\n%s\nwant %q, verified against the hosts the check recorded", screen, want)
	}
	screen, _ = tmuxRun(t, "json", env+" "+e.Starter+" result "+id+" --json")
	if !strings.Contains(screen, `"outputs":`) || strings.Contains(screen, "signed by host") {
		t.Errorf("result --json on a terminal:\n%s\nwant JSON", screen)
	}
}

// tmuxRun runs the shell command line in a detached tmux session of its own, 200 columns wide,
// records every byte the pane's program writes (pipe-pane), and returns the screen with its
// history and those bytes once the command ended.
func tmuxRun(t *testing.T, name, line string) (screen, raw string) {
	t.Helper()
	sock := fmt.Sprintf("sandboxflow-result-%d-%s", os.Getpid(), name)
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-L", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		return string(out), err
	}
	rawFile := filepath.Join(t.TempDir(), "raw")
	// The pause lets pipe-pane attach before the starter writes.
	cmd := fmt.Sprintf("sleep 1; %s; echo END-OF-RESULT; sleep 60", line)
	if out, err := tmux("new-session", "-d", "-x", "200", "-y", "60", "-s", name, cmd); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = tmux("kill-server") })
	if out, err := tmux("pipe-pane", "-o", "-t", name, "cat > "+rawFile); err != nil {
		t.Fatalf("tmux pipe-pane: %v: %s", err, out)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		screen, err := tmux("capture-pane", "-p", "-S", "-", "-t", name)
		if err != nil {
			t.Fatalf("tmux capture-pane: %v: %s", err, screen)
		}
		if strings.Contains(screen, "END-OF-RESULT") {
			b, err := os.ReadFile(rawFile)
			if err != nil || !strings.Contains(string(b), "END-OF-RESULT") {
				t.Fatalf("pipe-pane recorded %q, %v", b, err)
			}
			return screen, string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("starter result did not end in the terminal:\n%s", screen)
		}
	}
}

// imgCode is Python (standard library only) that prints a colour escape and shows a 4×3 grey PNG
// through the runtime's display(), with its repr beside it.
const imgCode = `import struct, zlib
def png(w, h):
    raw = b"".join(b"\x00" + b"\x80" * w for _ in range(h))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
class Img:
    def _repr_png_(self):
        return png(4, 3)
    def __repr__(self):
        return "Img(4, 3)"
print("\x1b[31mred")
display(Img())
`

// TestIntegrationResultOutDockerOutputs: with the real Docker backend, what the code shows
// through the runtime's display() reaches `starter result --out` as files: the PNG (4×3, as
// image/png decodes it) and its repr as text.
func TestIntegrationResultOutDockerOutputs(t *testing.T) {
	e, _ := cancelEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started, err := e.Client.Start(ctx, guard.Request{Code: imgCode}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Decide(t, e, started.WorkflowID, true)
	dir := t.TempDir()
	r := binary(t, e, "", "result", started.WorkflowID, "--out", dir)
	var res guard.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || !res.OK {
		t.Fatalf("result --out: exit %d, %v: %s %s", r.code, err, r.stdout, r.stderr)
	}
	f, err := os.Open(filepath.Join(dir, "output-1-1.png"))
	if err != nil {
		t.Fatalf("%v; outputs %+v, stderr %s", err, res.Outputs, r.stderr)
	}
	defer f.Close()
	if cfg, err := png.DecodeConfig(f); err != nil || cfg.Width != 4 || cfg.Height != 3 {
		t.Errorf("output-1-1.png decodes to %+v, %v; want 4×3", cfg, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "output-1-2.txt")); err != nil || string(b) != "Img(4, 3)" {
		t.Errorf("output-1-2.txt holds %q, %v; want the repr", b, err)
	}
}
