package activities

import (
	"testing"
	"time"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

func TestFinishedEventCountsEgress(t *testing.T) {
	res := guard.Result{Egress: &guard.EgressReport{
		Attempts: []guard.EgressAttempt{
			{Host: "api.example.com", Port: 443, Allowed: true, BytesOut: 10, BytesIn: 20},
			{Host: "evil.example", Port: 443, Reason: "not in the run's egress allowlist"},
		},
		Dropped:  2,
		BytesOut: 10,
		BytesIn:  20,
	}}
	e := finishedEvent(guard.Checked{Egress: []string{"api.example.com"}}, contract.RunInput{}, res, nil, time.Second)
	for k, want := range map[string]any{"egress_attempts": 4, "egress_refused": 3, "egress_bytes_out": int64(10), "egress_bytes_in": int64(20)} {
		if got := e.Data[k]; got != want {
			t.Errorf("%s: got %v; want %v", k, got, want)
		}
	}
	if _, ok := finishedEvent(guard.Checked{}, contract.RunInput{}, guard.Result{}, nil, time.Second).Data["egress_attempts"]; ok {
		t.Errorf("a run without egress has egress_attempts in its event")
	}
}
