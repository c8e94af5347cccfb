//go:build integration

package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/agenttest"
)

// follower is a running `starter audit --follow`: its records as they come, with the time each
// line was read.
type follower struct {
	cmd   *exec.Cmd
	lines chan followLine
}

type followLine struct {
	raw string
	rec contract.AuditStreamRecord
	at  time.Time
}

// follow starts the built starter as `starter audit --follow ARGS...` and reads its lines.
func follow(t *testing.T, e *agenttest.Env, args ...string) *follower {
	t.Helper()
	cmd := exec.Command(e.Starter, append([]string{"audit", "--follow", "--settle", "1s"}, args...)...)
	cmd.Env = append(os.Environ(), binaryEnv(e)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &follower{cmd: cmd, lines: make(chan followLine, 100)}
	go func() {
		defer close(f.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			l := followLine{raw: sc.Text(), at: time.Now()}
			if err := json.Unmarshal(sc.Bytes(), &l.rec); err != nil {
				l.rec.Kind = "unreadable: " + err.Error()
			}
			f.lines <- l
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("starter audit --follow %v: stderr: %s", args, stderr.String())
		}
	})
	return f
}

// until reads records until one of kind for workflowID (cell nil) comes, and returns those read.
func (f *follower) until(t *testing.T, workflowID, kind string, timeout time.Duration) []followLine {
	t.Helper()
	var got []followLine
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-f.lines:
			if !ok {
				t.Fatalf("audit --follow ended before a %s record of %s; read %d", kind, workflowID, len(got))
			}
			if strings.HasPrefix(l.rec.Kind, "unreadable") {
				t.Fatalf("audit --follow wrote %q: %s", l.raw, l.rec.Kind)
			}
			got = append(got, l)
			if l.rec.WorkflowID == workflowID && l.rec.Kind == kind {
				return got
			}
		case <-deadline:
			t.Fatalf("no %s record of %s within %s; read %d", kind, workflowID, timeout, len(got))
		}
	}
}

// untilEnds reads records until each of ids has its end record, and returns those read.
func (f *follower) untilEnds(t *testing.T, timeout time.Duration, ids ...string) []followLine {
	t.Helper()
	var got []followLine
	ended := map[string]bool{}
	for len(ended) < len(ids) {
		for _, id := range ids {
			if !ended[id] {
				got = append(got, f.until(t, id, contract.StreamEnd, timeout)...)
				break
			}
		}
		for _, l := range got {
			if l.rec.Kind == contract.StreamEnd {
				ended[l.rec.WorkflowID] = true
			}
		}
	}
	return got
}

// identity is what makes a record the one it is, for comparing two followers.
func identity(l followLine) string {
	return fmt.Sprintf("%s %s %d %s %s", l.rec.WorkflowID, l.rec.RunID, l.rec.EventID, l.rec.Kind, l.rec.Cursor)
}

