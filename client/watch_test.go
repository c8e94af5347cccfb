package client

import (
	"testing"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

func TestLiveCursorCountsWhatItMissed(t *testing.T) {
	var c LiveCursor
	stream := []byte("0123456789abcdefghij")
	chunk := func(from, to int) contract.LiveChunk {
		return contract.LiveChunk{Offset: int64(from), Total: int64(to), Bytes: stream[from:to]}
	}
	type want struct {
		bytes   string
		offset  int64
		skipped int64
	}
	for i, step := range []struct {
		activity string
		lo       contract.LiveOutput
		want     []want
	}{
		{"1", contract.LiveOutput{Seq: 1}, nil},
		{"1", contract.LiveOutput{Seq: 2, Stdout: chunk(0, 4)}, []want{{"0123", 0, 0}}},
		{"1", contract.LiveOutput{Seq: 2, Stdout: chunk(0, 4)}, nil},                                                     // read twice
		{"1", contract.LiveOutput{Seq: 3, Stdout: chunk(2, 6)}, []want{{"45", 4, 0}}},                                    // overlaps
		{"1", contract.LiveOutput{Seq: 5, Stdout: chunk(9, 12)}, []want{{"9ab", 9, 3}}},                                  // missed 678
		{"1", contract.LiveOutput{Seq: 6, Stdout: contract.LiveChunk{Offset: 12, Total: 99, Bytes: stream[12:14]}}, nil}, // does not add up
		{"1", contract.LiveOutput{Seq: 7, Stderr: chunk(0, 2)}, []want{{"01", 0, 0}}},
		{"2", contract.LiveOutput{Seq: 1, Stdout: chunk(1, 3)}, []want{{"12", 1, 1}}}, // another activity starts again
	} {
		got := c.Take(step.activity, step.lo)
		if len(got) != len(step.want) {
			t.Fatalf("step %d: %d chunks %+v; want %d", i, len(got), got, len(step.want))
		}
		for j, w := range step.want {
			if string(got[j].Bytes) != w.bytes || got[j].Offset != w.offset || got[j].Skipped != w.skipped || got[j].Seq != step.lo.Seq {
				t.Errorf("step %d chunk %d: %q at %d skipped %d seq %d; want %q at %d skipped %d", i, j, got[j].Bytes, got[j].Offset, got[j].Skipped, got[j].Seq, w.bytes, w.offset, w.skipped)
			}
		}
	}
	big := make([]byte, contract.MaxLiveChunkBytes+100)
	got := c.Take("3", contract.LiveOutput{Seq: 9, Stdout: contract.LiveChunk{Offset: 0, Total: int64(len(big)), Bytes: big}})
	if len(got) != 1 || len(got[0].Bytes) != contract.MaxLiveChunkBytes || got[0].Skipped != 100 || got[0].Offset != 100 {
		t.Errorf("a chunk over the bound: %d bytes at %d, skipped %d; want the newest %d, 100 skipped", len(got[0].Bytes), got[0].Offset, got[0].Skipped, contract.MaxLiveChunkBytes)
	}
	c = LiveCursor{ActivityID: "2", Stdout: 3, Stderr: 0}
	rest := c.Rest(guard.Result{Stdout: stream[:8], Stderr: []byte("01xyz")})
	if len(rest) != 2 || string(rest[0].Bytes) != "34567" || rest[0].Stream != guard.StreamStdout || string(rest[1].Bytes) != "01xyz" || rest[1].Offset != 0 {
		t.Errorf("Rest = %+v; want stdout 34567 at 3 and stderr 01xyz at 0 (the second activity read none of it)", rest)
	}
	if rest := c.Rest(guard.Result{Stdout: []byte("0123456789"), StdoutBinary: true}); len(rest) != 0 {
		t.Errorf("Rest of a binary stream = %+v; want none (its text counts other bytes)", rest)
	}
}

func TestSplitIncompleteHoldsASplitCharacter(t *testing.T) {
	for _, tc := range []struct{ in, whole, rest string }{
		{"", "", ""},
		{"abc", "abc", ""},
		{"a€", "a€", ""},
		{"a\xe2\x82", "a", "\xe2\x82"},
		{"a\xe2", "a", "\xe2"},
		{"a\xf0\x9f\x98", "a", "\xf0\x9f\x98"},
		{"a\xff", "a\xff", ""},                 // not a start of anything: printed (escaped) now
		{"a\x82\x82\x82", "a\x82\x82\x82", ""}, // continuation bytes with no start
	} {
		whole, rest := SplitIncomplete([]byte(tc.in))
		if string(whole) != tc.whole || string(rest) != tc.rest {
			t.Errorf("SplitIncomplete(%q) = %q, %q; want %q, %q", tc.in, whole, rest, tc.whole, tc.rest)
		}
	}
}
