//go:build integration

package docker

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/internal/testkit/wheeltest"
)

// BenchmarkPackagesEndToEnd is issue 48's figure: approve→result (the Go client's ApproveAndWait
// to its result, the run started untimed) of a run whose lock's environment is in the host's
// cache, against the same run without packages, side by side in one run of worker --dev
// --backend docker --package-index (an index of the benchmark's own on loopback; the lock is
// alpha requiring beta). SANDBOXFLOW_BENCH_SAMPLES rounds (default 30), one of each kind a
// round, for each runtime of SANDBOXFLOW_BENCH_RUNTIMES (default runc). The worker sizes its
// sandbox counts from the host as a new user's does: runs without packages take warm
// containers, runs with packages a container created for them (a warm one has no mount of
// their environment). It prints p50 and p99 of each and their ratio, as docs/benchmarks.md
// quotes them. It runs only with SANDBOXFLOW_BENCH_E2E=1.
func BenchmarkPackagesEndToEnd(b *testing.B) {
	if os.Getenv("SANDBOXFLOW_BENCH_E2E") != "1" {
		b.Skip("set SANDBOXFLOW_BENCH_E2E=1: it builds and starts worker --dev and takes minutes")
	}
	if reason := probeDocker(); reason != "" {
		b.Fatal(reason)
	}
	samples := envInt(b, "SANDBOXFLOW_BENCH_SAMPLES", 30)
	ix := wheeltest.NewIndex(b)
	a := ix.AddWheel(b, wheeltest.Wheel{Name: "alpha", Version: "1.0", Requires: []string{"beta>=2"},
		Files: map[string]string{"alpha/__init__.py": "from beta import B\nA = 'a' + B\n"}})
	bw := ix.AddWheel(b, wheeltest.Wheel{Name: "beta", Version: "2.1", Files: map[string]string{"beta.py": "B = '1'\n"}})
	lock := wheeltest.Line("alpha", "1.0", a) + wheeltest.Line("beta", "2.1", bw)
	workerBin, _ := buildBinaries(b)
	for _, rt := range envList(b, "SANDBOXFLOW_BENCH_RUNTIMES", []string{"runc"}, []string{"runc", RuntimeRunsc, runtimeRunscCurrent}) {
		w := startBenchWorker(b, workerBin, rt, "", "--package-index", ix.URL())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		tc, sc := dialBench(ctx, b, w.addr, benchQueue())
		sample := func(req guard.Request) time.Duration {
			w.settle(b)
			return approveToResult(ctx, b, sc, req)
		}
		plain := guard.Request{Code: "print(1)"}
		withPackages := guard.Request{Code: "import alpha\nprint(alpha.B)", Settings: guard.Settings{Packages: lock}}
		sample(withPackages) // builds the environment: later runs find it in the cache
		before := ix.Requests()
		var without, with []time.Duration
		for range samples {
			without = append(without, sample(plain))
			with = append(with, sample(withPackages))
		}
		if ix.Requests() != before {
			b.Errorf("cached runs made %d requests to the index; want none", ix.Requests()-before)
		}
		d0, d1 := distOf(without), distOf(with)
		fmt.Printf("| %s (%s) | %d | %s / %s | %s / %s | %.2f / %.2f |\n", rt, w.sizing, samples,
			d0.p50.Round(time.Millisecond), d0.p99.Round(time.Millisecond), d1.p50.Round(time.Millisecond), d1.p99.Round(time.Millisecond),
			ratio(d1.p50, d0.p50), ratio(d1.p99, d0.p99))
		tc.Close()
		cancel()
		w.stop()
	}
}

// approveToResult starts req (untimed) and times its approval to its result through the Go
// client; the code must print "1".
func approveToResult(ctx context.Context, b *testing.B, sc *client.Client, req guard.Request) time.Duration {
	started, err := sc.Start(ctx, req, client.StartOptions{})
	if err != nil {
		b.Fatal(err)
	}
	signer, closer, err := client.LoadReviewerKey("") // SANDBOXFLOW_REVIEWER_KEY
	if err != nil {
		b.Fatal(err)
	}
	defer closer.Close()
	approve := time.Now()
	_, wait, err := sc.ApproveAndWait(ctx, client.Run(started.WorkflowID), started.Digest, signer, "")
	if err != nil {
		b.Fatal(err)
	}
	res, err := wait.Get(ctx)
	end := time.Now()
	if err != nil || string(res.Stdout) != "1\n" {
		b.Fatalf("result: %+v, %v", res, err)
	}
	return end.Sub(approve)
}
