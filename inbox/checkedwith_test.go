package inbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxflow/sandboxflow/approval"
)

// A run takes decisions only from the keys its check recorded: a key listed since is refused
// with that reason; when the record cannot be read the workflow judges, and the inbox says nothing.
func TestCheckedWith(t *testing.T) {
	keys := []approval.Key{{Fingerprint: "SHA256:alice"}}
	for _, tc := range []struct {
		name        string
		keys        []approval.Key
		readErr     error
		fingerprint string
		want        string
	}{
		{"recorded", keys, nil, "SHA256:alice", ""},
		{"listed after the check", keys, nil, "SHA256:carol", "this run accepts the reviewers it was checked with; ask for a new run"},
		{"no keys recorded", nil, nil, "SHA256:alice", "was not when this run was checked"},
		{"record unreadable", nil, errors.New("no history"), "SHA256:carol", ""},
	} {
		err := checkedWith(tc.keys, tc.readErr, tc.fingerprint, "run")
		if got := ""; err != nil {
			got = err.Error()
			if tc.want == "" || !strings.Contains(got, tc.want) || !strings.Contains(got, tc.fingerprint) {
				t.Errorf("%s: %q; want nil or %q naming the key", tc.name, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%s: nil; want %q", tc.name, tc.want)
		}
	}
}
