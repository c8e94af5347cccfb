package mcpserver

import (
	"testing"

	"github.com/sandboxflow/sandboxflow/client"
	"github.com/sandboxflow/sandboxflow/guard"
)

func TestLiveMessageIsEscapedText(t *testing.T) {
	for _, tc := range []struct {
		ch   client.Chunk
		want string
	}{
		{client.Chunk{Stream: guard.StreamStdout, Bytes: []byte("hi\n")}, "live stdout (unsigned): hi\n"},
		{client.Chunk{Stream: guard.StreamStderr, Skipped: 99, Bytes: []byte("\x1b[2J\xff")}, `live stderr (unsigned): [99 bytes skipped] \x1b[2J\xff`},
		{client.Chunk{Stream: guard.StreamStdout, Bytes: []byte("\x1b]52;c;aGk=\x07\u202e")}, `live stdout (unsigned): \x1b]52;c;aGk=\x07\u202e`},
	} {
		if got := liveMessage(tc.ch); got != tc.want {
			t.Errorf("liveMessage(%q) = %q; want %q", tc.ch.Bytes, got, tc.want)
		}
	}
}
