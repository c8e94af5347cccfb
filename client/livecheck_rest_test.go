package client

import (
	"testing"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// A stream that is not valid UTF-8 reaches the result as text (each run of invalid bytes one
// U+FFFD): the rest after the last heartbeat is still found, past the text of what was shown.
func TestRestFindsTheTailOfABinaryStream(t *testing.T) {
	var c LiveCursor
	shown := []byte("line 1\nbad \xff\xfe\nline 2\n\xe2\x82") // ends inside a €
	c.Take("a1", contract.LiveOutput{Seq: 1, Stdout: contract.LiveChunk{Offset: 0, Total: int64(len(shown)), Bytes: shown}})
	res := guard.Result{Stdout: []byte("line 1\nbad \uFFFD\nline 2\n€ line 3\n"), StdoutBinary: true}
	rest := c.Rest(res)
	if len(rest) != 1 || string(rest[0].Bytes) != "€ line 3\n" {
		t.Fatalf("Rest = %+v; want the split € and line 3", rest)
	}
	// After a gap nothing can be placed.
	var g LiveCursor
	g.Take("a1", contract.LiveOutput{Seq: 1, Stdout: contract.LiveChunk{Offset: 5, Total: 8, Bytes: []byte("abc")}})
	if rest := g.Rest(res); len(rest) != 0 {
		t.Fatalf("Rest after a gap = %+v; want none", rest)
	}
}
