package guard

import (
	"bytes"
	"context"
	"testing"
)

func TestCapBufferTeeGetsExactlyTheKeptBytesInOrder(t *testing.T) {
	var got bytes.Buffer
	var streams []Stream
	c := NewCapBuffer(10).Tee(func(s Stream, p []byte) {
		streams = append(streams, s)
		got.Write(p)
	}, StreamStderr)
	for _, w := range []string{"abc", "defg", "hijklmn", "opq"} {
		if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w, n, err)
		}
	}
	if got.String() != "abcdefghij" || !bytes.Equal(c.Bytes(), got.Bytes()) {
		t.Fatalf("tee got %q, buffer kept %q; want both abcdefghij", got.String(), c.Bytes())
	}
	if len(streams) != 3 || streams[0] != StreamStderr {
		t.Fatalf("tee called %d times with %v; want 3 calls for stderr (nothing past the cap)", len(streams), streams)
	}
}

func TestOutputOfReturnsWhatWithOutputSet(t *testing.T) {
	if OutputOf(context.Background()) != nil {
		t.Fatal("a bare context has an OutputFunc")
	}
	var called bool
	ctx := WithOutput(context.Background(), func(Stream, []byte) { called = true })
	OutputOf(ctx)(StreamStdout, []byte("x"))
	if !called {
		t.Fatal("OutputOf did not return the function WithOutput set")
	}
	// A nil tee is no tee.
	if _, err := NewCapBuffer(4).Tee(nil, StreamStdout).Write([]byte("abcdef")); err != nil {
		t.Fatal(err)
	}
}
