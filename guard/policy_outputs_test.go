package guard

import "testing"

// TestOutputCapsFitWhatOtherCapsLeave: a policy written before outputs, with files at the old
// 1 MiB default, stays valid, its outputs getting what the payload budgets leave; the defaults
// keep 512 KiB for outputs; caps set by the policy are kept, and refused when too large.
func TestOutputCapsFitWhatOtherCapsLeave(t *testing.T) {
	old := Policy{MaxTotalFileBytes: 1 << 20}
	if err := old.Validate(); err != nil {
		t.Fatalf("a policy with 1 MiB of files: %v", err)
	}
	got := old.WithDefaults()
	if got.MaxTotalOutputBytes <= 0 || got.MaxTotalOutputBytes >= DefaultMaxTotalOutputBytes || got.MaxOutputBytes > got.MaxTotalOutputBytes {
		t.Errorf("outputs %d in all, %d each; want what is left, under the default", got.MaxTotalOutputBytes, got.MaxOutputBytes)
	}
	if d := (Policy{}).WithDefaults(); d.MaxTotalOutputBytes != DefaultMaxTotalOutputBytes || d.MaxOutputBytes != DefaultMaxOutputBytes {
		t.Errorf("defaults: outputs %d in all, %d each; want %d and %d", d.MaxTotalOutputBytes, d.MaxOutputBytes, DefaultMaxTotalOutputBytes, DefaultMaxOutputBytes)
	}
	if err := (Policy{MaxTotalFileBytes: 1 << 20, MaxTotalOutputBytes: 512 << 10}).Validate(); err == nil {
		t.Error("a policy whose files and outputs together pass the payload budget was accepted")
	}
}
