//go:build integration

package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/sandboxflow/sandboxflow/activities"
	"github.com/sandboxflow/sandboxflow/backends/docker"
	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/need"
	"github.com/sandboxflow/sandboxflow/internal/testkit/reviewertest"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// BenchmarkLiveOutputOverhead is the cost of watching a run: the same approved run, which prints
// 1 MiB (1024 lines of 1 KiB, every byte kept: the policy's stdout cap is 1 MiB, so the live tap
// sees all of it), in a real Docker sandbox (runc) on an in-process server, read once with
// Result (no watcher) and once with Watch (DefaultWatchPoll), in ABBA order. Each op is one
// run, timed from the approval to the result; it reports the median of each kind and the
// watcher's overhead in percent:
//
//	SANDBOXFLOW_REQUIRE_DOCKER=1 go test -tags integration -run '^$' -bench LiveOutputOverhead -benchtime 20x ./client/
func BenchmarkLiveOutputOverhead(b *testing.B) {
	need.Need(b, need.Docker)
	img := os.Getenv("SANDBOXFLOW_TEST_PYTHON_IMAGE")
	if img == "" {
		img = "sandboxflow-test-python:bookworm-full"
	}
	ts := temporaltest.NewServer()
	defer ts.Stop()
	ctx := context.Background()
	tc := ts.GetDefaultClient()
	if err := contract.RegisterSearchAttributes(ctx, tc.OperatorService(), ts.GetDefaultNamespace()); err != nil {
		b.Fatal(err)
	}
	backend, err := docker.New(docker.Config{Image: img, Deployment: "client-bench", Labels: map[string]string{"test.sandboxflow.suite": "client-bench"}})
	if err != nil {
		b.Fatalf("docker backend: %v", err)
	}
	defer backend.Close(context.WithoutCancel(ctx))
	alice := reviewertest.New(b, "alice")
	policy := guard.Policy{Languages: []string{guard.Python}, MaxStdoutBytes: 1 << 20, MaxStderrBytes: 1000, MaxTotalFileBytes: 1000, MaxFileBytes: 1000}
	acts, err := activities.New(activities.Config{Policy: policy, Backend: backend, ReviewersFile: alice.File,
		Sink: activities.SlogSink{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		b.Fatal(err)
	}
	const queue = "bench-live"
	w := worker.New(tc, queue, activities.WorkerOptions(worker.Options{}))
	workflows.Register(w)
	acts.Register(w)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	c, err := client.New(client.Options{Temporal: tc, TaskQueue: queue, Reviewer: alice.Principal})
	if err != nil {
		b.Fatal(err)
	}
	code := "import sys\nline = b'x' * 1023 + b'\\n'\nfor _ in range(1024):\n    sys.stdout.buffer.write(line)\nsys.stdout.flush()\n"
	var sandbox [2][]time.Duration // the result's own duration, without and with a watcher
	run := func(watch bool) time.Duration {
		started, err := c.Start(ctx, guard.Request{Code: code}, client.StartOptions{})
		if err != nil {
			b.Fatal(err)
		}
		begin := time.Now()
		if _, err := c.Approve(ctx, client.Run(started.WorkflowID), started.Digest, alice.Signer, ""); err != nil {
			b.Fatal(err)
		}
		var res guard.Result
		if watch {
			for ev, err := range c.Watch(ctx, started.WorkflowID, client.WatchOptions{}) {
				if err != nil {
					b.Fatal(err)
				}
				if ev.Result != nil {
					res = *ev.Result
				}
			}
		} else if res, err = c.Result(ctx, started.WorkflowID); err != nil {
			b.Fatal(err)
		}
		if len(res.Stdout) != 1<<20 || res.StdoutTruncated {
			b.Fatalf("the run kept %d bytes (truncated %t); want 1 MiB", len(res.Stdout), res.StdoutTruncated)
		}
		k := 0
		if watch {
			k = 1
		}
		sandbox[k] = append(sandbox[k], res.Duration)
		return time.Since(begin)
	}
	run(false) // warm up: image, server, first workflow tasks
	var without, with []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%4 == 0 || i%4 == 3 { // ABBA: neither kind always follows the other
			without = append(without, run(false))
		} else {
			with = append(with, run(true))
		}
	}
	b.StopTimer()
	if len(with) == 0 {
		b.Logf("run with -benchtime 2x or more to compare")
		return
	}
	mw, mo := median(with), median(without)
	b.ReportMetric(float64(mo.Milliseconds()), "ms/run-without-watcher")
	b.ReportMetric(float64(mw.Milliseconds()), "ms/run-with-watcher")
	b.ReportMetric(100*(float64(mw)/float64(mo)-1), "%overhead")
	so, sw := median(sandbox[0][1:]), median(sandbox[1]) // [0][0] is the warm-up's
	b.ReportMetric(100*(float64(sw)/float64(so)-1), "%sandbox-overhead")
	fmt.Fprintf(os.Stderr, "live output overhead: approval to result, median %s without a watcher, %s with one (%d runs each): %+.1f%%; "+
		"the sandbox's own duration %s and %s: %+.1f%%\n",
		mo.Round(time.Millisecond), mw.Round(time.Millisecond), len(with), 100*(float64(mw)/float64(mo)-1),
		so.Round(time.Millisecond), sw.Round(time.Millisecond), 100*(float64(sw)/float64(so)-1))
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
