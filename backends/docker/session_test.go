package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// fakeSession is a checked session with an owner, as the SessionOpen activity passes it.
func fakeSession(t *testing.T, mod func(*guard.SessionRequest)) guard.CheckedSession {
	t.Helper()
	req := guard.SessionRequest{Settings: guard.Settings{Limits: guard.Limits{Timeout: time.Second}}}
	if mod != nil {
		mod(&req)
	}
	p := guard.Policy{Languages: []string{guard.Python, guard.Shell}, AllowOpenNetwork: true, EgressAllow: []string{"example.com"}, SecretNames: []string{"tok"}}
	cs, err := p.CheckSession(req, Name)
	if err != nil {
		t.Fatal(err)
	}
	cs.Owner = guard.Owner{WorkflowID: "wf-1", RunID: "run-1", ActivityID: "open"}
	return cs
}

// OpenSession's failures are typed as Run's, and none says the code may have started: no cell
// was sent. Whatever was created is removed.
func TestOpenSessionErrorPaths(t *testing.T) {
	boom := errors.New("boom")
	ready := encodeFrame(frameReady, 0, []byte("{}"))
	tests := []struct {
		name        string
		setup       func(f *fakeEngine)
		mod         func(*guard.SessionRequest)
		wantType    string
		wantInMsg   string
		wantCreated int
	}{
		{"secrets without the worker's secrets file", nil, func(r *guard.SessionRequest) { r.Egress = []string{"example.com"}; r.Secrets = []string{"tok"} }, guard.TypeConfigError, "secrets", 0},
		{"native module among the inputs", nil, func(r *guard.SessionRequest) { r.Files = map[string][]byte{"m.so": nil} }, guard.TypeToolUsageError, "native extension", 0},
		{"image missing", func(f *fakeEngine) { f.imagePresent = false }, nil, guard.TypeConfigError, "docker pull", 0},
		{"create fails", func(f *fakeEngine) { f.createErr = boom }, nil, guard.TypeIntegrationError, "create container", 0},
		{"attach fails", func(f *fakeEngine) { f.attachErr = boom }, nil, guard.TypeIntegrationError, "attach session container", 1},
		{"start fails", func(f *fakeEngine) { f.startErr = boom; f.stdout = ready }, nil, guard.TypeIntegrationError, "start session container", 1},
		{"request written in part", func(f *fakeEngine) { f.writeN = 3; f.writeErr = boom; f.hang = true }, nil, guard.TypeIntegrationError, "write session request", 1},
		{"image without ctypes", func(f *fakeEngine) {
			f.stdout = append(encodeFrame(frameConfigError, 0, []byte("no ctypes")), encodeFrame(frameEnd, 0, []byte("{}"))...)
		}, nil, guard.TypeConfigError, "no ctypes", 1},
		{"supervisor fails", func(f *fakeEngine) {
			f.stdout = append(encodeFrame(frameError, 0, []byte("bad request")), encodeFrame(frameEnd, 0, []byte("{}"))...)
		}, nil, guard.TypeIntegrationError, "bad request", 1},
		{"output ends before ready", func(f *fakeEngine) {}, nil, guard.TypeIntegrationError, "before it was ready", 1},
		{"a cell's end instead of ready", func(f *fakeEngine) { f.stdout = encodeFrame(frameCellEnd, 0, []byte("{}")) }, nil, guard.TypeIntegrationError, "out of place", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			if tt.setup != nil {
				tt.setup(f)
			}
			b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full"})
			sb, err := b.OpenSession(context.Background(), fakeSession(t, tt.mod))
			if err == nil {
				sb.Close(context.Background())
				t.Fatal("open: got a sandbox; want an error")
			}
			if got := guard.TypeOf(err); got != tt.wantType || !strings.Contains(err.Error(), tt.wantInMsg) {
				t.Errorf("got %s %v; want %s containing %q", got, err, tt.wantType, tt.wantInMsg)
			}
			var ie *guard.IntegrationError
			if errors.As(err, &ie) && ie.CodeMayHaveStarted {
				t.Errorf("got CodeMayHaveStarted on %v; no cell was sent", err)
			}
			if len(f.created) != tt.wantCreated || len(f.removedIDs()) != tt.wantCreated {
				t.Errorf("created %d, removed %v; want %d of each", len(f.created), f.removedIDs(), tt.wantCreated)
			}
		})
	}
}

