package contract

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
