package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sandboxflow/sandboxflow/contract"
	"github.com/sandboxflow/sandboxflow/guard"
)

// claimsChange marks the runs that read the sandbox hosts' claims: a sandbox activity that ends
// cancelled after a host claimed the approval, with the claim never released, may have run the
// code, so the run's outcome is unknown rather than "cancelled before anything ran". Without it
// a namespace writer that sends the update "cancel" and then answers the running activity by id
// as cancelled (before its host hears of the cancel) makes a run whose code ran end as if
// nothing had, and the host's receipted result is never taken.
const claimsChange = "cancel-claims-v1"

// claimsSeen are the claims on this run's approval that its history holds: commitment → still
// held (false once its host released it by revealing the secret, which only that host can do).
type claimsSeen struct {
	claimCh workflow.ReceiveChannel
	claims  map[string]bool
	held    int // how many of claims are still held
	// released gets a value at each release (lateresult.go's wait wakes on it).
	released workflow.Channel
}

// readClaims reads the claim signals on ch into r for the whole run.
func (r *runCode) readClaims(ctx workflow.Context, ch workflow.ReceiveChannel) {
	r.claimCh = ch
	r.released = workflow.NewBufferedChannel(ctx, 1)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var c contract.SandboxClaim
			if !ch.Receive(ctx, &c) {
				return
			}
			if r.noteClaim(c) {
				r.clock.claim(ctx)
				r.status.Phases = r.clock.phases(time.Time{}, nil)
			}
		}
	})
}

// noteClaim records c when it is this run's: a claim, or a release whose secret matches its
// commitment. A claim anyone else sends can only make a cancelled run's outcome unknown. It
// reports whether c is a claim not seen before.
func (r *runCode) noteClaim(c contract.SandboxClaim) (claimed bool) {
	if c.RunID != r.status.RunID || c.Commitment == "" {
		return false
	}
	if r.claims == nil {
		r.claims = map[string]bool{}
	}
	if c.Secret == "" {
		if _, seen := r.claims[c.Commitment]; !seen {
			r.claims[c.Commitment] = true
			r.held++
			return true
		}
		return false
	}
	secret, err := hex.DecodeString(c.Secret)
	if err != nil {
		return false
	}
	if sum := sha256.Sum256(secret); "sha256:"+hex.EncodeToString(sum[:]) == c.Commitment {
		if r.claims[c.Commitment] {
			r.held--
			if r.released != nil {
				r.released.SendAsync(c.Commitment)
			}
		}
		r.claims[c.Commitment] = false
	}
	return false
}

// heldClaim reports whether a claim on the run's approval is held (made and never released).
func (r *runCode) heldClaim() bool {
	r.takeDeliveredClaims()
	return r.held > 0
}

// holds reports whether commitment is of a claim on the run's approval that is held: its claim
// is in the history and no release revealed its secret. A late result must name one.
func (r *runCode) holds(commitment string) bool {
	r.takeDeliveredClaims()
	return r.claims[commitment]
}

// takeDeliveredClaims takes the claims already delivered that the reading goroutine has not run
// for yet.
func (r *runCode) takeDeliveredClaims() {
	if r.claimCh != nil {
		for {
			var c contract.SandboxClaim
			ok, more := r.claimCh.ReceiveAsyncWithMoreFlag(&c)
			if !ok {
				break
			}
			r.noteClaim(c)
			if !more {
				break
			}
		}
	}
}

// cancelledAfterClaim is the error of a run whose sandbox activity ended cancelled (err) while a
// host's claim on its approval was held: the code may have started and its outcome is unknown.
// It returns nil when no claim is held, or for a history from before claimsChange.
func (r *runCode) cancelledAfterClaim(ctx workflow.Context, err error) error {
	if !r.heldClaim() || workflow.GetVersion(ctx, claimsChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	return &guard.IntegrationError{
		Op: "run sandbox",
		Err: fmt.Errorf("the sandbox activity ended cancelled, with no result, after a sandbox host claimed the approval and never released it: "+
			"the code may have started; outcome unknown; the approval was used: %w", err),
		CodeMayHaveStarted: true,
	}
}
