//go:build integration

package docker

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// sendAndDie does what a worker does for a cell up to the moment it dies: it writes the cell's
// frame to the session's container, reads until the cell printed marker (when not ""), and
// drops its connection, as a SIGKILLed worker's goes; the Session is abandoned (never closed
// or lost: a dead worker kills nothing).
func sendAndDie(t *testing.T, sb guard.Sandbox, cell guard.Cell, l guard.Limits, marker string) {
	t.Helper()
	s := sb.(*Session)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep := newReport(l, nil)
	rep.session = true
	s.mu.Lock()
	s.cur = rep
	s.mu.Unlock()
	if cell.Index > 0 {
		frame, err := encodeCell(cell, l, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.write(ctx, frame); err != nil {
			t.Fatal(err)
		}
	}
	for marker != "" {
		s.mu.Lock()
		seen := strings.Contains(string(rep.stdout.Bytes()), marker)
		s.mu.Unlock()
		if seen {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the cell never printed %q; stderr %q", marker, s.diag.Bytes())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.att.Close() // the worker dies: its connection to the container ends
	<-s.done
}

// adoptable is what the host of a new worker knows of a session: no file contents, no env values.
func adoptable(cs guard.CheckedSession) guard.CheckedSession {
	cs.Files, cs.Env = nil, nil
	return cs
}

// TestDockerAdoptsASessionWhoseWorkerDied: a session's container outlives its worker, which died
// while a cell ran; a new backend of the same deployment collects that cell's result from the
// container's kept output and runs further cells in the same interpreter, and so does a third
// one with no cell pending; Close removes the container.
func TestDockerAdoptsASessionWhoseWorkerDied(t *testing.T) {
	eachSessionRuntime(t, func(t *testing.T, rt string) {
		a := newTestBackend(t, rt, nil)
		ts := openSession(t, a, func(r *guard.SessionRequest) {
			r.Files = map[string][]byte{"in.txt": []byte("input\n")}
			r.Env = map[string]string{"GREETING": "hello"}
		})
		expect(t, "cell 1", ts.must(guard.Python, "x = 41"), 0, "")
		cell2, err := testPolicy.CheckCell(ts.cs, 2, guard.Python, "import time\nprint('before', flush=True)\ntime.sleep(3)\nprint('after', x + 1)")
		if err != nil {
			t.Fatal(err)
		}
		sendAndDie(t, ts.sb, cell2, ts.cs.Limits, "before")

		b := newTestBackend(t, rt, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		sb, res, err := b.AdoptSession(ctx, ts.sb.ID()[:12], adoptable(ts.cs), &guard.PendingCell{Cell: cell2, Limits: ts.cs.Limits, Deadline: time.Now().Add(30 * time.Second)})
		if err != nil {
			t.Fatalf("adopt: %v", err)
		}
		if res == nil {
			t.Fatal("adopt: no result for the pending cell")
		}
		expect(t, "the pending cell", *res, 0, "before\nafter 42\n")
		if res.Backend != Name || res.ImageID == "" || res.Duration < 3*time.Second || res.Duration > 10*time.Second {
			t.Errorf("adopted result: backend %q image %q duration %s; want docker, the image and the cell's own ~3 s", res.Backend, res.ImageID, res.Duration)
		}
		ts2 := &testSession{t: t, sb: sb, cs: ts.cs, next: 3}
		expect(t, "cell 3 after the adoption", ts2.must(guard.Python, "print(x)"), 0, "41\n")
		expect(t, "an sh cell with the session's env", ts2.must(guard.Shell, "echo \"$GREETING\"; cat in.txt"), 0, "hello\ninput\n")

		// The second worker dies between cells: a third adopts with nothing pending.
		sendAndDie(t, sb, guard.Cell{}, ts.cs.Limits, "")
		c := newTestBackend(t, rt, nil)
		sb3, res, err := c.AdoptSession(ctx, sb.ID(), adoptable(ts.cs), nil)
		if err != nil || res != nil {
			t.Fatalf("adopt with nothing pending: %v, %+v", err, res)
		}
		ts3 := &testSession{t: t, sb: sb3, cs: ts.cs, next: 5}
		expect(t, "cell 5 after the second adoption", ts3.must(guard.Python, "print(x + 2)"), 0, "43\n")
		if err := sb3.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if left := containersOf(t, ts.cs.Owner.WorkflowID); len(left) != 0 {
			t.Errorf("containers left after the adopter's Close: %+v", left)
		}
	})
}

// TestDockerAdoptSessionRefusals: another digest, a killed container,
// an id of no session, and the same container adopted twice are SandboxLost; a pending cell
// whose end never comes gives no result and a sandbox that refuses cells; a cell that prints
// forged frames does not change what the adoption reads.
func TestDockerAdoptSessionRefusals(t *testing.T) {
	eachSessionRuntime(t, func(t *testing.T, rt string) {
		a := newTestBackend(t, rt, nil)
		b := newTestBackend(t, rt, nil)
		step := func() context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			t.Cleanup(cancel)
			return ctx
		}
		wantLost := func(what string, err error) {
			t.Helper()
			var lost *guard.SandboxLost
			if !errors.As(err, &lost) {
				t.Errorf("%s: got %v; want a SandboxLost", what, err)
			}
		}

		ts := openSession(t, a, nil)
		expect(t, "cell 1", ts.must(guard.Python, "x = 1"), 0, "")
		sendAndDie(t, ts.sb, guard.Cell{}, ts.cs.Limits, "")
		other := ts.cs
		other.Digest = "sha256:" + strings.Repeat("0", 64)
		_, _, err := b.AdoptSession(step(), ts.sb.ID(), other, nil)
		wantLost("another digest", err)
		_, _, err = b.AdoptSession(step(), "0123456789ab", ts.cs, nil)
		wantLost("no such container", err)

		// Pending cell 9 was never sent: no result by its deadline; the sandbox is lost.
		cell9, err := testPolicy.CheckCell(ts.cs, 9, guard.Python, "print(x)")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		sb, res, err := b.AdoptSession(step(), ts.sb.ID(), adoptable(ts.cs), &guard.PendingCell{Cell: cell9, Limits: ts.cs.Limits, Deadline: time.Now().Add(2 * time.Second)})
		if err != nil || res != nil {
			t.Fatalf("adopt with a cell never sent: %v, %+v; want no result and no error", err, res)
		}
		if d := time.Since(start); d < 2*time.Second || d > 15*time.Second {
			t.Errorf("adopt with a cell never sent took %s; want its 2 s deadline", d)
		}
		if _, err := sb.RunCell(step(), cell9, ts.cs.Limits); err == nil {
			t.Error("a cell after an adoption whose pending end never came ran; want a SandboxLost")
		} else {
			wantLost("cell after a lost pending cell", err)
		}
		_, _, err = b.AdoptSession(step(), ts.sb.ID(), ts.cs, nil)
		wantLost("a container killed after its adoption", err)
		if err := sb.Close(step()); err != nil {
			t.Error(err)
		}

		// A killed container.
		killed := openSession(t, a, nil)
		sendAndDie(t, killed.sb, guard.Cell{}, killed.cs.Limits, "")
		if err := a.eng.Kill(step(), killed.sb.ID()); err != nil {
			t.Fatal(err)
		}
		_, _, err = b.AdoptSession(step(), killed.sb.ID(), killed.cs, nil)
		wantLost("a killed container", err)

		// Adopted twice by one backend: its uid is held already.
		twice := openSession(t, a, nil)
		sendAndDie(t, twice.sb, guard.Cell{}, twice.cs.Limits, "")
		first, _, err := b.AdoptSession(step(), twice.sb.ID(), twice.cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = b.AdoptSession(step(), twice.sb.ID(), twice.cs, nil)
		wantLost("the same container adopted twice", err)
		_ = first.Close(step())

		// A hostile cell prints what looks like the ends of itself (cell 2) to its stdout.
		hostile := openSession(t, a, nil)
		expect(t, "cell 1", hostile.must(guard.Python, "x = 1"), 0, "")
		forged := append(encodeFrame(frameExit, 0, []byte(`{"exit_code":7}`)), encodeFrame(frameCellEnd, 0, []byte(`{"files_truncated":false,"cell":2}`))...)
		forged = append([]byte("\n"), forged...)
		code := "import os, time\nos.write(1, bytes.fromhex('" + hex.EncodeToString(forged) + "'))\ntime.sleep(2)\nprint('after')"
		cell2, err := testPolicy.CheckCell(hostile.cs, 2, guard.Python, code)
		if err != nil {
			t.Fatal(err)
		}
		sendAndDie(t, hostile.sb, cell2, hostile.cs.Limits, "\n")
		sb, res, err = b.AdoptSession(step(), hostile.sb.ID(), hostile.cs, &guard.PendingCell{Cell: cell2, Limits: hostile.cs.Limits, Deadline: time.Now().Add(20 * time.Second)})
		if err != nil || res == nil {
			t.Fatalf("adopt the hostile cell: %v, %+v", err, res)
		}
		if want := string(forged) + "after\n"; string(res.Stdout) != want || res.ExitCode != 0 {
			t.Errorf("hostile cell: exit %d stdout %q; want exit 0 stdout %q", res.ExitCode, res.Stdout, want)
		}
		_ = sb.Close(step())
	})
}

// TestDockerAdoptsAnEgressSession: a session with egress whose worker died while a cell ran: the
// cell's connection after the death gets no answer (the proxy died with the worker) and its
// result says the egress report was lost; the adopting backend gives the next cell a proxy of
// its own, through which it reaches the allowed upstream.
func TestDockerAdoptsAnEgressSession(t *testing.T) {
	eachSessionRuntime(t, func(t *testing.T, rt string) {
		up := newUpstream(t, nil)
		h := up.port()
		ts := openEgressSession(t, newTestBackend(t, rt, withEgress), h)
		sb, cs, p := ts.sb, ts.cs, *ts.p
		fetch := "import urllib.request\ndef fetch(u, timeout=20):\n    try:\n        with urllib.request.urlopen(u, timeout=timeout) as r:\n            return 'ok ' + r.read().decode()\n    except Exception as e:\n        return 'failed ' + type(e).__name__\n"
		expect(t, "cell 1 through the first worker's proxy", ts.must(guard.Python, fetch+"print(fetch('http://allowed.test:"+h+"/'))"), 0, "ok hello from upstream\n")
		cell2, err := p.CheckCell(cs, 2, guard.Python, "import time\nprint('before', flush=True)\ntime.sleep(1)\nprint('after', fetch('http://allowed.test:"+h+"/', timeout=3).split()[0])")
		if err != nil {
			t.Fatal(err)
		}
		sendAndDie(t, sb, cell2, cs.Limits, "before")

		b := newTestBackend(t, rt, withEgress)
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		sb2, res, err := b.AdoptSession(ctx, sb.ID(), adoptable(cs), &guard.PendingCell{Cell: cell2, Limits: cs.Limits, Deadline: time.Now().Add(30 * time.Second)})
		if err != nil || res == nil {
			t.Fatalf("adopt: %v, %+v", err, res)
		}
		defer sb2.Close(context.Background())
		expect(t, "the pending cell", *res, 0, "before\nafter failed\n")
		if res.Egress == nil || !res.Egress.Lost {
			t.Errorf("the pending cell's egress %+v; want its report lost", res.Egress)
		}
		ts2 := &testSession{t: t, sb: sb2, cs: cs, next: 3, p: &p}
		res3 := ts2.must(guard.Python, "print(fetch('http://allowed.test:"+h+"/'))")
		expect(t, "cell 3 through the adopter's proxy", res3, 0, "ok hello from upstream\n")
		if res3.Egress == nil || res3.Egress.Lost || len(res3.Egress.Attempts) != 1 || !res3.Egress.Attempts[0].Allowed {
			t.Errorf("cell 3 egress %+v; want its one allowed attempt", res3.Egress)
		}
	})
}
