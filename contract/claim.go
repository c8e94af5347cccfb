package contract

import "github.com/sandboxflow/sandboxflow/guard"

// SandboxClaim is a sandbox host's claim on a run's approval, written to the run's history as the
// signal SignalSandboxClaim before any code starts. A host lets code start only when every claim
// before its own in the history was released, so that an approval runs code once across every
// sandbox host and restart, whatever a namespace writer schedules or fails by id.
//
// A claim commits to a secret only the claiming host holds; a release is the same signal with
// that secret, sent only when the code did not start. Nobody else can release a claim, and a
// claim anyone else sends can only refuse runs, which a namespace writer can do anyway. Claims
// travel as plain JSON payloads, outside any payload codec: they carry no content.
type SandboxClaim struct {
	// RunID is the run the claim is for. A reset copies a run's signals into the new run; a claim
	// copied from another run counts for nothing.
	RunID string `json:"run_id"`
	// ApprovalID and ActivityID say which approval the host claims for which sandbox activity.
	ApprovalID string `json:"approval_id"`
	ActivityID string `json:"activity_id"`
	// Cell is the index of the session's cell the claim is for (a Session's SessionCell); zero
	// for a RunCode run. A session's host counts only earlier claims of the same cell or the
	// same approval id.
	Cell int `json:"cell,omitempty"`
	// Commitment is "sha256:<hex>" of the secret.
	Commitment string `json:"commitment"`
	// Secret, in a release only, is the hex of the secret whose hash is Commitment.
	Secret string `json:"secret,omitempty"`
}

// LateResult is the signal SignalLateResult: a sandbox host's result of a run whose sandbox
// activity the server timed out while the host still ran the code (a cut connection, late
// heartbeats), delivered when the host could reach the server again. It proves nothing by
// itself: anyone who can write to the namespace can send one. The workflow takes it only when
// the result's receipt verifies against the hosts its check recorded and names this run, the
// timed-out activity, a claim the history shows held, and the approvals the workflow accepted;
// it then ends with the result, marked guard.Result.Recovered.
type LateResult struct {
	// RunID and ActivityID name the run and the sandbox activity the result is of.
	RunID      string `json:"run_id"`
	ActivityID string `json:"activity_id"`
	// Result is the result as the host signed it, with its receipt.
	Result guard.Result `json:"result"`
}
