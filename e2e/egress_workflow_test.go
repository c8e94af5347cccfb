//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/backends/kinds"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/devtest"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/worker/service"
)

// TestEgressThroughWorkflow: the worker's egress flags reach the Docker backend, an approved run
// with egress reaches an upstream through the proxy, and the audit comes back in the result.
// runc only: the backend's own tests cover runsc.
func TestEgressThroughWorkflow(t *testing.T) {
	requireDocker(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "upstream says hi") }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	target := "127.0.0.1:" + port
	ts := devtest.Start(t)
	cfg := &service.Options{Backend: kinds.Docker, Docker: service.DockerOptions{Image: testPythonImage(), Runtime: "runc"}, Languages: "python", ReapInterval: time.Minute,
		EgressAllow: target, EgressPrivateOK: "127.0.0.0/8"}
	alice := reviewertest.New(t, "alice")
	sc := startInProcessWorker(t, ts, cfg, alice).Client

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The upstream is an IP on the sandbox's NO_PROXY list (the sandbox's own loopback), so the
	// code clears it to send the request through the proxy.
	code := "import os, urllib.request\nos.environ.pop('no_proxy', None); os.environ.pop('NO_PROXY', None)\n" +
		"print(urllib.request.urlopen('http://" + target + "/', timeout=20).read().decode())\n"
	started, err := sc.Start(ctx, guard.Request{Code: code, Settings: guard.Settings{Egress: []string{target}}}, client.StartOptions{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := sc.Approve(ctx, client.Run(started.WorkflowID), started.Digest, alice.Signer, "fine"); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	res, err := sc.Result(ctx, started.WorkflowID)
	if err != nil {
		t.Fatalf("Result: %v", err)
	}
	if !res.OK || !strings.Contains(string(res.Stdout), "upstream says hi") {
		t.Fatalf("got ok=%v stdout %q stderr %q", res.OK, res.Stdout, res.Stderr)
	}
	if res.Egress == nil || len(res.Egress.Attempts) != 1 || !res.Egress.Attempts[0].Allowed || res.Egress.Attempts[0].Host != "127.0.0.1" {
		t.Fatalf("egress report %+v; want one allowed attempt to 127.0.0.1", res.Egress)
	}
}
