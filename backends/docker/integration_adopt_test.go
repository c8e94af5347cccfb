//go:build integration

package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// lostWorker does what a worker does for a run up to the moment it dies: it takes a container
// for c, attaches, starts it, sends the request, reads until the code printed marker, and then
// drops the connection, as a SIGKILLed worker's does. It returns the container's id.
func lostWorker(t *testing.T, b *Backend, c guard.Checked, marker string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := b.Acquire(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	acq := a.(*acquired)
	acq.releaseSlot()
	r := &run{b: b, sb: acq.sb, c: c, request: acq.request, rep: newReport(c.Limits, nil), diag: guard.NewCapBuffer(diagBytes)}
	r.rep.tunnelLost = true // this worker answers none of the code's connections
	if err := r.attach(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.att.Write(r.request); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(string(r.rep.stdout.Bytes()), marker) {
		if ctx.Err() != nil {
			t.Fatalf("the code never printed %q; stderr %q", marker, r.diag.Bytes())
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.att.Close() // the worker dies: its connection to the container ends
	<-r.demuxed
	return acq.sb.id
}

// TestDockerAdoptsARunWhoseWorkerDied: a run's container outlives its worker with its report,
// and a worker that adopts it gets what the code printed after its first worker died, found by
// the container's id (a warm or cold container) or by the run's labels; the container is then
// removed. A container killed before its supervisor reported, one of another deployment, and one
// that ran other code are not adopted: their outcome stays unknown.
func TestDockerAdoptsARunWhoseWorkerDied(t *testing.T) {
	eachSessionRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, nil)
		code := "import time\nprint('before', flush=True)\ntime.sleep(1.5)\nprint('after the worker died')\n"
		for _, byLabels := range []bool{false, true} {
			c := checked(t, guard.Python, code, nil)
			id := lostWorker(t, b, c, "before")
			find := id
			if byLabels {
				find = ""
			}
			res, err := b.Adopt(context.Background(), find, c)
			if err != nil {
				t.Fatalf("adopt (by labels %v): %v", byLabels, err)
			}
			if !res.OK || string(res.Stdout) != "before\nafter the worker died\n" || res.ImageID == "" {
				t.Errorf("adopted result (by labels %v): ok %v stdout %q image %q; want the whole output", byLabels, res.OK, res.Stdout, res.ImageID)
			}
			if left := containersOf(t, c.Owner.WorkflowID); len(left) != 0 {
				t.Errorf("the adopted container is still there: %+v", left)
			}
		}

		t.Run("killed before it reported", func(t *testing.T) {
			c := checked(t, guard.Python, "import time\nprint('before', flush=True)\ntime.sleep(30)\n", nil)
			id := lostWorker(t, b, c, "before")
			if err := b.eng.Kill(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			_, err := b.Adopt(context.Background(), id, c)
			wantUnknown(t, err)
		})
		t.Run("another deployment's", func(t *testing.T) {
			other := newTestBackend(t, rt, func(cfg *Config) { cfg.Deployment = "another" })
			c := checked(t, guard.Python, code, nil)
			id := lostWorker(t, other, c, "before")
			_, err := b.Adopt(context.Background(), id, c)
			wantUnknown(t, err)
			if _, err := other.Adopt(context.Background(), id, c); err != nil {
				t.Errorf("its own deployment's adopt: %v", err)
			}
		})
		t.Run("other code", func(t *testing.T) {
			c := checked(t, guard.Python, code, nil)
			id := lostWorker(t, b, c, "before")
			forged := c
			forged.Digest = checked(t, guard.Python, "print('approved')", nil).Digest
			_, err := b.Adopt(context.Background(), "", forged)
			wantUnknown(t, err)
			if !strings.Contains(err.Error(), "digest") {
				t.Errorf("error %v; want it to name the digest", err)
			}
			_ = b.remove(context.Background(), id, true)
		})
	})
}

// TestDockerAdoptsAnEgressRun: a run with egress whose worker died: the supervisor closes the
// code's open connection through the tunnel and refuses new ones at once (nothing would answer
// them), so the code goes on rather than hang to its timeout, and the adopted result says the
// egress report was lost with the worker.
func TestDockerAdoptsAnEgressRun(t *testing.T) {
	eachSessionRuntime(t, func(t *testing.T, rt string) {
		b := newTestBackend(t, rt, func(c *Config) { c.Egress.Resolver = egressResolver })
		code := `
import socket, time
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
print("holding", flush=True)
s.settimeout(30)
print("closed" if s.recv(100) == b"" else "answered", flush=True)
time.sleep(0.5)
try:
    socket.create_connection(("127.0.0.1", 3128), timeout=5).close()
    print("reconnected")
except OSError:
    print("refused")
`
		c := egressChecked(t, code, []string{"allowed.test"}, nil)
		c.Limits.Timeout = 20 * time.Second
		id := lostWorker(t, b, c, "holding")
		res, err := b.Adopt(context.Background(), id, c)
		if err != nil {
			t.Fatal(err)
		}
		if res.TimedOut || string(res.Stdout) != "holding\nclosed\nrefused\n" {
			t.Errorf("adopted egress run: timed out %v, stdout %q; want its connection closed and a new one refused", res.TimedOut, res.Stdout)
		}
		if res.Egress == nil || !res.Egress.Lost || len(res.Egress.Attempts) != 0 {
			t.Errorf("egress report %+v; want it marked lost", res.Egress)
		}
	})
}

// wantUnknown fails t unless err is an IntegrationError whose code may have run.
func wantUnknown(t *testing.T, err error) {
	t.Helper()
	var ie *guard.IntegrationError
	if !errors.As(err, &ie) || !ie.CodeMayHaveStarted {
		t.Errorf("adopt: %v; want an IntegrationError whose code may have run (outcome unknown)", err)
	}
}
