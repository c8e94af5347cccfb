package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sandboxflow/sandboxflow/backends/docker"
)

func TestDoctorFailsOnAMissingOrBadReviewersFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("alice ssh-rsa AAAA\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "absent")
	for _, tc := range []struct {
		name string
		cfg  Options
		want string // in the error; "" for a pass
	}{
		{"none given", Options{}, "--reviewers FILE"},
		{"none given with --dev", Options{Dev: true}, ""},
		{"missing", Options{Reviewers: missing}, missing},
		{"does not parse", Options{Reviewers: bad}, bad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			detail, err := checkReviewers(&tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v; want a pass", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %q, %v; want an error naming %q", detail, err, tc.want)
			}
		})
	}
}

func TestDoctorFailsOnAHostsFileThatDoesNotParse(t *testing.T) {
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("not a hosts line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, shown, err := checkReceipts(&Options{Hosts: hosts, HostName: "h"})
	if !shown || err == nil || !strings.Contains(err.Error(), "--hosts "+hosts) {
		t.Fatalf("receipts line shown %v, error %v; want a failure naming --hosts %s", shown, err, hosts)
	}
}

// fakeQueues answers DescribeTaskQueue with the pollers of each queue and kind.
type fakeQueues map[string]int

func (f fakeQueues) DescribeTaskQueue(_ context.Context, q string, kind enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	n, ok := f[q+"/"+kind.String()]
	if !ok {
		return nil, errors.New("unknown queue")
	}
	resp := &workflowservice.DescribeTaskQueueResponse{}
	for range n {
		resp.Pollers = append(resp.Pollers, &taskqueuepb.PollerInfo{Identity: "w@host"})
	}
	return resp, nil
}

func TestDoctorFailsNamingAnUnpolledQueue(t *testing.T) {
	cfg := &Options{TaskQueue: "agents", SandboxTaskQueue: "sandboxes"}
	checks := checkPollers(context.Background(), fakeQueues{
		"agents/" + enumspb.TASK_QUEUE_TYPE_WORKFLOW.String():    1,
		"sandboxes/" + enumspb.TASK_QUEUE_TYPE_ACTIVITY.String(): 0,
	}, cfg)
	if len(checks) != 2 {
		t.Fatalf("got %d lines; want 2: %+v", len(checks), checks)
	}
	if !checks[0].ok || !strings.Contains(checks[0].name, "agents") {
		t.Errorf("workflow queue line %+v; want a pass naming agents", checks[0])
	}
	if c := checks[1]; c.ok || !strings.Contains(c.detail, "no worker polls task queue sandboxes") || !strings.Contains(c.detail, "--role sandboxes") {
		t.Errorf("sandbox queue line %+v; want a failure naming sandboxes and the role to start", c)
	}
	// One queue for both: both kinds are asked of it.
	one := checkPollers(context.Background(), fakeQueues{
		"agents/" + enumspb.TASK_QUEUE_TYPE_WORKFLOW.String(): 1,
		"agents/" + enumspb.TASK_QUEUE_TYPE_ACTIVITY.String(): 1,
	}, &Options{TaskQueue: "agents"})
	for _, c := range one {
		if !c.ok {
			t.Errorf("%+v; want a pass", c)
		}
	}
}

func TestDoctorProbeStartsNoWarmPool(t *testing.T) {
	if got := doctorDockerConfig(docker.Config{WarmSandboxes: 16}).WarmSandboxes; got != 0 {
		t.Errorf("doctor's docker config has WarmSandboxes %d; want 0", got)
	}
}