// Must show (issue 49): starter audit --follow shows a run's records as they happen (its check
// while it waits for a person, its decision and claim while its code runs, then its end), a
// follower killed mid-stream and restarted with the last cursor it wrote gives, with what it
// wrote before, exactly the records of a follower never interrupted (no gap, no repeat), across
// a denied run and one the check refused; and starter audit verify accepts the records, and
// refuses them once a result or a digest in them is changed.
func TestIntegrationAuditFollow(t *testing.T) {
	e := agenttest.Setup(t, agenttest.Options{TaskQueue: "cli"})
	since := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	whole := follow(t, e, "--since", since)
	first := follow(t, e, "--since", since)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	run := func(args ...string) (id, digest string) {
		t.Helper()
		r := binary(t, e, "", append([]string{"run", "--agent", "loop-1"}, args...)...)
		var s struct {
			WorkflowID string `json:"workflow_id"`
			Digest     string `json:"digest"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
			t.Fatalf("starter run: exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		return s.WorkflowID, s.Digest
	}
	running := func(id string) bool {
		d, err := e.Temporal.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}

	slow, digest := run("--code", "import time\ntime.sleep(8)\nprint('slept')\n")
	got := first.until(t, slow, contract.StreamCheck, 30*time.Second)
	check := got[len(got)-1].rec
	if check.Check == nil || check.Check.Digest != digest || check.Agent != "loop-1" || check.Subject != contract.SubjectRun {
		t.Fatalf("check record %+v; want digest %s, agent loop-1, subject run", got[len(got)-1].raw, digest)
	}
	if !running(slow) {
		t.Fatal("the run ended before its check record came: not as it happens")
	}
	if r := binary(t, e, "", "approve", slow, "--digest", digest); r.code != 0 {
		t.Fatalf("starter approve: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	got = append(got, first.until(t, slow, contract.StreamClaim, 30*time.Second)...)
	if !running(slow) {
		t.Fatal("the run's code (8 s) ended before its claim record came: not as it happens")
	}
	var decision *contract.StreamDecisionBody
	for _, l := range got {
		if l.rec.WorkflowID == slow && l.rec.Kind == contract.StreamDecision {
			decision = l.rec.Decision
		}
	}
	if decision == nil || !decision.Accepted || !decision.Judged || !strings.HasPrefix(decision.Fingerprint, "SHA256:") || decision.Reviewer != e.Reviewer.Principal {
		t.Fatalf("decision record %+v; want one accepted, judged, by %s with its key's fingerprint", decision, e.Reviewer.Principal)
	}

	// Kill the follower mid-stream (the run still running), as a crash would.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for l := range first.lines {
		got = append(got, l)
	}
	cursor := got[len(got)-1].rec.Cursor

	denied, _ := run("--code", "print('never')")
	agenttest.Decide(t, e, denied, false)
	refusedID := "refused-" + strings.ReplaceAll(t.Name(), "/", "-")
	if _, err := e.Client.Start(ctx, guard.Request{Code: "puts 1", Language: "ruby"}, client.StartOptions{WorkflowID: refusedID}); err == nil {
		t.Fatal("a request in a language the policy does not offer started")
	}

	resumed := follow(t, e, "--cursor", cursor)
	after := resumed.untilEnds(t, time.Minute, slow, denied, refusedID)
	all := whole.untilEnds(t, time.Minute, slow, denied, refusedID)

	var joined, want []string
	for _, l := range append(got, after...) {
		joined = append(joined, identity(l))
	}
	for _, l := range all {
		want = append(want, identity(l))
	}
	if strings.Join(joined, "\n") != strings.Join(want, "\n") {
		t.Fatalf("killed and resumed follower:\n%s\nuninterrupted follower:\n%s", strings.Join(joined, "\n"), strings.Join(want, "\n"))
	}
	kinds := map[string][]string{}
	for _, l := range all {
		kinds[l.rec.WorkflowID] = append(kinds[l.rec.WorkflowID], l.rec.Kind)
		if l.rec.SchemaVersion != contract.AuditStreamVersion || l.rec.Late {
			t.Errorf("record %s: schema_version %q, late %t", l.raw, l.rec.SchemaVersion, l.rec.Late)
		}
		if err := validateSchema(t, "audit-stream.schema.json", []byte(l.raw)); err != nil {
			t.Errorf("record %s: %v", l.raw, err)
		}
	}
	for id, want := range map[string]string{
		slow:      "check decision claim end",
		denied:    "check decision end",
		refusedID: "refusal end",
	} {
		if got := strings.Join(kinds[id], " "); got != want {
			t.Errorf("records of %s: %s; want %s", id, got, want)
		}
	}
	for _, l := range all {
		if r := l.rec.Refusal; l.rec.WorkflowID == refusedID && l.rec.Kind == contract.StreamRefusal && (r.Stage != "check" || r.Type != guard.TypeToolUsageError) {
			t.Errorf("refusal of the ruby run %+v; want stage check, type %s", r, guard.TypeToolUsageError)
		}
	}
	verifyStream(t, e, all)
	refuseExpiredCursor(t, e, all[len(all)-1].rec.Cursor)
}

// refuseExpiredCursor: a cursor older than the namespace's retention is refused, naming the
// retention, rather than resumed with a gap.
func refuseExpiredCursor(t *testing.T, e *agenttest.Env, cursor string) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	c["t"] = time.Now().AddDate(-1, 0, 0).UTC().Format(time.RFC3339Nano)
	b, _ = json.Marshal(c)
	r := binary(t, e, "", "audit", "--follow", "--cursor", base64.RawURLEncoding.EncodeToString(b))
	if r.code != 1 || !strings.Contains(r.stdout, "older than the namespace's retention") {
		t.Errorf("audit --follow with a cursor of a year ago: exit %d: %s %s; want 1, the retention named", r.code, r.stdout, r.stderr)
	}
}

// verifyStream: starter audit verify accepts the records as written, and refuses them when the
// run's stdout in an end record or a check's digest is changed.
func verifyStream(t *testing.T, e *agenttest.Env, lines []followLine) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.raw + "\n")
	}
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	verify := func(file string) cliResult {
		return binary(t, e, "", "audit", "verify", file, "--reviewers", e.ReviewersFile, "--hosts", e.Host.File)
	}
	verdictOf := func(r cliResult) verdict {
		var v verdict
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("audit verify wrote %q: %v", r.stdout, err)
		}
		return v
	}
	if r := verify(write("stream.jsonl", b.String())); r.code != 0 || !verdictOf(r).OK {
		t.Fatalf("audit verify of the stream: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	for name, edit := range map[string][3]string{
		"stdout": {`"stdout":"slept\n"`, `"stdout":"slapt\n"`, ": result"},
		"digest": {`"check":{"digest":"sha256:`, `"check":{"digest":"sha256:0`, " check "},
	} {
		changed := strings.Replace(b.String(), edit[0], edit[1], 1)
		if changed == b.String() {
			t.Fatalf("%s: the stream holds no %q", name, edit[0])
		}
		r := verify(write(name+".jsonl", changed))
		v := verdictOf(r)
		named := false
		for check := range v.failed() {
			named = named || strings.Contains(check, edit[2])
		}
		if r.code != 1 || v.OK || !named {
			t.Errorf("audit verify with the %s changed: exit %d: %v; want 1 and a failed check naming %q", name, r.code, v.failed(), edit[2])
		}
	}
}
