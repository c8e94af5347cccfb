//go:build integration

package docker

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// testDataImage is the data-science image scripts/setup-docker.sh builds (Debian's numpy, pandas
// and matplotlib), or SANDBOXFLOW_DATA_PYTHON_IMAGE.
func testDataImage() string {
	if img := os.Getenv("SANDBOXFLOW_DATA_PYTHON_IMAGE"); img != "" {
		return img
	}
	return "sandboxflow-data-python:bookworm"
}

// needDataImage stops the test when Docker or the data image is missing: a skip, or a failure
// where Docker is required (make test), as for the test images probeDocker checks.
func needDataImage(t *testing.T) {
	t.Helper()
	needDocker(t)
	eng, err := newDockerEngine("")
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := eng.ImagePresent(ctx, testDataImage())
	switch {
	case err != nil:
		unavailable(t, fmt.Sprintf("look for the data image %s: %v", testDataImage(), err))
	case !ok:
		unavailable(t, fmt.Sprintf("the data image %s is missing; run scripts/setup-docker.sh", testDataImage()))
	}
}
