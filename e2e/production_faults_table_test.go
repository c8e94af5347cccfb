//go:build integration

package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	"golang.org/x/crypto/ssh"

	"github.com/sandboxflow/sandboxflow/receipt"
)

// pfDockerdRestart is the one fault that may leave runs "outcome unknown": it kills the
// containers, and their reports with them.
const pfDockerdRestart = "dockerd restart"

// pfFaultSpan is one injected fault: its kind and when it began and ended.
type pfFaultSpan struct {
	kind       string
	start, end time.Time
}

// pfHostKeys writes a signing key for each of n sandbox hosts (named pf-host-I) and the hosts
// file that lists them, so that the hosts sign receipts and late results can be verified.
func pfHostKeys(t *testing.T, n int) (keys []string, hostsFile string) {
	t.Helper()
	dir := t.TempDir()
	var lines []string
	for i := range n {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		block, err := ssh.MarshalPrivateKey(priv, "")
		if err != nil {
			t.Fatal(err)
		}
		key := filepath.Join(dir, fmt.Sprintf("host-%d", i))
		if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		spub, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
		lines = append(lines, receipt.HostLine(pfHostName(i), spub))
	}
	hostsFile = filepath.Join(dir, "hosts")
	if err := os.WriteFile(hostsFile, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return keys, hostsFile
}

func pfHostName(i int) string { return fmt.Sprintf("pf-host-%d", i) }

// pfKindOf is the fault a run that ran from from to to went through: a fault whose span,
// lengthened by the heartbeat timeout and the late-result wait (an attempt it cut may end that
// much later), overlaps the run's; a dockerd restart before any other (it alone may leave a run
// unknown), else the earliest; "none" when no fault overlaps.
func pfKindOf(spans []pfFaultSpan, from, to time.Time, reach time.Duration) string {
	kind := "none"
	for _, s := range spans {
		if s.start.After(to) || s.end.Add(reach).Before(from) {
			continue
		}
		if s.kind == pfDockerdRestart {
			return s.kind
		}
		if kind == "none" {
			kind = s.kind
		}
	}
	return kind
}

// pfOnlyKilled reports whether every fault span that reached the run from..to (see pfKindOf) was
// a sandbox host's SIGKILL: the one fault after which a run whose code never started must run
// it (the worker started again on the host releases the claim its spool kept).
func pfOnlyKilled(spans []pfFaultSpan, from, to time.Time, reach time.Duration) bool {
	n := 0
	for _, s := range spans {
		if s.start.After(to) || s.end.Add(reach).Before(from) {
			continue
		}
		if s.kind != pfHostKill {
			return false
		}
		n++
	}
	return n > 0
}

// pfHostKill is the fault kind of a sandbox host's SIGKILL (it is restarted a second later).
const pfHostKill = "sandbox host SIGKILL"

// pfOutcomes counts how the runs that went through one fault kind ended.
type pfOutcomes struct {
	results, recovered, unknown, unstarted, otherTyped, twice int
}

// pfTable is the runs' outcomes per fault kind.
type pfTable map[string]*pfOutcomes

func (tb pfTable) of(kind string) *pfOutcomes {
	if tb[kind] == nil {
		tb[kind] = &pfOutcomes{}
	}
	return tb[kind]
}

// log prints the table, one row per fault kind.
func (tb pfTable) log(t *testing.T) {
	kinds := make([]string, 0, len(tb))
	for k := range tb {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	fmt.Fprintf(&b, "runs per fault kind they went through (recovered: of the results, delivered late; unknown: outcome unknown after the code started, as the upstream counted; unstarted: outcome unknown, the code never started):\n%-36s %8s %10s %8s %10s %12s %7s\n",
		"fault", "result", "recovered", "unknown", "unstarted", "other error", "twice")
	for _, k := range kinds {
		o := tb[k]
		fmt.Fprintf(&b, "%-36s %8d %10d %8d %10d %12d %7d\n", k, o.results, o.recovered, o.unknown, o.unstarted, o.otherTyped, o.twice)
	}
	t.Log(b.String())
}

// pfClosed returns when the workflow id closed (now when it is still open, or cannot be asked).
func pfClosed(ctx context.Context, tc tclient.Client, id string) time.Time {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil || resp.GetWorkflowExecutionInfo().GetCloseTime() == nil {
		return time.Now()
	}
	return resp.GetWorkflowExecutionInfo().GetCloseTime().AsTime()
}
