//go:build integration

package pysource

import (
	"os"
	"os/exec"
	"testing"
)

// TestStdlibTableImagePython checks the table against the python3 of the image the Docker tests
// run (SANDBOXFLOW_TEST_PYTHON_IMAGE, default sandboxflow-test-python:bookworm-full).
func TestStdlibTableImagePython(t *testing.T) {
	img := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE")
	if img == "" {
		img = "sandboxflow-test-python:bookworm-full"
	}
	out, err := exec.Command("docker", "run", "--rm", "--network", "none", img, "python3", "-c", stdlibNamesScript).Output()
	if err != nil {
		if os.Getenv("SANDBOXFLOW_REQUIRE_DOCKER") != "" {
			t.Fatalf("docker run %s: %v", img, err)
		}
		t.Skipf("docker run %s: %v", img, err)
	}
	checkStdlibTable(t, out)
}
