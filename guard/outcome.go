package guard

import "fmt"

// Outcome is how a run ended. Backends report what they measured (a timeout, a resource limit);
// the guard wrapper settles the rest from the exit code, and Result.OK, Result.TimedOut and the
// workflow's final state are all derived from it. Its JSON form is its String.
type Outcome int

// Outcomes of a run. The zero value means "not reported": the guard wrapper settles it.
const (
	// OutcomeSucceeded: the code exited 0.
	OutcomeSucceeded Outcome = iota + 1
	// OutcomeFailed: the code exited non-zero or was killed by a signal of its own doing.
	OutcomeFailed
	// OutcomeTimedOut: the code ran past its timeout and was stopped.
	OutcomeTimedOut
	// OutcomeMemoryLimit: the sandbox's memory limit killed the code.
	OutcomeMemoryLimit
	// OutcomePidsLimit: the sandbox's process limit stopped the code.
	OutcomePidsLimit
	// OutcomeCancelled: the run was cancelled while the code may have been running and the
	// sandbox was stopped; the output is what the code printed before. Only the guard wrapper
	// sets it (Guarded.Run, when its context is cancelled): a backend that reports it is settled
	// from its exit code like any other.
	OutcomeCancelled
)

var outcomeNames = [...]string{
	OutcomeSucceeded:   "succeeded",
	OutcomeFailed:      "failed",
	OutcomeTimedOut:    "timed_out",
	OutcomeMemoryLimit: "memory_limit",
	OutcomePidsLimit:   "pids_limit",
	OutcomeCancelled:   "cancelled",
}

// String returns the outcome's name ("succeeded", "timed_out", ...), or "" when it is unset.
func (o Outcome) String() string {
	if o <= 0 || int(o) >= len(outcomeNames) {
		return ""
	}
	return outcomeNames[o]
}

// Valid reports whether o is one of the defined outcomes.
func (o Outcome) Valid() bool { return o.String() != "" }

// LimitKill reports whether a resource limit of the sandbox, not the code itself, ended the run.
func (o Outcome) LimitKill() bool { return o == OutcomeMemoryLimit || o == OutcomePidsLimit }

// MarshalText encodes the outcome as its name.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText decodes an outcome's name; "" is the unset outcome.
func (o *Outcome) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*o = 0
		return nil
	}
	for i, name := range outcomeNames {
		if name != "" && name == string(b) {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("guard: unknown outcome %.32q", b)
}

// settle derives the outcome from what a backend reported, and from it OK, TimedOut and a timeout's
// exit code. A limit kill the backend measured wins over a timeout it also saw (the limit is what
// stopped the code). A backend may report a timeout either way (Outcome or TimedOut); an outcome it
// cannot have (succeeded with a non-zero exit, an unknown value, cancelled) is settled from the
// exit code.
func (r *Result) settle() {
	switch {
	case r.Outcome.LimitKill():
	case r.TimedOut || r.Outcome == OutcomeTimedOut:
		r.Outcome = OutcomeTimedOut
	case r.ExitCode == 0:
		r.Outcome = OutcomeSucceeded
	default:
		r.Outcome = OutcomeFailed
	}
	r.TimedOut = r.Outcome == OutcomeTimedOut
	r.OK = r.Outcome == OutcomeSucceeded
	if r.TimedOut {
		r.ExitCode = -1
	}
}

// markCancelled makes r, a result whose limits were applied, the result of a cancelled run: the
// code was stopped, so it has no exit status of its own (ExitCode -1), and it neither succeeded nor
// timed out.
func (r *Result) markCancelled() {
	r.Outcome = OutcomeCancelled
	r.OK, r.TimedOut = false, false
	r.ExitCode, r.Signal = -1, 0
}
