package guard

import (
	"encoding/json"
	"testing"
)

func TestOutcomeJSONRoundTrip(t *testing.T) {
	for o := OutcomeSucceeded; o <= OutcomeCancelled; o++ {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var back Outcome
		if err := json.Unmarshal(b, &back); err != nil || back != o {
			t.Errorf("%s: round trip got %v, %v; want %v", b, back, err, o)
		}
	}
	var o Outcome
	if err := json.Unmarshal([]byte(`"exploded"`), &o); err == nil {
		t.Errorf("unknown outcome decoded as %v; want an error", o)
	}
}

func TestSettleDerivesOKAndTimedOutFromTheOutcome(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       Result
		want     Outcome
		ok, tout bool
		exit     int
	}{
		{"exit 0", Result{}, OutcomeSucceeded, true, false, 0},
		{"exit 3", Result{ExitCode: 3}, OutcomeFailed, false, false, 3},
		{"timed out flag", Result{TimedOut: true, ExitCode: 0}, OutcomeTimedOut, false, true, -1},
		{"timed out outcome", Result{Outcome: OutcomeTimedOut, ExitCode: 9}, OutcomeTimedOut, false, true, -1},
		{"memory", Result{Outcome: OutcomeMemoryLimit, ExitCode: 137}, OutcomeMemoryLimit, false, false, 137},
		{"pids beats a timeout", Result{Outcome: OutcomePidsLimit, TimedOut: true}, OutcomePidsLimit, false, false, 0},
		{"lying success", Result{Outcome: OutcomeSucceeded, ExitCode: 1, OK: true}, OutcomeFailed, false, false, 1},
		{"unknown value", Result{Outcome: Outcome(42)}, OutcomeSucceeded, true, false, 0},
		// Only the guard wrapper marks a run cancelled; a backend's claim is settled like any other.
		{"backend says cancelled", Result{Outcome: OutcomeCancelled, ExitCode: 0}, OutcomeSucceeded, true, false, 0},
		{"backend says cancelled, exit 1", Result{Outcome: OutcomeCancelled, ExitCode: 1}, OutcomeFailed, false, false, 1},
	} {
		r := tc.in
		r.settle()
		if r.Outcome != tc.want || r.OK != tc.ok || r.TimedOut != tc.tout || r.ExitCode != tc.exit {
			t.Errorf("%s: got %v ok=%t timed_out=%t exit=%d; want %v ok=%t timed_out=%t exit=%d",
				tc.name, r.Outcome, r.OK, r.TimedOut, r.ExitCode, tc.want, tc.ok, tc.tout, tc.exit)
		}
	}
}
