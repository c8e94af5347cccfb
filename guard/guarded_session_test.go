package guard_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/sessiontest"
)

var sessionTestPolicy = guard.Policy{Languages: []string{guard.Python}, Grace: 100 * time.Millisecond}

func openGuarded(t *testing.T, b *sessiontest.Backend, req guard.SessionRequest) (*guard.GuardedSandbox, guard.CheckedSession) {
	t.Helper()
	s, err := sessionTestPolicy.CheckSession(req, sessiontest.Name)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := guard.New(b, sessionTestPolicy).OpenSession(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gs.Close(context.Background()) })
	return gs, s
}

func TestGuardedOpenSessionChecksAgain(t *testing.T) {
	b := &sessiontest.Backend{}
	g := guard.New(b, sessionTestPolicy)
	s, err := sessionTestPolicy.CheckSession(guard.SessionRequest{}, sessiontest.Name)
	if err != nil {
		t.Fatal(err)
	}
	widened := s
	widened.Network = true // not what the digest covers, nor what the policy allows
	other := s
	other.Backend = "docker"
	for name, bad := range map[string]guard.CheckedSession{"widened": widened, "another backend": other} {
		if _, err := g.OpenSession(context.Background(), bad); guard.TypeOf(err) == "" {
			t.Errorf("%s: opened; want a typed refusal", name)
		}
	}
	if n := len(b.Sandboxes()); n != 0 {
		t.Fatalf("%d sandboxes opened for refused sessions", n)
	}
	run := guard.New(runOnly{}, sessionTestPolicy)
	rs, _ := sessionTestPolicy.CheckSession(guard.SessionRequest{}, "run-only")
	var ce *guard.ConfigError
	if _, err := run.OpenSession(context.Background(), rs); !errors.As(err, &ce) || !strings.Contains(ce.Msg, "sessions are not offered by the run-only backend") {
		t.Errorf("a backend without sessions: %v; want a ConfigError saying so", err)
	}
	if guard.SessionsOffered(runOnly{}) || !guard.SessionsOffered(b) {
		t.Error("SessionsOffered is wrong")
	}
}

type runOnly struct{}

func (runOnly) Name() string { return "run-only" }
func (runOnly) Run(context.Context, guard.Checked) (guard.Result, error) {
	return guard.Result{}, errors.New("not here")
}

func TestGuardedRunCellEnforcesTheSession(t *testing.T) {
	b := &sessiontest.Backend{Result: func(cell guard.Cell, _ []guard.Cell) guard.Result {
		return guard.Result{Stdout: []byte(strings.Repeat("x", 100)), Files: []guard.File{{Name: "../escape", Content: []byte("x")}}}
	}}
	gs, s := openGuarded(t, b, guard.SessionRequest{Settings: guard.Settings{Limits: guard.Limits{MaxStdoutBytes: 10}}})
	chain := guard.ChainStart(s.Digest)
	cell, err := sessionTestPolicy.CheckCell(s, 1, "", "print('x' * 100)")
	if err != nil {
		t.Fatal(err)
	}
	res, err := gs.RunCell(context.Background(), cell, chain)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 10 || !res.StdoutTruncated || len(res.Files) != 0 || !res.FilesTruncated {
		t.Errorf("result %d bytes (truncated %v), %d files; want cut to 10 bytes and the unsafe file dropped", len(res.Stdout), res.StdoutTruncated, len(res.Files))
	}
	if want := guard.CellDigest(s.Digest, 1, cell.CodeDigest, chain); res.Digest != want || res.Backend != sessiontest.Name {
		t.Errorf("digest %s on %s; want %s on %s", res.Digest, res.Backend, want, sessiontest.Name)
	}
	forged := cell
	forged.Code = "import os; os.system('curl evil')"
	if _, err := gs.RunCell(context.Background(), forged, chain); guard.TypeOf(err) == "" {
		t.Errorf("a cell whose code is not its digest's: %v; want a typed refusal", err)
	}
	sh := guard.Cell{Index: 2, Language: guard.Shell, Code: "id", CodeDigest: guard.CellCodeDigest(guard.Shell, "id")}
	if _, err := gs.RunCell(context.Background(), sh, chain); guard.TypeOf(err) != guard.TypeToolUsageError {
		t.Errorf("a language the session does not offer: %v; want a ToolUsageError", err)
	}
	if n := len(b.Sandboxes()[0].Ran()); n != 1 {
		t.Errorf("the sandbox ran %d cells; want 1", n)
	}
}

