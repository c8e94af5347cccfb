package contract

import (
	"encoding/json"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// The JSON of the types below writes durations as strings in Go's syntax ("30s") and reads both
// strings and numbers (nanoseconds, the older encoding), so that clients in any language can read
// and write them. Go values are unchanged: the digest and every caller see time.Duration.

type plainCheckResult CheckResult

type checkResultJSON struct {
	plainCheckResult
	ApprovalTimeout guard.Duration `json:"approval_timeout"`
}

// MarshalJSON writes the approval timeout as a string such as "24h0m0s".
func (c CheckResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(checkResultJSON{plainCheckResult(c), guard.Duration(c.ApprovalTimeout)})
}

// UnmarshalJSON reads the approval timeout as a string or as nanoseconds.
func (c *CheckResult) UnmarshalJSON(b []byte) error {
	return guard.UnmarshalVia(b, c, "contract: check result", func(w checkResultJSON) CheckResult {
		v := CheckResult(w.plainCheckResult)
		v.ApprovalTimeout = time.Duration(w.ApprovalTimeout)
		return v
	})
}

type plainRunOptions RunOptions

type runOptionsJSON struct {
	plainRunOptions
	Grace            guard.Duration `json:"grace"`
	HeartbeatTimeout guard.Duration `json:"heartbeat_timeout"`
	ReportMargin     guard.Duration `json:"report_margin"`
	StartBackoff     guard.Duration `json:"start_backoff"`
	MaxStartBackoff  guard.Duration `json:"max_start_backoff"`

	ScheduleToStartTimeout guard.Duration `json:"schedule_to_start_timeout,omitempty"`
}

// MarshalJSON writes every duration as a string such as "5s".
func (o RunOptions) MarshalJSON() ([]byte, error) {
	return json.Marshal(runOptionsJSON{
		plainRunOptions:  plainRunOptions(o),
		Grace:            guard.Duration(o.Grace),
		HeartbeatTimeout: guard.Duration(o.HeartbeatTimeout),
		ReportMargin:     guard.Duration(o.ReportMargin),
		StartBackoff:     guard.Duration(o.StartBackoff),
		MaxStartBackoff:  guard.Duration(o.MaxStartBackoff),

		ScheduleToStartTimeout: guard.Duration(o.ScheduleToStartTimeout),
	})
}

// UnmarshalJSON reads every duration as a string or as nanoseconds.
func (o *RunOptions) UnmarshalJSON(b []byte) error {
	return guard.UnmarshalVia(b, o, "contract: run options", func(w runOptionsJSON) RunOptions {
		v := RunOptions(w.plainRunOptions)
		v.Grace = time.Duration(w.Grace)
		v.HeartbeatTimeout = time.Duration(w.HeartbeatTimeout)
		v.ReportMargin = time.Duration(w.ReportMargin)
		v.StartBackoff = time.Duration(w.StartBackoff)
		v.MaxStartBackoff = time.Duration(w.MaxStartBackoff)
		v.ScheduleToStartTimeout = time.Duration(w.ScheduleToStartTimeout)
		return v
	})
}
