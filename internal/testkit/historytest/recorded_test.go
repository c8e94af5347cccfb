package historytest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/sandboxflow/sandboxflow/internal/testkit/historytest"
	"github.com/sandboxflow/sandboxflow/workflows"
)

// fatal is a testing.TB that records a failure instead of stopping.
type fatal struct {
	testing.TB
	failed string
}

func (f *fatal) Helper()                           {}
func (f *fatal) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

// The receipt run the workflows' replay test replays, as a test would have just recorded it.
const (
	receiptFixture    = "../../../workflows/testdata/runcode_receipt.json"
	receiptWorkflowID = "recorded-receipt"
)

func TestRecordedReplaysWhatWasRecorded(t *testing.T) {
	t.Setenv(historytest.EnvRecord, "")
	f, err := os.Open(receiptFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := tclient.HistoryFromJSON(f, tclient.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(receiptFixture)
	if err != nil {
		t.Fatal(err)
	}
	r := worker.NewWorkflowReplayer()
	workflows.Register(r)
	ok := &fatal{TB: t}
	historytest.Recorded(ok, r, receiptWorkflowID, hist.GetEvents(), receiptFixture)
	if ok.failed != "" {
		t.Errorf("a history that replays: %s", ok.failed)
	}
	if after, _ := os.ReadFile(receiptFixture); string(after) != string(before) {
		t.Errorf("the fixture changed without %s=1", historytest.EnvRecord)
	}

	// A history the workflows no longer produce fails: here no workflow is registered at all.
	bad := &fatal{TB: t}
	historytest.Recorded(bad, worker.NewWorkflowReplayer(), receiptWorkflowID, hist.GetEvents(), receiptFixture)
	if !strings.Contains(bad.failed, "does not replay") {
		t.Errorf("a history that does not replay: failure %q; want it reported", bad.failed)
	}

	// Under the variable, the checked history is written to the fixture's path.
	t.Setenv(historytest.EnvRecord, "1")
	out := filepath.Join(t.TempDir(), "runcode_receipt.json")
	rec := &fatal{TB: t}
	historytest.Recorded(rec, r, receiptWorkflowID, hist.GetEvents(), out)
	if rec.failed != "" {
		t.Fatalf("recording: %s", rec.failed)
	}
	if err := historytest.Replay(r, receiptWorkflowID, out); err != nil {
		t.Errorf("the written history: %v; want it to replay", err)
	}
}
