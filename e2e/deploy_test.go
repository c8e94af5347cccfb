//go:build integration

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
)

// requireTool returns the path of the tool r provides (need.Need has checked it is there).
func requireTool(t *testing.T, r need.Requirement, name string) string {
	t.Helper()
	need.Need(t, r)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestComposeFileIsValid validates docker-compose.yml with docker-compose itself and checks that it
// registers every search attribute RunCode sets and warns about the Docker socket.
func TestComposeFileIsValid(t *testing.T) {
	compose := requireTool(t, need.DockerCompose, "docker-compose")
	file := filepath.Join("..", "docker-compose.yml")
	cmd := exec.Command(compose, "-f", file, "config", "-q")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
	out, err := exec.Command(compose, "-f", file, "config", "--services").Output()
	if err != nil {
		t.Fatal(err)
	}
	services := strings.Fields(string(out))
	sort.Strings(services)
	for _, want := range []string{"postgresql", "search-attributes", "temporal", "temporal-ui", "worker"} {
		if i := sort.SearchStrings(services, want); i >= len(services) || services[i] != want {
			t.Errorf("docker-compose.yml has no service %q (services: %v)", want, services)
		}
	}
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range contract.SearchAttributeNames() {
		if !strings.Contains(string(text), name) {
			t.Errorf("docker-compose.yml does not create the search attribute %s", name)
		}
	}
	if !strings.Contains(string(text), "root on this host") {
		t.Errorf("docker-compose.yml does not warn that the Docker socket is root on the host")
	}
}

// TestSandboxWorkersRespectTheirCap runs a workflow worker with an embedded server and two sandbox
// workers on one sandbox task queue, each capped at one sandbox, and approves four runs at once:
// all four finish, and no worker ever runs two at a time.
func TestSandboxWorkersRespectTheirCap(t *testing.T) {
	workerBin, starterBin := binaries(t)
	data := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	env := []string{"TEMPORAL_ADDRESS=" + addr, "SANDBOXFLOW_KEY_FILE=", "SANDBOXFLOW_TASK_QUEUE=cap-wf",
		"SANDBOXFLOW_REVIEWER_KEY=" + filepath.Join(data, "reviewer", "id_ed25519")}
	common := []string{"--backend", "local", "--allow-unsafe-local", "--sandbox-task-queue", "cap-sbx"}
	startDevWorker(t, workerBin, env, append([]string{"--data-dir", data, "--ui-port", "-1", "--role", "workflows"}, common...)...)
	for i := 0; i < 2; i++ {
		// The sandbox hosts verify every approval against their own reviewers file.
		startWorker(t, workerBin, env, append([]string{"--role", "sandboxes", "--max-sandboxes", "1",
			"--reviewers", filepath.Join(data, "reviewer", "allowed_signers"), "--host-key", filepath.Join(data, "host", "id_ed25519")}, common...)...)
	}
	s := starterCLI{t: t, bin: starterBin, env: env}

	log := filepath.Join(codeWritableDir(t), "intervals.txt")
	// Each run records which worker process ran it (its parent) and when it started and ended.
	code := fmt.Sprintf(`import os, time
start = time.time()
time.sleep(1.5)
with open(%q, "a") as f:
    f.write("%%d %%f %%f\n" %% (os.getppid(), start, time.time()))
`, log)
	var runs []startedJSON
	for i := 0; i < 4; i++ {
		var st startedJSON
		s.mustJSON(&st, "run", "--code", code+fmt.Sprintf("# run %d\n", i))
		runs = append(runs, st)
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func(r startedJSON) {
			defer wg.Done()
			s.mustJSON(&struct{}{}, "approve", r.WorkflowID, "--digest", r.Digest)
		}(r)
	}
	wg.Wait()
	for _, r := range runs {
		var res resultJSON
		s.mustJSON(&res, "result", r.WorkflowID)
		if !res.OK {
			t.Fatalf("run %s: %+v", r.WorkflowID, res)
		}
	}
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type interval struct{ start, end float64 }
	byWorker := map[int][]interval{}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var pid int
		var iv interval
		if _, err := fmt.Sscanf(sc.Text(), "%d %f %f", &pid, &iv.start, &iv.end); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		byWorker[pid] = append(byWorker[pid], iv)
		n++
	}
	if n != 4 {
		t.Fatalf("%d runs recorded; want 4", n)
	}
	if len(byWorker) != 2 {
		t.Errorf("runs spread over %d worker processes; want 2", len(byWorker))
	}
	for pid, ivs := range byWorker {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start < ivs[j].start })
		for i := 1; i < len(ivs); i++ {
			if ivs[i].start < ivs[i-1].end {
				t.Errorf("worker %d ran two sandboxes at once: %+v and %+v", pid, ivs[i-1], ivs[i])
			}
		}
	}
}
