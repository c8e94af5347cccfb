package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// fakeEngine is a hand-written engine for the error paths. Each field set to a non-nil error
// makes that call fail; the container's output is what stdout and stderr hold.
type fakeEngine struct {
	mu sync.Mutex

	pingErr, versionErr, createErr, attachErr, startErr, waitErr, inspectErr, killErr, removeErr, listErr error

	imagePresent   bool
	imageID        string // "" for a fixed sha256:abab...
	imageVolumes   []string
	listHook       func(labels map[string]string)
	networkPresent bool
	version        engineVersion

	// writeN, when not negative, makes the stdin write stop after that many bytes with writeErr.
	writeN   int
	writeErr error
	// writeBlocks makes the stdin write hang until the attachment is closed, then report the
	// whole request written (the bytes were handed over as the deadline fired).
	writeBlocks bool

	// removeConflicts makes that many Remove calls fail with errConflict first (a container still
	// exiting); removeCalls counts them all.
	removeConflicts, removeCalls int

	stdout, stderr []byte
	// replies, when set, makes the container answer its stdin writes in turn, one reply per
	// write (as a session's supervisor answers each frame), its output open until the
	// attachment is closed.
	replies [][]byte
	replyCh chan []byte
	// hang makes the container's output never end (until the attachment is closed).
	hang bool
	// startGate, when set, holds each Start until it receives (or its context ends);
	// startsNow and startsMost count the Starts held at once, now and at most.
	startGate             chan struct{}
	startsNow, startsMost int
	exitCode              int64
	state                 containerState
	list                  []containerSummary

	// record
	startAttempts int
	created       []containerSpec
	started       []string
	signalled     []string
	killed        []string
	renamed       []string
	removed       []string
	stdin         []byte
	closed        bool
	nextID        int
	demuxErr      error
}

func newFake() *fakeEngine {
	return &fakeEngine{imagePresent: true, networkPresent: true, writeN: -1}
}

func (f *fakeEngine) Ping(context.Context) error { return f.pingErr }

func (f *fakeEngine) Version(context.Context) (engineVersion, error) {
	return f.version, f.versionErr
}

func (f *fakeEngine) ImagePresent(context.Context, string) (bool, error) { return f.imagePresent, nil }

func (f *fakeEngine) Image(_ context.Context, ref string) (imageInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.imagePresent {
		return imageInfo{}, fmt.Errorf("%w: no such image %s", errNotFound, ref)
	}
	id := "sha256:" + strings.Repeat("ab", 32)
	if f.imageID != "" {
		id = f.imageID
	}
	return imageInfo{ID: id, Volumes: f.imageVolumes}, nil
}

func (f *fakeEngine) NetworkPresent(context.Context, string) (bool, error) {
	return f.networkPresent, nil
}

func (f *fakeEngine) Create(_ context.Context, s containerSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.createErr != nil {
		return "", f.createErr
	}
	f.created = append(f.created, s)
	f.nextID++
	return "c" + string(rune('0'+f.nextID)), nil
}

func (f *fakeEngine) Attach(_ context.Context, id string) (attachment, error) {
	if f.attachErr != nil {
		return nil, f.attachErr
	}
	return &fakeAttachment{f: f, done: make(chan struct{})}, nil
}

func (f *fakeEngine) Start(ctx context.Context, id string) error {
	f.mu.Lock()
	gate := f.startGate
	f.startsNow++
	f.startsMost = max(f.startsMost, f.startsNow)
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.startsNow--
	f.startAttempts++
	if f.startErr != nil {
		return f.startErr
	}
	f.started = append(f.started, id)
	return nil
}

func (f *fakeEngine) Wait(ctx context.Context, id string) (int64, error) {
	return f.exitCode, f.waitErr
}

func (f *fakeEngine) Inspect(context.Context, string) (containerState, error) {
	return f.state, f.inspectErr
}

func (f *fakeEngine) Rename(_ context.Context, id, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renamed = append(f.renamed, id+"="+name)
	return nil
}

func (f *fakeEngine) Kill(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.killed = append(f.killed, id)
	return f.killErr
}

func (f *fakeEngine) Signal(_ context.Context, id, signal string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signalled = append(f.signalled, id+" "+signal)
	return nil
}

func (f *fakeEngine) Remove(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removeCalls++
	if f.removeConflicts > 0 {
		f.removeConflicts--
		return fmt.Errorf("%w: could not kill running container %s, cannot remove - container %s is not running", errConflict, id, id)
	}
	if f.removeErr != nil {
		return f.removeErr
	}
	f.removed = append(f.removed, id)
	return nil
}

func (f *fakeEngine) List(_ context.Context, labels map[string]string) ([]containerSummary, error) {
	if f.listHook != nil {
		f.listHook(labels)
	}
	return f.list, f.listErr
}

func (f *fakeEngine) Logs(context.Context, string, io.Writer, io.Writer) error {
	return errors.New("fake engine keeps no logs")
}

func (f *fakeEngine) FollowLogs(context.Context, string, io.Writer, io.Writer) error {
	return errors.New("fake engine keeps no logs")
}

func (f *fakeEngine) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeEngine) removedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.removed...)
}

type fakeAttachment struct {
	f         *fakeEngine
	closeOnce sync.Once
	done      chan struct{}
}

func (a *fakeAttachment) Write(p []byte) (int, error) {
	if a.f.writeBlocks {
		<-a.done
	}
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	if a.f.writeN >= 0 && a.f.writeN < len(p) {
		a.f.stdin = append(a.f.stdin, p[:a.f.writeN]...)
		return a.f.writeN, a.f.writeErr
	}
	a.f.stdin = append(a.f.stdin, p...)
	if a.f.replyCh != nil && len(a.f.replies) > 0 {
		a.f.replyCh <- a.f.replies[0]
		a.f.replies = a.f.replies[1:]
	}
	return len(p), a.f.writeErr
}

func (a *fakeAttachment) CloseWrite() error { return nil }

func (a *fakeAttachment) Demux(stdout, stderr io.Writer) error {
	if a.f.replyCh != nil {
		for {
			select {
			case r := <-a.f.replyCh:
				if _, err := stdout.Write(r); err != nil {
					return err
				}
			case <-a.done:
				return errors.New("use of closed connection")
			}
		}
	}
	if a.f.hang {
		<-a.done
		return errors.New("use of closed connection")
	}
	// The container reads its request before it answers, as the bootstrap does.
	time.Sleep(5 * time.Millisecond)
	if a.f.demuxErr != nil {
		return a.f.demuxErr
	}
	if _, err := stderr.Write(a.f.stderr); err != nil {
		return err
	}
	for p := a.f.stdout; len(p) > 0; {
		n := min(len(p), 32<<10)
		if _, err := stdout.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

func (a *fakeAttachment) Close() error {
	a.closeOnce.Do(func() { close(a.done) })
	return nil
}

func (f *fakeEngine) Counters(context.Context, string) (counters, error) {
	return nil, errors.New("fake engine keeps no counters")
}
