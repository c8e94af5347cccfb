package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/wheeltest"
	"github.com/sandboxflow/sandboxflow/wheels"
)

// A cell's packages are linked into cell-<index>-* of the session's own slot, which the
// container mounts; a second attempt of the same cell (the first ended before its frame was
// written) finds that folder and installs nothing; a cell that would change an installed
// version is refused by the host's own check; Close removes the slot.
func TestSessionCellPackagesSlot(t *testing.T) {
	ix := wheeltest.NewIndex(t)
	g := ix.AddWheel(t, wheeltest.Wheel{Name: "gamma", Version: "1.0", Files: map[string]string{"gamma.py": "G = 1\n"}})
	in, err := wheels.New(wheels.Config{Index: ix.URL(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	f.replies = [][]byte{encodeFrame(frameReady, 0, []byte("{}"))}
	f.replyCh = make(chan []byte, 1)
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full", WarmSandboxes: 0, Packages: in})
	cs := fakeSession(t, nil)
	sb, err := b.OpenSession(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Session)
	if s.slot == "" || s.sb.packages != s.slot {
		t.Fatalf("session slot %q, mounted %q; want a slot of its own, mounted", s.slot, s.sb.packages)
	}
	p := guard.Policy{Languages: []string{guard.Python}, Packages: true}
	lock, err := guard.ParseLock(wheeltest.Line("gamma", "1.0", g))
	if err != nil {
		t.Fatal(err)
	}
	cell, err := p.CheckCell(cs, 1, guard.Python, "import gamma", lock...)
	if err != nil {
		t.Fatal(err)
	}
	name, err := s.addPackages(context.Background(), cell)
	if err != nil || !strings.HasPrefix(name, "cell-1-") {
		t.Fatalf("addPackages: %q, %v; want cell-1-*", name, err)
	}
	if _, err := os.Stat(filepath.Join(s.slot, name, "gamma.py")); err != nil {
		t.Fatalf("gamma not linked into the cell's folder: %v", err)
	}
	hits := ix.Requests()
	if again, err := s.addPackages(context.Background(), cell); err != nil || again != name || ix.Requests() != hits {
		t.Errorf("the same cell again: %q, %v (index requests %d → %d); want %s found, nothing fetched", again, err, hits, ix.Requests(), name)
	}
	other, err := guard.ParseLock(wheeltest.Line("gamma", "1.0", []byte("other bytes")))
	if err != nil {
		t.Fatal(err)
	}
	cell2 := guard.Cell{Index: 2, Language: guard.Python, Code: "import gamma", Packages: other}
	var tu *guard.ToolUsageError
	if _, err := s.addPackages(context.Background(), cell2); !errors.As(err, &tu) {
		t.Errorf("a cell changing gamma's hash: %v; want the host's ToolUsageError", err)
	}
	slot := s.slot
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(slot); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("slot left after Close: %v", err)
	}
}

// A folder named like a cell's in the session's own environment (a wheel may ship one) is never
// taken for that cell's packages: the cell's folder has a name of its own.
func TestSessionCellPackagesNeverReuseAWheelsFolder(t *testing.T) {
	ix := wheeltest.NewIndex(t)
	d := ix.AddWheel(t, wheeltest.Wheel{Name: "delta", Version: "1.0", Files: map[string]string{"delta.py": "", "cell-1/evil.py": "E = 1\n"}})
	in, err := wheels.New(wheels.Config{Index: ix.URL(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	f.replies = [][]byte{encodeFrame(frameReady, 0, []byte("{}"))}
	f.replyCh = make(chan []byte, 1)
	b := fakeBackend(t, f, Config{Image: "sandboxflow-test-python:bookworm-full", WarmSandboxes: 0, Packages: in})
	p := guard.Policy{Languages: []string{guard.Python}, Packages: true}
	lockText := wheeltest.Line("delta", "1.0", d)
	cs, err := p.CheckSession(guard.SessionRequest{Settings: guard.Settings{Packages: lockText, Limits: guard.Limits{Timeout: time.Second}}}, Name)
	if err != nil {
		t.Fatal(err)
	}
	cs.Owner = guard.Owner{WorkflowID: "wf-1", RunID: "run-1", ActivityID: "open"}
	sb, err := b.OpenSession(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	s := sb.(*Session)
	if _, err := os.Stat(filepath.Join(s.slot, "cell-1", "evil.py")); err != nil {
		t.Skipf("the installer did not keep the wheel's cell-1 folder (%v): nothing to take", err)
	}
	lock, err := guard.ParseLock(lockText)
	if err != nil {
		t.Fatal(err)
	}
	cell, err := p.CheckCell(cs, 1, guard.Python, "import evil", lock...)
	if err != nil {
		t.Fatal(err)
	}
	name, err := s.addPackages(context.Background(), cell)
	if err != nil || name == "cell-1" || !strings.HasPrefix(name, "cell-1-") {
		t.Fatalf("addPackages: %q, %v; want a folder of its own", name, err)
	}
	if _, err := os.Stat(filepath.Join(s.slot, name, "delta.py")); err != nil {
		t.Errorf("delta not linked into %s: %v", name, err)
	}
}
