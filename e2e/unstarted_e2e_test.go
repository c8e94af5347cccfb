//go:build integration

package e2e

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
)

// TestUnstartedRunRunsAfterItsWorkerIsKilled: the real worker binaries, runc. The sandbox host
// reaches dockerd through a socket proxy the test holds, so that its container's creation hangs
// (a slow daemon); meanwhile it claims the approval and reads its claim back. The host is
// SIGKILLed there: the approval is claimed, the code never reached a sandbox. A worker started
// again on the host finds the run in the dead one's spool at stage "claimed" and releases the
// claim with its secret; the run, whose activity the server timed out with no claim held, runs
// the code in a fresh activity and ends with its result. Before, it ended
// "outcome unknown; the approval was used".
func TestUnstartedRunRunsAfterItsWorkerIsKilled(t *testing.T) {
	e := newLateEnv(t, "e2e-unstarted", t.TempDir())
	proxy := newDockerProxy(t)
	env := append(append([]string(nil), e.env...), "DOCKER_HOST=unix://"+proxy.path)
	first := startWorker(t, e.workerBin, env, e.host...)
	s := e.s
	var started client.Started
	s.mustJSON(&started, "run", "--timeout", "60s", "--code", "print('ran', flush=True)\n")

	proxy.hold()
	s.mustJSON(&struct{}{}, "approve", started.WorkflowID, "--digest", started.Digest)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		out := first.output()
		if strings.Contains(out, "sandbox.started") && strings.Contains(out, started.WorkflowID) {
			break // claimed and read back; the container's creation hangs in the proxy
		}
		if time.Now().After(deadline) {
			t.Fatalf("the host never claimed the approval:\n%s", out)
		}
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	proxy.drop() // what the dead host asked the daemon never reaches it
	second := e.startHost(t, nil)

	var res guard.Result
	s.mustJSON(&res, "result", started.WorkflowID, "--timeout", "3m")
	if string(res.Stdout) != "ran\n" || !res.OK || res.Recovered != nil || res.Receipt == nil {
		t.Fatalf("result %+v (stdout %q); want the code's output from a fresh activity, with its receipt\nsecond worker:\n%s", res, res.Stdout, second.output())
	}
	if out := second.output(); !strings.Contains(out, "released=true") && !strings.Contains(out, `"released":true`) {
		t.Errorf("the second worker logged no released claim:\n%s", out)
	}
	var st struct {
		RunAttempts int `json:"run_attempts"`
	}
	s.mustJSON(&st, "show", started.WorkflowID, "--json")
	if st.RunAttempts != 2 {
		t.Errorf("run attempts %d; want 2 (the lost one and the one that ran)", st.RunAttempts)
	}
}

// dockerProxy is a unix-socket proxy to the Docker daemon that the test can hold: while held,
// nothing the worker writes reaches the daemon (its requests hang, as on a daemon that does not
// answer); drop closes every connection and discards what was held.
type dockerProxy struct {
	path string
	mu   sync.Mutex
	held bool
	wake *sync.Cond
	// gen counts drops: a connection made before one is closed and forwards nothing more.
	gen   int
	conns []net.Conn
}

func newDockerProxy(t *testing.T) *dockerProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "dproxy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &dockerProxy{path: filepath.Join(dir, "docker.sock")}
	p.wake = sync.NewCond(&p.mu)
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); p.drop() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *dockerProxy) serve(c net.Conn) {
	d, err := net.Dial("unix", "/var/run/docker.sock")
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	gen := p.gen
	p.conns = append(p.conns, c, d)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(c, d); c.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.held && p.gen == gen {
				p.wake.Wait()
			}
			dropped := p.gen != gen
			p.mu.Unlock()
			if dropped {
				break
			}
			if _, werr := d.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	d.Close()
	c.Close()
}

// hold stops forwarding the worker's bytes to the daemon.
func (p *dockerProxy) hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// drop closes every connection so far, discarding what was held, and forwards again.
func (p *dockerProxy) drop() {
	p.mu.Lock()
	p.gen++
	p.held = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.wake.Broadcast()
	p.mu.Unlock()
}
