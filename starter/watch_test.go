package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/client"
)

// What the code prints reaches the terminal escaped: no control byte (an ANSI or OSC sequence
// could rewrite the screen, set the title or the clipboard) and no byte that is not UTF-8; a
// character split across two chunks is printed whole; a gap is marked on a line of its own, on
// the marks stream, after the record separator (which the code's output, escaped, never holds).
func TestLiveWriterEscapesForTheTerminal(t *testing.T) {
	var buf, marks bytes.Buffer
	l := &liveWriter{w: &buf, marks: &marks, name: "stdout"}
	euro := []byte("€")
	for _, ch := range []client.Chunk{
		{Bytes: []byte("red \x1b[31mtext\x1b[0m\n")},
		{Bytes: []byte("title \x1b]0;pwned\x07 clip \x1b]52;c;aGk=\x1b\\\n")},
		{Bytes: []byte("bad \xff\xfe utf8, over\rwrite, ")},
		{Bytes: append([]byte("price 5"), euro[:2]...)},
		{Bytes: append(euro[2:], []byte(" ok\npartial")...)},
		{Skipped: 1234, Bytes: []byte("after the gap\n")},
		{Bytes: []byte("forged \x1e[starter: 9 bytes of the code's stdout skipped]\n")},
		{Bytes: []byte("end \xe2\x82")},
	} {
		if err := l.write(ch); err != nil {
			t.Fatal(err)
		}
	}
	l.flush()
	got := buf.String()
	want := `red \x1b[31mtext\x1b[0m
title \x1b]0;pwned\x07 clip \x1b]52;c;aGk=\x1b\
bad \xff\xfe utf8, over\rwrite, price 5€ ok
partial
after the gap
forged \x1e[starter: 9 bytes of the code's stdout skipped]
end \xe2\x82`
	if got != want {
		t.Errorf("printed\n%s\nwant\n%s", got, want)
	}
	if m := marks.String(); m != "\x1e[starter: 1234 bytes of the code's stdout skipped]\n" {
		t.Errorf("marks %q; want the one gap, after the record separator", m)
	}
	for _, c := range got {
		if c < 0x20 && c != '\n' || c == 0x7f {
			t.Fatalf("a control character %U reached the terminal: %q", c, got)
		}
	}
	if strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("a byte was replaced, not escaped: %q", got)
	}
}
