// Package jsontest pins the exact JSON of a value, for tests of encodings that history records
// or that other programs read: a change of the Go types (a field moved into an embedded struct,
// say) must not change a byte. Test-only.
package jsontest

import (
	"encoding/json"
	"testing"
)

// Pinned fails t unless v encodes (encoding/json) to exactly want; name says what v is.
func Pinned(t testing.TB, name string, v any, want string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if string(b) != want {
		t.Errorf("%s encodes as\n%s\nwant\n%s", name, b, want)
	}
}
