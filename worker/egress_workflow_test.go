//go:build integration

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/devserver/devtest"
	"github.com/sandboxflow/sandboxflow/internal/reviewertest"
	"github.com/sandboxflow/sandboxflow/internal/service"
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
	cfg := &service.Options{DockerImage: testPythonImage(), DockerRuntime: "runc", Languages: "python", ReapInterval: time.Minute,
		EgressAllow: target, EgressPrivateOK: "127.0.0.0/8"}
	if err := applyDefaults(cfg); err != nil {
		t.Fatal(err)
	}
	backend, closeBackend, err := service.NewBackend(context.Background(), cfg, slogDiscard())
	if err != nil {
		t.Fatal(err)
	}
	defer closeBackend()
	queue := "egress-" + uuid.NewString()[:8]
	alice := reviewertest.New(t, "alice")
	stop := startInProcessWorker(t, ts.GetDefaultClient(), queue, cfg, backend, alice.File)
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc, err := client.New(client.Options{Temporal: ts.GetDefaultClient(), TaskQueue: queue, Reviewer: alice.Principal})
	if err != nil {
		t.Fatal(err)
	}
	// The upstream is an IP on the sandbox's NO_PROXY list (the sandbox's own loopback), so the
	// code clears it to send the request through the proxy.
	code := "import os, urllib.request\nos.environ.pop('no_proxy', None); os.environ.pop('NO_PROXY', None)\n" +
		"print(urllib.request.urlopen('http://" + target + "/', timeout=20).read().decode())\n"
	started, err := sc.Start(ctx, guard.Request{Code: code, Egress: []string{target}}, client.StartOptions{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := sc.Approve(ctx, started.WorkflowID, started.Digest, alice.Signer, "fine"); err != nil {
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
