package docker

import (
	"testing"

	"github.com/sandboxflow/sandboxflow/guard"
)

func TestWithUsageKeepsTheProxysFigures(t *testing.T) {
	res := guard.Result{Usage: &guard.Usage{EgressBytesOut: 10, EgressBytesIn: 20}}
	got := withUsage(res, &guard.Usage{CPUTime: 5, MeasuredBy: guard.UsageByCgroup}, &exitReport{FilesBytes: 4096}).Usage
	want := guard.Usage{CPUTime: 5, MeasuredBy: guard.UsageByCgroup, EgressBytesOut: 10, EgressBytesIn: 20, FilesBytes: 4096}
	if got == nil || *got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
	// An unreadable files figure (-1) is left at 0; no cgroup reading leaves the result as it was.
	if got := withUsage(guard.Result{}, &guard.Usage{}, &exitReport{FilesBytes: -1}).Usage; got == nil || got.FilesBytes != 0 {
		t.Errorf("files unknown: got %+v; want 0", got)
	}
	if got := withUsage(res, nil, nil).Usage; got != res.Usage {
		t.Errorf("no reading: got %+v; want the result's own", got)
	}
}

func TestDoctorFailsWithoutUsage(t *testing.T) {
	if c := usageCheck(nil); c.OK {
		t.Errorf("no usage: got %+v; want a failed check", c)
	}
	if c := usageCheck(&guard.Usage{EgressBytesOut: 1}); c.OK {
		t.Errorf("egress figures only: got %+v; want a failed check", c)
	}
	if c := usageCheck(&guard.Usage{CPUTime: 1, MeasuredBy: guard.UsageByCgroup}); !c.OK {
		t.Errorf("cgroup figures: got %+v; want a passed check", c)
	}
}
