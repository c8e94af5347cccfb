//go:build integration

package e2e

// The fault soak: approved runs on the Docker backend while the sandbox worker is SIGKILLed and
// restarted at random moments, with a dockerd restart and a restart of the --dev process while
// runs wait for approval. It uses a dockerd of its own (never the shared one other tests use).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

const (
	soakRuns  = 40
	soakKills = 10
	// soakReapAge is the worker's reaper threshold with the soak's flags: max timeout 10s +
	// grace 2s + one minute + the warm pool's max age 10s (worker/service reapAge).
	soakReapAge = 82 * time.Second
)

// soakDockerd is a dockerd with its own socket, data root, exec root, pid file and config.
type soakDockerd struct {
	dir, sock string
	cmd       *exec.Cmd
	done      chan struct{}
	log       *os.File
}

func startSoakDockerd(t *testing.T, d *soakDockerd) {
	t.Helper()
	if d.dir == "" {
		dir, err := os.MkdirTemp("", "sbfsoak-")
		if err != nil {
			t.Fatal(err)
		}
		d.dir = dir
		d.sock = filepath.Join(dir, "d.sock")
		cfg := `{"runtimes":{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none","--oci-seccomp"]}}}`
		if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if d.log, err = os.Create(filepath.Join(dir, "dockerd.log")); err != nil {
			t.Fatal(err)
		}
	}
	d.cmd = exec.Command("dockerd", "-H", "unix://"+d.sock,
		"--data-root", filepath.Join(d.dir, "data"), "--exec-root", filepath.Join(d.dir, "x"),
		"--pidfile", filepath.Join(d.dir, "pid"), "--config-file", filepath.Join(d.dir, "daemon.json"),
		"--bridge=none", "--iptables=false", "--ip-masq=false", "--ip-forward=false")
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start soak dockerd: %v", err)
	}
	d.done = make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	for i := 0; ; i++ {
		if err := d.docker("info", "--format", "{{.ServerVersion}}").Run(); err == nil {
			return
		}
		if i > 120 {
			b, _ := os.ReadFile(d.log.Name())
			t.Fatalf("soak dockerd did not answer in 60s:\n%s", b)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (d *soakDockerd) docker(args ...string) *exec.Cmd {
	return exec.Command("docker", append([]string{"-H", "unix://" + d.sock}, args...)...)
}

func (d *soakDockerd) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		t.Errorf("soak dockerd did not stop on SIGTERM within 60s")
	}
}

// managed lists the sandbox containers on the soak daemon but those waiting in the warm pool
// named exceptPool (empty: none is excepted).
func (d *soakDockerd) managed(t *testing.T, exceptPool string) []string {
	t.Helper()
	out, err := d.docker("ps", "-a", "--filter", "label=io.sandboxflow.managed=true",
		"--format", `{{.ID}} {{.Names}} pool={{.Label "io.sandboxflow.warm"}}`).Output()
	if err != nil {
		t.Fatalf("docker ps on the soak daemon: %v", err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (exceptPool == "" || f[2] != "pool="+exceptPool) {
			ids = append(ids, f[0])
		}
	}
	return ids
}

// warmRuns counts, per workflow id, the runs a sandbox worker sent to a container of its warm pool
// (whose labels name no run), from the workers' logs.
func warmRuns(logs ...string) map[string]int {
	n := map[string]int{}
	for _, l := range logs {
		for _, line := range strings.Split(l, "\n") {
			if _, rest, ok := strings.Cut(line, "run sent to a warm sandbox"); ok {
				if _, wf, ok := strings.Cut(rest, " workflow_id="); ok {
					n[strings.Fields(wf)[0]]++
				}
			}
		}
	}
	return n
}

// poolID returns the id of the warm pool a worker's log names.
func poolID(t *testing.T, log string) string {
	t.Helper()
	_, rest, ok := strings.Cut(log, "warm pool started")
	if _, id, ok2 := strings.Cut(rest, " pool="); ok && ok2 {
		return strings.Fields(id)[0]
	}
	t.Fatalf("the sandbox worker logged no warm pool:\n%s", log)
	return ""
}

// soakEvents counts container events per workflow id label, from `docker events`.
type soakEvents struct {
	mu     sync.Mutex
	counts map[string]map[string]int // action → workflow id → count
}

func (e *soakEvents) follow(d *soakDockerd) (stop func()) {
	cmd := d.docker("events", "--filter", "type=container", "--filter", "label=io.sandboxflow.managed=true", "--format", "{{json .}}")
	out, err := cmd.StdoutPipe()
	if err != nil || cmd.Start() != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev struct {
				Action string
				Actor  struct{ Attributes map[string]string }
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			e.mu.Lock()
			if e.counts[ev.Action] == nil {
				e.counts[ev.Action] = map[string]int{}
			}
			e.counts[ev.Action][ev.Actor.Attributes["io.sandboxflow.workflow-id"]]++
			e.mu.Unlock()
		}
	}()
	return func() {
		time.Sleep(time.Second) // let the last events arrive
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
	}
}

