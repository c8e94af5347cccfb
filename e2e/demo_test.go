//go:build integration

package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestDemoScript runs the README's main command (make demo → scripts/demo.sh) as written, on free
// ports, answering the approval prompt the way a person at the terminal would: examples/chart.py
// in the data image, pandas and matplotlib imported and run in the hardened sandbox.
func TestDemoScript(t *testing.T) {
	requireDataImage(t)
	cmd := exec.Command("scripts/demo.sh")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS=127.0.0.1:"+strconv.Itoa(freePort(t)),
		"SANDBOXFLOW_UI_PORT="+strconv.Itoa(freePort(t)),
		"SANDBOXFLOW_DATA_DIR="+t.TempDir(),
		"SANDBOXFLOW_DOCKER_IMAGE="+testDataImage(),
		"SANDBOXFLOW_DEMO_CODE=",
		"SANDBOXFLOW_KEY_FILE=",
		"USER=alice") // worker --dev makes the reviewer key for $USER; the demo signs with it
	cmd.Stdin = strings.NewReader("alice\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	for _, want := range []string{
		"What the reviewer sees", "awaiting_approval", "sha256:", "1 | # A sample run for the demo",
		"Approve this exact code?", `"reviewer":"alice"`, `"ok":true`, `"image_id":"sha256:`, `mean     19.03  13.58    5.44`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
