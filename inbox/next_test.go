package inbox

import "testing"

// After a decision, or on j, the page goes to the next waiting run or cell in the list's order,
// wrapping around, never back to the page it came from; to the list when nothing else waits.
func TestNextPending(t *testing.T) {
	rows := []pendingRow{{ID: "run-a"}, {ID: "s b", Session: true}, {ID: "run-c"}}
	for _, tc := range []struct {
		rows       []pendingRow
		from, want string
	}{
		{rows, "/run/run-a", "/session/s%20b"},
		{rows, "/session/s%20b", "/run/run-c"},
		{rows, "/run/run-c", "/run/run-a"},
		{rows, "/run/decided-and-gone", "/run/run-a"},
		{rows, "", "/run/run-a"},
		{rows[:1], "/run/run-a", "/"},
		{nil, "/run/run-a", "/"},
	} {
		if got := nextPending(tc.rows, tc.from); got != tc.want {
			t.Errorf("nextPending(%d rows, %q) = %q; want %q", len(tc.rows), tc.from, got, tc.want)
		}
	}
}