// A session's container is a run's, cold, with the session's labels; once its output ends, Done
// fires and a cell gets a SandboxLost without anything written.
func TestOpenSessionSpecAndLost(t *testing.T) {
	f := newFake()
	f.stdout = encodeFrame(frameReady, 0, []byte("{}"))
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full", WarmSandboxes: 0})
	cs := fakeSession(t, func(r *guard.SessionRequest) { r.Env = map[string]string{"A": "b"} })
	sb, err := b.OpenSession(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	spec := f.created[0]
	runSpec := b.spec(&guard.Checked{}, &sandbox{uid: 1}, engineVersion{})
	if spec.NetworkMode != "none" || !spec.ReadonlyRootfs || spec.SecurityOpt[1] != runSpec.SecurityOpt[1] || spec.PidsLimit != runSpec.PidsLimit || spec.MemoryBytes != runSpec.MemoryBytes {
		t.Errorf("session container spec %+v is not a run's", spec)
	}
	for k, want := range map[string]string{LabelSession: "wf-1", LabelWorkflowID: "wf-1", LabelRunID: "run-1", LabelDigest: cs.Digest, LabelManaged: "true"} {
		if spec.Labels[k] != want {
			t.Errorf("label %s: got %q; want %q", k, spec.Labels[k], want)
		}
	}
	if !strings.Contains(string(f.stdin), `"env":[{"name":"QQ==","value":"Yg=="}]`) || strings.Contains(string(f.stdin), `"code"`) {
		t.Errorf("session request: %q; want the env and no code", f.stdin)
	}
	select {
	case <-sb.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not fire after the output ended")
	}
	sent := len(f.stdin)
	cell, err := (guard.Policy{Languages: []string{guard.Python, guard.Shell}}).CheckCell(cs, 1, guard.Python, "print(1)")
	if err != nil {
		t.Fatal(err)
	}
	var lost *guard.SandboxLost
	if _, err := sb.RunCell(context.Background(), cell, cs.Limits); !errors.As(err, &lost) {
		t.Errorf("cell after the end: got %v; want a SandboxLost", err)
	}
	if len(f.stdin) != sent {
		t.Errorf("a cell was written to a lost sandbox: %q", f.stdin[sent:])
	}
	if err := sb.Close(context.Background()); err != nil || sb.Close(context.Background()) != nil {
		t.Errorf("close: %v", err)
	}
	if got := f.removedIDs(); len(got) != 1 || got[0] != sb.ID() {
		t.Errorf("removed %v; want the session's container once", got)
	}
}

// Sessions and runs share Config.MaxSandboxes: a run waits while a session holds the only one.
func TestSessionsCountAgainstMaxSandboxes(t *testing.T) {
	f := newFake()
	f.stdout = encodeFrame(frameReady, 0, []byte("{}"))
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full", MaxSandboxes: 1})
	sb, err := b.OpenSession(context.Background(), fakeSession(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := b.OpenSession(ctx, fakeSession(t, nil)); guard.TypeOf(err) != guard.TypeIntegrationError || !strings.Contains(err.Error(), "all 1 in use") {
		t.Errorf("second session: got %v; want a retryable IntegrationError", err)
	}
	if len(f.created) != 1 {
		t.Errorf("created %d containers; want 1", len(f.created))
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	sb, err = b.OpenSession(context.Background(), fakeSession(t, nil))
	if err != nil {
		t.Fatalf("session after the first closed: %v", err)
	}
	sb.Close(context.Background())
}

// Reap asks SessionEnded for a session's container whatever its age, and without the hook takes
// one only past the session lifetime plus the threshold.
func TestReapSessions(t *testing.T) {
	now := time.Now()
	session := func(id, wf string, age time.Duration) containerSummary {
		return containerSummary{ID: id, Created: now.Add(-age), Labels: map[string]string{LabelSession: wf, LabelRunID: "r-" + wf}}
	}
	f := newFake()
	f.list = []containerSummary{
		session("ended", "wf-ended", time.Second),
		session("live", "wf-live", 50*time.Hour),
		session("unknown", "wf-unknown", 50*time.Hour),
		{ID: "old-run", Created: now.Add(-2 * time.Hour)},
	}
	var asked []string
	b := fakeBackend(t, f, Config{SessionEnded: func(_ context.Context, wf, run string) (bool, error) {
		asked = append(asked, wf+"/"+run)
		switch wf {
		case "wf-ended":
			return true, nil
		case "wf-unknown":
			return false, fmt.Errorf("temporal unreachable")
		}
		return false, nil
	}})
	n, err := b.Reap(context.Background(), time.Hour)
	if n != 2 || err == nil || !strings.Contains(err.Error(), "temporal unreachable") {
		t.Errorf("reap: got %d, %v; want 2 and the hook's error", n, err)
	}
	if got := strings.Join(f.removedIDs(), ","); got != "ended,old-run" {
		t.Errorf("removed %s; want ended,old-run", got)
	}
	if strings.Join(asked, ",") != "wf-ended/r-wf-ended,wf-live/r-wf-live,wf-unknown/r-wf-unknown" {
		t.Errorf("asked %v", asked)
	}

	f = newFake()
	f.list = []containerSummary{session("young", "a", 90*time.Minute), session("old", "b", 2*time.Hour+time.Second)}
	b = fakeBackend(t, f, Config{})
	if n, err := b.Reap(context.Background(), time.Hour); n != 1 || err != nil {
		t.Errorf("reap without the hook: got %d, %v; want 1", n, err)
	}
	if got := strings.Join(f.removedIDs(), ","); got != "old" {
		t.Errorf("removed %s; want old (past the 1 h lifetime plus the 1 h threshold)", got)
	}
}

// A session with egress tells the supervisor to listen for the whole session and gives every
// cell the proxy's environment.
func TestOpenSessionWithEgress(t *testing.T) {
	f := newFake()
	f.stdout = encodeFrame(frameReady, 0, []byte("{}"))
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full"})
	sb, err := b.OpenSession(context.Background(), fakeSession(t, func(r *guard.SessionRequest) { r.Egress = []string{"example.com"} }))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	if s := string(f.stdin); !strings.Contains(s, `"egress_port":3128`) || !strings.Contains(s, `"name":"SFRUUFNfUFJPWFk="`) {
		t.Errorf("session request %q: want the egress port and HTTPS_PROXY", s)
	}
	if f.created[0].NetworkMode != "none" {
		t.Errorf("network %q; want none (egress goes through the supervisor's relay)", f.created[0].NetworkMode)
	}
}

// replyingFake is a fake whose container answers the session request with ready, then each
// cell with the next of cells.
func replyingFake(cells ...[]byte) *fakeEngine {
	f := newFake()
	f.replies = append([][]byte{encodeFrame(frameReady, 0, []byte("{}"))}, cells...)
	f.replyCh = make(chan []byte, len(f.replies))
	return f
}

// cellReply is what a supervisor writes for a cell: output, an exit report, files, the end.
func cellReply(stdout string, exit string, files ...string) []byte {
	out := encodeFrame(frameStdout, 0, []byte(stdout))
	out = append(out, encodeFrame(frameExit, 0, []byte(exit))...)
	for _, name := range files {
		out = append(out, encodeFrame(frameFile, 0, append([]byte{0, byte(len(name))}, name+"-content"...))...)
	}
	return append(out, encodeFrame(frameCellEnd, 0, []byte(`{"files_truncated":false}`))...)
}

// The worker treats every frame of a cell as untrusted: what it cannot read is an
// IntegrationError that says the code may have started, and the sandbox is lost after it.
func TestRunCellUntrustedStream(t *testing.T) {
	ok := cellReply("hi\n", `{"exit_code":0}`)
	tests := []struct {
		name  string
		reply []byte
		want  string // "" for a result
	}{
		{"a good cell", ok, ""},
		{"unframed bytes", []byte("forged output"), "frame of"},
		{"a cell end without an exit report", encodeFrame(frameCellEnd, 0, []byte("{}")), "without an exit report"},
		{"two cell ends", append(append([]byte(nil), ok...), ok...), "after its end frame"},
		{"output after the cell end", append(append([]byte(nil), ok...), encodeFrame(frameStdout, 0, []byte("late"))...), "after its end frame"},
		{"a run's end frame", encodeFrame(frameEnd, 0, []byte("{}")), "without an exit report"},
		{"ready again", encodeFrame(frameReady, 0, []byte("{}")), "out of place"},
		{"a tunnel frame without egress", encodeFrame(frameTunnelOpen, 3, nil), "no channel is open"},
		{"a supervisor error", append(encodeFrame(frameError, 0, []byte("broken")), encodeFrame(frameEnd, 0, []byte("{}"))...), "broken"},
		{"more than the result bound", encodeFrame(frameStdout, 0, make([]byte, 200<<10)), "over the result bound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := replyingFake(tt.reply)
			b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full"})
			cs := fakeSession(t, nil)
			sb, err := b.OpenSession(context.Background(), cs)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(context.Background())
			p := guard.Policy{Languages: []string{guard.Python, guard.Shell}}
			cell, err := p.CheckCell(cs, 1, guard.Python, "print(1)")
			if err != nil {
				t.Fatal(err)
			}
			l := cs.Limits
			l.MaxStdoutBytes, l.MaxStderrBytes, l.MaxTotalFileBytes, l.MaxFiles = 1000, 1000, 1000, 2
			l.MaxOutputs, l.MaxOutputBytes, l.MaxTotalOutputBytes = 1, 1000, 1000
			res, err := sb.RunCell(context.Background(), cell, l)
			if tt.want == "" {
				if err != nil || string(res.Stdout) != "hi\n" || !res.OK {
					t.Fatalf("got %+v, %v; want the cell's result", res, err)
				}
				return
			}
			var ie *guard.IntegrationError
			if !errors.As(err, &ie) || !ie.CodeMayHaveStarted || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %+v, %v; want an IntegrationError with CodeMayHaveStarted containing %q", res, err, tt.want)
			}
			cell2, _ := p.CheckCell(cs, 2, guard.Python, "print(2)")
			var lost *guard.SandboxLost
			if _, err := sb.RunCell(context.Background(), cell2, l); !errors.As(err, &lost) {
				t.Errorf("next cell: got %v; want a SandboxLost", err)
			}
			if len(f.killed) == 0 {
				t.Errorf("the container was not killed")
			}
		})
	}
}

// A cell's result is the supervisor's report with the cell's limits applied: state_reset, the
// files, output over the cap cut; a supervisor that does not report within timeout + slack is
// killed and the cell is a timeout, after which the session is lost.
func TestRunCellResultAndDeadline(t *testing.T) {
	f := replyingFake(cellReply(strings.Repeat("x", 50), `{"exit_code":3,"state_reset":true}`, "a.txt", "b.txt", "c.txt"))
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full"})
	cs := fakeSession(t, nil)
	sb, err := b.OpenSession(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	p := guard.Policy{Languages: []string{guard.Python, guard.Shell}}
	cell, _ := p.CheckCell(cs, 1, guard.Python, "print(1)")
	l := cs.Limits
	l.MaxStdoutBytes, l.MaxFiles = 10, 2
	res, err := sb.RunCell(context.Background(), cell, l)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || !res.StateReset || len(res.Stdout) != 10 || !res.StdoutTruncated || len(res.Files) != 2 || !res.FilesTruncated || res.Backend != Name {
		t.Errorf("got %+v; want exit 3, state_reset, stdout and files cut to the caps", res)
	}
	if !strings.Contains(string(f.stdin), `"index":1,"language":"python","code":"cHJpbnQoMSk="`) {
		t.Errorf("cell frame: %q", f.stdin)
	}
	// No reply to the second cell: the worker's deadline.
	cell2, _ := p.CheckCell(cs, 2, guard.Python, "while True: pass")
	l.Timeout = 100 * time.Millisecond
	start := time.Now()
	res, err = sb.RunCell(context.Background(), cell2, l)
	if err != nil || !res.TimedOut || !strings.Contains(string(res.Stderr), "did not report") {
		t.Fatalf("got %+v, %v; want a timeout", res, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	var lost *guard.SandboxLost
	cell3, _ := p.CheckCell(cs, 3, guard.Python, "print(3)")
	if _, err := sb.RunCell(context.Background(), cell3, l); !errors.As(err, &lost) {
		t.Errorf("after the deadline: got %v; want a SandboxLost", err)
	}
}

// A cell frame cut short never ran (CodeMayHaveStarted false); one handed over in full may have,
// whatever the write reported. Either way the sandbox is lost after it.
func TestRunCellWriteFailures(t *testing.T) {
	for _, tt := range []struct {
		name    string
		writeN  int
		started bool
	}{{"cut short", 5, false}, {"handed over, then an error", -1, true}} {
		t.Run(tt.name, func(t *testing.T) {
			f := replyingFake()
			b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full"})
			cs := fakeSession(t, nil)
			sb, err := b.OpenSession(context.Background(), cs)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(context.Background())
			f.mu.Lock()
			f.writeErr = errors.New("connection reset")
			f.writeN = tt.writeN
			f.stdin = nil
			f.mu.Unlock()
			cell, _ := (guard.Policy{Languages: []string{guard.Python}}).CheckCell(cs, 1, guard.Python, "print(1)")
			_, err = sb.RunCell(context.Background(), cell, cs.Limits)
			var ie *guard.IntegrationError
			if !errors.As(err, &ie) || ie.CodeMayHaveStarted != tt.started {
				t.Fatalf("got %v; want an IntegrationError with CodeMayHaveStarted %t", err, tt.started)
			}
			var lost *guard.SandboxLost
			if _, err := sb.RunCell(context.Background(), cell, cs.Limits); !errors.As(err, &lost) {
				t.Errorf("next cell: got %v; want a SandboxLost", err)
			}
		})
	}
}

// The backend's Close removes the containers of the sessions still open.
func TestBackendCloseClosesSessions(t *testing.T) {
	f := replyingFake()
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full"})
	sb, err := b.OpenSession(context.Background(), fakeSession(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.removedIDs(); len(got) != 1 || got[0] != sb.ID() {
		t.Errorf("removed %v; want the open session's container", got)
	}
	select {
	case <-sb.Done():
	default:
		t.Error("the open session's Done did not fire")
	}
	if err := sb.Close(context.Background()); err != nil || len(f.removedIDs()) != 1 {
		t.Errorf("the session's own Close after the backend's: %v, removed %v", err, f.removedIDs())
	}
}

// Reap asks SessionEnded only about containers of its own namespace id (or none, made before the
// label): another server's session or run is not known here, so it goes by age alone.
func TestReapAsksOnlyAboutItsOwnNamespace(t *testing.T) {
	now := time.Now()
	container := func(id, ns string, session bool, age time.Duration) containerSummary {
		labels := map[string]string{LabelWorkflowID: "wf-" + id, LabelRunID: "r-" + id}
		if session {
			labels[LabelSession] = "wf-" + id
		}
		if ns != "" {
			labels[LabelNamespaceID] = ns
		}
		return containerSummary{ID: id, Created: now.Add(-age), Labels: labels}
	}
	f := newFake()
	f.list = []containerSummary{
		container("mine", "ns-a", true, time.Second),
		container("legacy", "", true, time.Second),
		container("mine-run", "ns-a", false, time.Minute),
		container("other", "ns-b", true, time.Second),
		container("other-run", "ns-b", false, time.Minute),
		container("other-old", "ns-b", true, 2*time.Hour+time.Second),
		container("other-old-run", "ns-b", false, time.Hour+time.Second),
	}
	var asked []string
	// This server knows none of them: every one it is asked about has ended.
	b := fakeBackend(t, f, Config{NamespaceID: "ns-a", SessionEnded: func(_ context.Context, wf, run string) (bool, error) {
		asked = append(asked, wf)
		return true, nil
	}})
	n, err := b.Reap(context.Background(), time.Hour)
	if n != 5 || err != nil {
		t.Errorf("reap: got %d, %v; want 5", n, err)
	}
	if got := strings.Join(f.removedIDs(), ","); got != "mine,legacy,mine-run,other-old,other-old-run" {
		t.Errorf("removed %s; want mine,legacy,mine-run,other-old,other-old-run (another namespace's only past their age)", got)
	}
	if got := strings.Join(asked, ","); got != "wf-mine,wf-legacy,wf-mine-run" {
		t.Errorf("asked about %s; want only this namespace's and the unlabelled", got)
	}

	// A backend without a namespace id asks about no container that carries one.
	f = newFake()
	f.list = []containerSummary{container("other", "ns-b", true, time.Second), container("legacy", "", true, time.Second)}
	asked = nil
	b = fakeBackend(t, f, Config{SessionEnded: func(_ context.Context, wf, run string) (bool, error) {
		asked = append(asked, wf)
		return true, nil
	}})
	if n, err := b.Reap(context.Background(), time.Hour); n != 1 || err != nil || strings.Join(asked, ",") != "wf-legacy" {
		t.Errorf("reap without a namespace id: got %d, %v, asked %v; want 1 (legacy), asked only about it", n, err, asked)
	}
}

// Every container of a backend with a namespace id carries it; a bad one is refused.
func TestNamespaceIDLabel(t *testing.T) {
	f := newFake()
	b := fakeBackend(t, f, Config{NamespaceID: "3f1c2a9e-0d4b-4c55-9a61-2b7d8e0f4a12"})
	if _, err := b.Run(context.Background(), testChecked("print(1)")); err == nil {
		t.Fatal("run without output: got no error")
	}
	if got := f.created[0].Labels[LabelNamespaceID]; got != "3f1c2a9e-0d4b-4c55-9a61-2b7d8e0f4a12" {
		t.Errorf("container's namespace id label: got %q", got)
	}
	f = newFake()
	b = fakeBackend(t, f, Config{})
	if _, err := b.Run(context.Background(), testChecked("print(1)")); err == nil {
		t.Fatal("run without output: got no error")
	}
	if got, ok := f.created[0].Labels[LabelNamespaceID]; ok {
		t.Errorf("container of a backend without a namespace id carries one: %q", got)
	}
	if _, err := New(Config{Image: "python:3.12-slim", NamespaceID: "a b"}); guard.TypeOf(err) != guard.TypeConfigError {
		t.Errorf("namespace id with a space: got %v; want a ConfigError", err)
	}
}

// A run's container older than the reap threshold is kept while its run is open (it may hold the
// report of a run that waits for its late result, which a restarted worker adopts) and removed
// once the run ended.
func TestReapKeepsAnOldContainerOfAnOpenRun(t *testing.T) {
	now := time.Now()
	f := newFake()
	f.list = []containerSummary{
		{ID: "waiting", Created: now.Add(-2 * time.Hour), Labels: map[string]string{LabelWorkflowID: "wf-waiting", LabelRunID: "r1", LabelNamespaceID: "ns-a"}},
		{ID: "ended", Created: now.Add(-2 * time.Hour), Labels: map[string]string{LabelWorkflowID: "wf-ended", LabelRunID: "r2", LabelNamespaceID: "ns-a"}},
		{ID: "unlabelled", Created: now.Add(-2 * time.Hour)},
	}
	b := fakeBackend(t, f, Config{NamespaceID: "ns-a", SessionEnded: func(_ context.Context, wf, _ string) (bool, error) {
		return wf != "wf-waiting", nil
	}})
	if n, err := b.Reap(context.Background(), time.Hour); n != 2 || err != nil {
		t.Errorf("reap: got %d, %v; want 2", n, err)
	}
	if got := strings.Join(f.removedIDs(), ","); got != "ended,unlabelled" {
		t.Errorf("removed %s; want ended,unlabelled (the open run's container kept)", got)
	}
}

// A host with no package index refuses a cell that brings packages with the ConfigError a run
// with packages gets, before anything is written to the container (the install itself:
// TestSessionCellPackagesIntegration).
func TestSessionCellPackagesNeedAnIndex(t *testing.T) {
	f := newFake()
	f.replies = [][]byte{encodeFrame(frameReady, 0, []byte("{}"))}
	f.replyCh = make(chan []byte, 1)
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full", WarmSandboxes: 0})
	cs := fakeSession(t, nil)
	sb, err := b.OpenSession(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	pkgs := []guard.Package{{Name: "beta", Version: "2.0", Hashes: []string{"sha256:" + strings.Repeat("b", 64)}}}
	cell, err := (guard.Policy{Languages: []string{guard.Python}, Packages: true}).CheckCell(cs, 1, guard.Python, "import beta", pkgs...)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	sent := len(f.stdin)
	f.mu.Unlock()
	var ce *guard.ConfigError
	if _, err := sb.RunCell(context.Background(), cell, cs.Limits); !errors.As(err, &ce) || !strings.Contains(err.Error(), "installs no packages") {
		t.Fatalf("a cell with packages: %v; want the ConfigError", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.stdin) != sent {
		t.Errorf("%d bytes written for the refused cell", len(f.stdin)-sent)
	}
}