func TestFaultSoak(t *testing.T) {
	requireDocker(t)
	// The soak starts a dockerd of its own, which needs root.
	need.Need(t, need.Dockerd, need.Root)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	workerBin, starterBin := binaries(t)

	d := &soakDockerd{}
	startSoakDockerd(t, d)
	t.Cleanup(func() {
		for _, id := range d.managed(t, "") {
			_ = d.docker("rm", "-f", id).Run()
		}
		d.stop(t)
		os.RemoveAll(d.dir)
	})
	image := testPythonImage()
	load := fmt.Sprintf("docker save %s | docker -H unix://%s load -q", image, d.sock)
	if out, err := exec.Command("sh", "-c", load).CombinedOutput(); err != nil {
		t.Fatalf("load %s into the soak dockerd: %v\n%s", image, err, out)
	}

	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=soak",
		"DOCKER_HOST=unix://" + d.sock}
	policy := []string{"--task-queue", "soak", "--sandbox-task-queue", "soak-sb", "--max-timeout", "10s",
		"--default-timeout", "5s", "--grace", "2s", "--heartbeat-timeout", "3s"}
	devArgs := append([]string{"--data-dir", data, "--ui-port", "-1", "--role", "workflows"}, policy...)
	sbArgs := append([]string{"--role", "sandboxes", "--backend", "docker", "--docker-image", image,
		"--reviewers", filepath.Join(data, "reviewer", "allowed_signers"), "--host-key", filepath.Join(data, "host", "id_ed25519"),
		"--reap-interval", "5s", "--max-sandboxes", "2", "--warm-sandboxes", "2", "--warm-max-age", "10s"}, policy...)

	dev := startDevWorker(t, workerBin, env, devArgs...)
	sb := startWorker(t, workerBin, env, sbArgs...)
	sbs := []*devWorker{sb}
	s := starterCLI{t: t, bin: starterBin, env: append(env, devReviewerKeyEnv(data))}
	events := &soakEvents{counts: map[string]map[string]int{}}
	stopEvents := events.follow(d)

	runs := make([]startedJSON, soakRuns)
	for i := range runs {
		code := fmt.Sprintf("import time\ntime.sleep(%.2f)\nprint('run %d')\n", 0.2+rand.Float64()*2, i)
		s.mustJSON(&runs[i], "run", "--code", code)
	}
	for _, r := range runs {
		waitPending(t, s, r.WorkflowID)
	}

	// With every run waiting for a person: restart dockerd, then the --dev process.
	stopEvents()
	d.stop(t)
	startSoakDockerd(t, d)
	stopEvents = events.follow(d)
	dev.stop(t)
	startDevWorker(t, workerBin, env, devArgs...) // stopped when t ends
	for _, r := range runs {
		waitPending(t, s, r.WorkflowID)
	}

	// Approve every run while the sandbox worker is SIGKILLed and restarted at random moments.
	var lastKill time.Time
	killed := make(chan struct{})
	var sbMu sync.Mutex
	go func() {
		defer close(killed)
		for range soakKills {
			time.Sleep(time.Duration(1500+rand.IntN(3000)) * time.Millisecond)
			if ctx.Err() != nil {
				return
			}
			sbMu.Lock()
			_ = sb.cmd.Process.Kill()
			<-sb.done
			lastKill = time.Now()
			sb = startWorker(t, workerBin, env, sbArgs...)
			sbs = append(sbs, sb)
			sbMu.Unlock()
		}
	}()
	for _, r := range runs {
		var decided struct{ State string }
		s.mustJSON(&decided, "approve", r.WorkflowID, "--digest", r.Digest)
		time.Sleep(time.Duration(100+rand.IntN(500)) * time.Millisecond)
	}
	<-killed

	var results, unknown int
	for _, r := range runs {
		out, code := s.run("result", r.WorkflowID)
		var res struct {
			Stdout string `json:"stdout"`
			Error  struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Errorf("result of %s: exit %d, %q", r.WorkflowID, code, out)
			continue
		}
		switch {
		case code == 0:
			results++
		case res.Error.Type == "IntegrationError" && strings.Contains(res.Error.Message, "outcome unknown"):
			unknown++
		default:
			t.Errorf("run %s ended neither with a result nor with outcome unknown: %s", r.WorkflowID, out)
		}
	}

	// Every container left by a killed worker is removed by the reaper once it is old enough
	// (the live worker's own warm pool aside); the live worker empties its pool when it stops.
	sbMu.Lock()
	reapBy := lastKill.Add(soakReapAge + 20*time.Second)
	live := poolID(t, sb.output())
	sbMu.Unlock()
	left := d.managed(t, live)
	for len(left) > 0 && time.Now().Before(reapBy) && ctx.Err() == nil {
		time.Sleep(2 * time.Second)
		left = d.managed(t, live)
	}
	sbMu.Lock()
	sb.stop(t)
	var logs []string
	for _, w := range sbs {
		logs = append(logs, w.output())
	}
	sbMu.Unlock()
	if after := d.managed(t, ""); len(after) > len(left) {
		t.Errorf("after the live sandbox worker stopped, %d containers are left (%d before); want its warm pool emptied", len(after), len(left))
	}
	stopEvents()

	events.mu.Lock()
	defer events.mu.Unlock()
	sum := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}
	// A container that names a run started for it; a warm one was started before any run took it,
	// and the worker's log says which run it was sent.
	runsIn := warmRuns(logs...)
	warm := sum(runsIn)
	for wf, n := range events.counts["start"] {
		if wf != "" {
			runsIn[wf] += n
		}
	}
	twice := 0
	for wf, n := range runsIn {
		if n > 1 {
			twice++
			t.Errorf("workflow %s: %d containers started; want at most one", wf, n)
		}
	}
	t.Logf("fault soak: %d runs, %d worker SIGKILLs, 1 dockerd restart, 1 --dev restart: %d results, %d outcome unknown; "+
		"containers created %d, started %d (%d runs sent to warm ones), run twice %d; %d labelled containers left after the reaper",
		soakRuns, soakKills, results, unknown, sum(events.counts["create"]), sum(events.counts["start"]), warm, twice, len(left))
	if results+unknown != soakRuns {
		t.Errorf("%d of %d runs ended with a result or outcome unknown", results+unknown, soakRuns)
	}
	if len(left) > 0 {
		t.Errorf("%d labelled containers left after the reaper's interval: %v", len(left), left)
	}
	if ctx.Err() != nil {
		t.Errorf("the soak ran over its 8 minutes")
	}
}
