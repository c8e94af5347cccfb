package activities

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// TestSpoolAdoptsOnlyTheRunsOfWorkersThatAreGone: a worker's spool entries are adopted by
// another worker only once the first one is gone (its lock dropped, as the kernel drops a dead
// process's), by one adopter at a time, and a handled spool leaves nothing behind.
func TestSpoolAdoptsOnlyTheRunsOfWorkersThatAreGone(t *testing.T) {
	root := filepath.Join(t.TempDir(), "spool")
	first, err := openSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	e := spooled{Namespace: "default", Owner: guard.Owner{WorkflowID: "wf", RunID: "run", ActivityID: "7"},
		Sandbox: "c0ffee", Digest: "sha256:ab", Backend: "docker", Claim: "commitment", ApprovalID: "ap",
		Approvals: []guard.Approval{{ApprovalID: "ap", Reviewer: "alice", Fingerprint: "SHA256:x"}},
		Started:   time.Now().UTC().Round(0)}
	drop, err := first.put(e)
	if err != nil {
		t.Fatal(err)
	}
	second, err := openSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := second.orphans(); err != nil || len(o) != 0 {
		t.Fatalf("orphans while the first worker lives: %v, %v; want none", o, err)
	}

	first.lock.Close() // the first worker dies
	orphans, err := second.orphans()
	if err != nil || len(orphans) != 1 || len(orphans[0].entries) != 1 {
		t.Fatalf("orphans once the first worker is gone: %+v, %v; want its spool with one entry", orphans, err)
	}
	third, err := openSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := third.orphans(); len(o) != 0 {
		t.Errorf("a third worker took %d orphans while the second adopts them; want none", len(o))
	}
	got, err := readEntry(orphans[0].entries[0])
	if err != nil || !reflect.DeepEqual(got, e) {
		t.Errorf("entry read back: %+v, %v; want %+v", got, err, e)
	}
	orphans[0].done()
	drop() // the first worker's drop after its spool went: nothing happens
	names, _ := os.ReadDir(root)
	for _, n := range names {
		if id := n.Name(); id != second.id && id != second.id+".lock" && id != third.id && id != third.id+".lock" {
			t.Errorf("left in the spool: %s", id)
		}
	}
}
