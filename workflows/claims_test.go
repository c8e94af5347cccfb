package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/sandboxflow/sandboxflow/contract"
)

// TestClaimsHeldUntilTheirHostReleasesThem: a claim counts as held until a release reveals the
// secret of its commitment; a release with another secret, or a claim of another run (copied by a
// reset), changes nothing.
func TestClaimsHeldUntilTheirHostReleasesThem(t *testing.T) {
	secret := []byte("the host's secret, 32 bytes long")
	sum := sha256.Sum256(secret)
	claim := contract.SandboxClaim{RunID: "run-1", ApprovalID: "a", ActivityID: "21", Commitment: "sha256:" + hex.EncodeToString(sum[:])}
	release := claim
	release.Secret = hex.EncodeToString(secret)
	wrong := claim
	wrong.Secret = hex.EncodeToString([]byte("a guess"))
	other := claim
	other.RunID = "run-0"

	for _, c := range []struct {
		name   string
		claims []contract.SandboxClaim
		held   bool
	}{
		{"none", nil, false},
		{"claimed", []contract.SandboxClaim{claim}, true},
		{"claimed twice", []contract.SandboxClaim{claim, claim}, true},
		{"released", []contract.SandboxClaim{claim, release}, false},
		{"claimed twice, released", []contract.SandboxClaim{claim, claim, release}, false},
		{"released with a wrong secret", []contract.SandboxClaim{claim, wrong}, true},
		{"another run's claim", []contract.SandboxClaim{other}, false},
		{"released twice", []contract.SandboxClaim{claim, release, release}, false},
	} {
		r := &runCode{}
		r.status.RunID = "run-1"
		for _, cl := range c.claims {
			r.noteClaim(cl)
		}
		if got := r.heldClaim(); got != c.held {
			t.Errorf("%s: held %v; want %v", c.name, got, c.held)
		}
	}
}
