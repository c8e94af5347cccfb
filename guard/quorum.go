package guard

// MaxQuorum bounds Policy.Quorum and Policy.RiskyQuorum: every approval travels in the run's
// history and in the sandbox activity's input.
const MaxQuorum = 16

// Risky reports whether a checked request asks for what RiskyQuorum guards: an open network,
// egress to any host, or any of the worker's secrets.
func Risky(c *Checked) bool {
	return c.Network || len(c.Egress) > 0 || len(c.Secrets) > 0
}

// QuorumFor returns how many distinct reviewers must approve c under p: Quorum (at least 1),
// or RiskyQuorum when that is larger and c is Risky. The workflow records it when it checks the
// request; the sandbox host computes it again from its own policy and the request it received
// (whose network, egress and secrets the approvals' digest binds) and refuses fewer approvals.
func (p Policy) QuorumFor(c *Checked) int {
	n := max(p.Quorum, 1)
	if Risky(c) {
		n = max(n, p.RiskyQuorum)
	}
	return n
}

func (p Policy) validateQuorum() error {
	for _, q := range []struct {
		name string
		v    int
	}{{"quorum", p.Quorum}, {"risky quorum", p.RiskyQuorum}} {
		if q.v < 0 || q.v > MaxQuorum {
			return configf("policy: %s %d: want 0 (one reviewer) to %d", q.name, q.v, MaxQuorum)
		}
	}
	return nil
}

// Approval is one reviewer's approval that a run used, as the sandbox host verified it.
type Approval struct {
	// ApprovalID is the approval's id; Reviewer the principal its statement signed.
	ApprovalID string `json:"approval_id"`
	Reviewer   string `json:"reviewer"`
	// Fingerprint is the SHA256 fingerprint of the key that signed it.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// Edit says that the code that ran is a reviewer's edit of the code the run was started with.
type Edit struct {
	// Editor is the reviewer who sent the edited code (and whose approval of it the sandbox
	// host verified).
	Editor string `json:"editor"`
	// OriginalDigest is the digest of the request the run was started with; Digest that of the
	// edited request, which every approval signed and which ran.
	OriginalDigest string `json:"original_digest"`
	Digest         string `json:"digest"`
}
