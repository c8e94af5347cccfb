package local

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// The local backend passes output to the context's OutputFunc while the code runs, not at its end.
func TestOutputReachesTheTapWhileTheCodeRuns(t *testing.T) {
	b, _ := newBackend(t)
	var mu sync.Mutex
	var out []byte
	first := make(chan time.Time, 1)
	ctx := guard.WithOutput(context.Background(), func(s guard.Stream, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if s == guard.StreamStdout {
			if len(out) == 0 {
				first <- time.Now()
			}
			out = append(out, p...)
		}
	})
	code := "import time\nprint('one', flush=True)\ntime.sleep(1.5)\nprint('two', flush=True)\n"
	res, err := b.Run(ctx, check(t, guard.Request{Code: code, Language: guard.Python}))
	end := time.Now()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if string(out) != "one\ntwo\n" || string(res.Stdout) != string(out) {
		t.Fatalf("tap got %q, result %q; want both %q", out, res.Stdout, "one\ntwo\n")
	}
	if got := end.Sub(<-first); got < time.Second {
		t.Fatalf("the first line reached the tap %s before the run ended; want it while the code slept (>= 1 s)", got)
	}
}
