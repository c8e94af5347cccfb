// Package sessiontest is a hand-written guard.SessionBackend for unit tests of the session
// workflow and activities: its sandboxes keep a record of the cells they ran (the state a real
// interpreter would keep), can be lost on demand, and report whether they were closed.
package sessiontest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sandboxflow/sandboxflow/guard"
)

// Name is the backend's name.
const Name = "session-fake"

// Backend opens Sandboxes and keeps every one it opened.
type Backend struct {
	// Result, when set, makes a cell's result; by default a cell prints "cell N: CODE" followed by
	// the codes of every earlier cell of its sandbox (its state), and exits 0.
	Result func(cell guard.Cell, earlier []guard.Cell) guard.Result
	// OpenErr, when set, fails OpenSession.
	OpenErr error
	// CellErr, when set, fails the next RunCell (after it was recorded as run) and is cleared.
	CellErr error

	mu        sync.Mutex
	sandboxes []*Sandbox
}

// Name is Name.
func (b *Backend) Name() string { return Name }

// Run refuses: this backend runs cells only.
func (b *Backend) Run(context.Context, guard.Checked) (guard.Result, error) {
	return guard.Result{}, errors.New("sessiontest: Run is not offered")
}

// OpenSession opens a sandbox for s.
func (b *Backend) OpenSession(_ context.Context, s guard.CheckedSession) (guard.Sandbox, error) {
	if b.OpenErr != nil {
		return nil, b.OpenErr
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	sb := &Sandbox{id: fmt.Sprintf("sandbox-%d", len(b.sandboxes)+1), Session: s, backend: b, done: make(chan struct{})}
	b.sandboxes = append(b.sandboxes, sb)
	return sb, nil
}

// Sandboxes returns every sandbox opened so far.
func (b *Backend) Sandboxes() []*Sandbox {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Sandbox(nil), b.sandboxes...)
}

// Cells returns how many cells ran in all sandboxes.
func (b *Backend) Cells() int {
	n := 0
	for _, s := range b.Sandboxes() {
		n += len(s.Ran())
	}
	return n
}

// Sandbox is one session's sandbox.
type Sandbox struct {
	id      string
	Session guard.CheckedSession
	backend *Backend

	mu       sync.Mutex
	ran      []guard.Cell
	closed   int
	lostOnce sync.Once
	done     chan struct{}
	// Block makes RunCell wait for its context to end (a cell that never returns).
	Block bool
	// Hang makes RunCell ignore its context and return only when the sandbox is closed or lost
	// (a backend that does not stop).
	Hang bool
}

// ID names the sandbox.
func (s *Sandbox) ID() string { return s.id }

// ImageID is the image the sandbox says it runs.
func (s *Sandbox) ImageID() string { return "sha256:sessiontest-image" }

// RunCell records the cell and returns its result.
func (s *Sandbox) RunCell(ctx context.Context, cell guard.Cell, _ guard.Limits) (guard.Result, error) {
	select {
	case <-s.done:
		return guard.Result{}, &guard.SandboxLost{Msg: "sessiontest: sandbox " + s.id + " is gone"}
	default:
	}
	s.mu.Lock()
	earlier := append([]guard.Cell(nil), s.ran...)
	s.ran = append(s.ran, cell)
	block, hang := s.Block, s.Hang
	s.mu.Unlock()
	if hang {
		<-s.done
		return guard.Result{}, errors.New("sessiontest: the hung cell's sandbox was removed")
	}
	s.backend.mu.Lock()
	cellErr := s.backend.CellErr
	s.backend.CellErr = nil
	s.backend.mu.Unlock()
	if cellErr != nil {
		return guard.Result{}, cellErr
	}
	if block {
		<-ctx.Done()
		return guard.Result{}, ctx.Err()
	}
	if s.backend.Result != nil {
		return s.backend.Result(cell, earlier), nil
	}
	var out strings.Builder
	fmt.Fprintf(&out, "cell %d: %s\n", cell.Index, cell.Code)
	for _, c := range earlier {
		fmt.Fprintf(&out, "remembers cell %d: %s\n", c.Index, c.Code)
	}
	return guard.Result{Outcome: guard.OutcomeSucceeded, OK: true, Stdout: []byte(out.String())}, nil
}

// Ran returns the cells the sandbox ran, in order.
func (s *Sandbox) Ran() []guard.Cell {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]guard.Cell(nil), s.ran...)
}

// Lose ends the sandbox by itself, as when its container died.
func (s *Sandbox) Lose() { s.lostOnce.Do(func() { close(s.done) }) }

// Done is closed when the sandbox was lost or closed.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// Close removes the sandbox.
func (s *Sandbox) Close(context.Context) error {
	s.mu.Lock()
	s.closed++
	s.mu.Unlock()
	s.Lose()
	return nil
}

// Closed reports whether Close was called.
func (s *Sandbox) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed > 0
}
