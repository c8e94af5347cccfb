//go:build integration

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

// TestStarterResultPrintsWhatTheHostMeasured drives the binaries as a new user would: worker
// --dev with the Docker backend and an egress allowlist, then starter run --allow-host, approve,
// result. The code reaches an upstream through the proxy, is refused another host, then kills
// itself: `starter result --json` prints the egress audit of both attempts, the image the code ran
// in, the signal that ended it and what the run cost (its usage).
func TestStarterResultPrintsWhatTheHostMeasured(t *testing.T) {
	requireDocker(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "upstream says hi") }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	target := "127.0.0.1:" + port
	workerBin, starterBin := binaries(t)
	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=e2e-result",
		"USER=alice", "SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")}
	startDevWorker(t, workerBin, env, "--data-dir", data, "--ui-port", "-1", "--backend", "docker",
		"--docker-image", testPythonImage(), "--docker-runtime", "runc",
		"--egress-allow", target, "--egress-private-ok", "127.0.0.0/8")
	s := starterCLI{t: t, bin: starterBin, env: env}

	// The upstream is on the sandbox's NO_PROXY list (the sandbox's own loopback): the code
	// clears it to go through the proxy.
	code := "import os, signal, urllib.request\nos.environ.pop('no_proxy', None); os.environ.pop('NO_PROXY', None)\n" +
		"print(urllib.request.urlopen('http://" + target + "/', timeout=20).read().decode(), flush=True)\n" +
		"try:\n    urllib.request.urlopen('http://elsewhere.invalid/', timeout=20)\nexcept Exception as e:\n    print('refused', flush=True)\n" +
		"held = bytearray(100 << 20)\nfor i in range(0, len(held), 4096):\n    held[i] = 1\n" +
		"os.kill(os.getpid(), signal.SIGKILL)\n"
	var started startedJSON
	s.mustJSON(&started, "run", "--code", code, "--allow-host", target)
	waitPending(t, s, started.WorkflowID)
	var decided struct {
		State string `json:"state"`
	}
	s.mustJSON(&decided, "approve", started.WorkflowID, "--digest", started.Digest)

	out, rc := s.run("result", "--json", started.WorkflowID)
	if rc != 0 {
		t.Fatalf("starter result exited %d: %s", rc, out)
	}
	var res guard.Result
	if err := res.UnmarshalJSON([]byte(out)); err != nil {
		t.Fatalf("starter result printed %q: %v", out, err)
	}
	for _, key := range []string{`"egress":`, `"image_id":`, `"signal":`, `"usage":`} {
		if !strings.Contains(out, key) {
			t.Errorf("starter result lacks %s: %s", key, out)
		}
	}
	if res.Stdout == nil || !strings.Contains(string(res.Stdout), "upstream says hi\nrefused\n") {
		t.Fatalf("stdout %q (stderr %q); want the upstream's answer, then the refusal", res.Stdout, res.Stderr)
	}
	if res.Signal != 9 || res.ExitCode != 137 || res.Outcome != guard.OutcomeFailed || !strings.HasPrefix(res.ImageID, "sha256:") {
		t.Errorf("signal %d exit %d outcome %s image %q; want 9, 137, failed, sha256:...", res.Signal, res.ExitCode, res.Outcome, res.ImageID)
	}
	if res.Egress == nil || len(res.Egress.Attempts) != 2 {
		t.Fatalf("egress audit %+v; want the allowed attempt and the refused one", res.Egress)
	}
	// What the run cost, measured by the host: the cgroup's figures (the 100 MiB the code held
	// before it killed itself) and the proxy's bytes.
	if u := res.Usage; u == nil || u.MeasuredBy != guard.UsageByCgroup || u.CPUTime <= 0 || u.WallTime <= 0 ||
		u.PeakMemoryBytes < 80<<20 || u.PeakMemoryBytes > 120<<20 || u.EgressBytesOut != res.Egress.BytesOut || u.EgressBytesIn != res.Egress.BytesIn || u.EgressBytesIn == 0 {
		t.Errorf("usage %+v; want the cgroup's CPU, wall and about 100 MiB peak, and the proxy's bytes (%d out, %d in)", u, res.Egress.BytesOut, res.Egress.BytesIn)
	}
	ok, refused := res.Egress.Attempts[0], res.Egress.Attempts[1]
	if !ok.Allowed || ok.Host != "127.0.0.1" || strconv.Itoa(int(ok.Port)) != port || ok.BytesIn == 0 {
		t.Errorf("first attempt %+v; want an allowed one to %s that read bytes", ok, target)
	}
	if refused.Allowed || refused.Host != "elsewhere.invalid" || refused.Reason == "" {
		t.Errorf("second attempt %+v; want a refusal of elsewhere.invalid with its reason", refused)
	}
}
