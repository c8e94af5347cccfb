package activities

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

func TestFinishedEventCountsEgress(t *testing.T) {
	res := guard.Result{Egress: &guard.EgressReport{
		Attempts: []guard.EgressAttempt{
			{Host: "api.example.com", Port: 443, Allowed: true, BytesOut: 10, BytesIn: 20},
			{Host: "evil.example", Port: 443, Reason: "not in the run's egress allowlist"},
		},
		Dropped:  2,
		BytesOut: 10,
		BytesIn:  20,
	}}
	e := finishedEvent(guard.Checked{CheckedSettings: guard.CheckedSettings{Egress: []string{"api.example.com"}}}, contract.RunInput{}, res, nil, time.Second)
	for k, want := range map[string]any{"egress_attempts": 4, "egress_refused": 3, "egress_bytes_out": int64(10), "egress_bytes_in": int64(20)} {
		if got := e.Data[k]; got != want {
			t.Errorf("%s: got %v; want %v", k, got, want)
		}
	}
	if _, ok := finishedEvent(guard.Checked{}, contract.RunInput{}, guard.Result{}, nil, time.Second).Data["egress_attempts"]; ok {
		t.Errorf("a run without egress has egress_attempts in its event")
	}
}

// TestFinishedEventDerivesEveryResultField: the sandbox.finished event says something of every
// field of the result (walked by reflection): the field itself, or for output, files, the
// duration and the egress audit their sizes and counts.
func TestFinishedEventDerivesEveryResultField(t *testing.T) {
	res := guard.Result{Outcome: guard.OutcomeFailed, ExitCode: 137, Signal: 9, ImageID: "sha256:feed", Stdout: []byte{0xff},
		Files: []guard.File{{Name: "a", Size: 1}}, Egress: &guard.EgressReport{}}
	in := contract.RunInput{Decision: contract.Decision{ApprovalID: "ap", Reviewer: "alice"}}
	d := finishedEvent(guard.Checked{Digest: "sha256:x", CheckedSettings: guard.CheckedSettings{Backend: "docker"}}, in, res, nil, time.Second).Data
	derived := map[string]string{"stdout": "stdout_bytes", "stderr": "stderr_bytes", "duration": "duration_ms", "egress": "egress_attempts",
		"receipt": "receipt_sha256", "usage": "usage_measured_by"}
	rt := reflect.TypeFor[guard.Result]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "-" || name == "recovered" { // stays on the host (Measured): its receipt says it; set by the workflow only, after the event
			continue
		}
		key := name
		if k, ok := derived[name]; ok {
			key = k
		}
		if _, ok := d[key]; !ok {
			t.Errorf("event lacks %q (for the result's %q): %v", key, name, d)
		}
	}
	if d["stdout_binary"] != true || d["stderr_binary"] != false || d["signal"] != 9 || d["image_id"] != "sha256:feed" {
		t.Errorf("event %v; want stdout_binary, not stderr_binary, signal 9 and the image", d)
	}
}

func TestFinishedEventCarriesUsage(t *testing.T) {
	res := guard.Result{Usage: &guard.Usage{CPUTime: guard.Duration(2100 * time.Millisecond), WallTime: guard.Duration(2500 * time.Millisecond),
		PeakMemoryBytes: 100 << 20, SandboxPeakMemoryBytes: 120 << 20, FilesBytes: 4096, MeasuredBy: guard.UsageByCgroup}}
	d := finishedEvent(guard.Checked{}, contract.RunInput{}, res, nil, time.Second).Data
	for k, want := range map[string]any{"usage_measured_by": "cgroup", "usage_cpu_time_ms": int64(2100), "usage_wall_time_ms": int64(2500),
		"usage_peak_memory_bytes": int64(100 << 20), "usage_sandbox_peak_memory_bytes": int64(120 << 20), "usage_files_bytes": int64(4096)} {
		if got := d[k]; got != want {
			t.Errorf("%s: got %v (%T); want %v", k, got, got, want)
		}
	}
}