// A backend that does not return within timeout + grace: the cell is reported timed out, the
// sandbox is removed, and the next cell gets a SandboxLost.
func TestGuardedRunCellBackstop(t *testing.T) {
	b := &sessiontest.Backend{}
	gs, s := openGuarded(t, b, guard.SessionRequest{Settings: guard.Settings{Limits: guard.Limits{Timeout: 200 * time.Millisecond}}})
	b.Sandboxes()[0].Hang = true
	cell, err := sessionTestPolicy.CheckCell(s, 1, "", "while True: pass")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := gs.RunCell(context.Background(), cell, guard.ChainStart(s.Digest))
	if err != nil || !res.TimedOut || !strings.Contains(string(res.Stderr), "backstop") && !strings.Contains(string(res.Stderr), "timeout + grace") {
		t.Fatalf("hung cell: %+v, %v; want a timed-out result from the backstop", res, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the backstop took %s", took)
	}
	select {
	case <-gs.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the sandbox was not marked done after the backstop")
	}
	next, _ := sessionTestPolicy.CheckCell(s, 2, "", "print(1)")
	var lost *guard.SandboxLost
	if _, err := gs.RunCell(context.Background(), next, guard.ChainStart(s.Digest)); !errors.As(err, &lost) {
		t.Errorf("a cell after the backstop: %v; want a SandboxLost", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !b.Sandboxes()[0].Closed() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !b.Sandboxes()[0].Closed() {
		t.Error("the sandbox was not removed after the backstop")
	}
}

// namedSessions is a session backend that names the image it would open sandboxes in.
type namedSessions struct {
	*sessiontest.Backend
	image string
}

func (b namedSessions) ImageID(context.Context) (string, error) { return b.image, nil }

// TestGuardedOpenSessionRunsOnlyTheApprovedImage: a session whose settings name an image (bound
// by its settings digest) opens only on a backend that would run that image; another image, or a
// backend that names none, is an ApprovalRefused (image) and no sandbox opens.
func TestGuardedOpenSessionRunsOnlyTheApprovedImage(t *testing.T) {
	s, err := sessionTestPolicy.CheckSession(guard.SessionRequest{}, sessiontest.Name)
	if err != nil {
		t.Fatal(err)
	}
	unbound := s.Digest
	s.Image = "sha256:approved"
	s.Digest = guard.SessionDigest(&s)
	if s.Digest == unbound {
		t.Fatal("the settings digest does not bind the image")
	}
	for _, tt := range []struct {
		label   string
		backend guard.Backend
		open    bool
	}{
		{"the approved image", namedSessions{&sessiontest.Backend{}, "sha256:approved"}, true},
		{"another image", namedSessions{&sessiontest.Backend{}, "sha256:moved"}, false},
		{"a backend naming no image", &sessiontest.Backend{}, false},
	} {
		gs, err := guard.New(tt.backend, sessionTestPolicy).OpenSession(context.Background(), s)
		var ar *guard.ApprovalRefused
		switch {
		case tt.open && err != nil:
			t.Errorf("%s: %v; want it open", tt.label, err)
		case !tt.open && (!errors.As(err, &ar) || ar.Reason != guard.RefusedImage):
			t.Errorf("%s: %v; want an ApprovalRefused (image)", tt.label, err)
		}
		if gs != nil {
			_ = gs.Close(context.Background())
		}
	}
}
