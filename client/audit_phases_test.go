package client

import (
	"testing"

	"github.com/sandboxflow/sandboxflow/contract"
)

func TestPhasesText(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	p := &contract.AuditPhases{CheckMS: ms(12), WaitMS: ms(303_000), QueueMS: ms(0), SandboxStartMS: ms(65), RunMS: ms(1_512), ReceiptMS: ms(3)}
	if got, want := PhasesText(p), "check 12 ms, wait for a person 5m, queue 0 ms, sandbox start 65 ms, run 1.5 s, receipt 3 ms"; got != want {
		t.Errorf("PhasesText = %q; want %q", got, want)
	}
	if got := PhasesText(&contract.AuditPhases{CheckMS: ms(4), WaitMS: ms(70)}); got != "check 4 ms, wait for a person 70 ms" {
		t.Errorf("a denied run's phases: %q", got)
	}
	if PhasesText(nil) != "" {
		t.Error("no phases should write nothing")
	}
}
