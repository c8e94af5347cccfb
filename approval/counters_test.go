package approval

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A passkey's signature counter must grow from one accepted assertion to the next, across
// Counters values on the same file (a restart, another process); an assertion presented again
// for the same statement is accepted, another with a counter that did not grow (a cloned
// authenticator, or a replay) is refused; authenticators that always report 0 stay accepted.
func TestCountersRefuseACounterThatDoesNotGrow(t *testing.T) {
	alice := newSoftPasskey(t, "localhost")
	zero := newSoftPasskey(t, "localhost")
	reviewers := pinned(t, mustReviewers(t, alice.line(t, "alice"), zero.line(t, "zoe")), inboxOrigin)
	path := filepath.Join(t.TempDir(), "state", "counters.json")
	const ok = webauthnFlagUP | webauthnFlagUV
	verify := func(p *softPasskey, approvalID string, counter uint32) Verified {
		t.Helper()
		f := testFields()
		f.ApprovalID = approvalID
		a := p.assert(t, WebAuthnChallenge(mustStatement(t, f)), assertOpts{origin: inboxOrigin, flags: ok, counter: counter, zeroCounter: counter == 0})
		v, err := Verify(reviewers, f, Proof{WebAuthn: a}, testNow)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		return v
	}
	const (
		id1 = "0b7e9c1e-8a8f-4a36-9d55-2f3c1b0e6a01"
		id2 = "0b7e9c1e-8a8f-4a36-9d55-2f3c1b0e6a02"
		id3 = "0b7e9c1e-8a8f-4a36-9d55-2f3c1b0e6a03"
	)
	first := verify(alice, id1, 10)
	for i, tc := range []struct {
		name string
		v    Verified
		want Reason // "" to accept
	}{
		{"first", first, ""},
		{"the same assertion again", first, ""},
		{"grown", verify(alice, id2, 11), ""},
		{"the same counter for another statement (a clone)", verify(alice, id3, 11), ReasonCounterReplayed},
		{"a lower counter (a clone behind)", verify(alice, id3, 9), ReasonCounterReplayed},
		{"an earlier assertion replayed", first, ReasonCounterReplayed},
		{"zero after non-zero", verify(alice, id3, 0), ReasonCounterReplayed},
		{"an authenticator without a counter", verify(zero, id1, 0), ""},
		{"still without", verify(zero, id2, 0), ""},
	} {
		c := NewCounters(path) // a new value each time: the file is the state
		err := c.Advance(tc.v)
		if tc.want == "" && err != nil || tc.want != "" && !isReason(err, tc.want) {
			t.Errorf("%d %s: %v; want %q", i, tc.name, err, tc.want)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("counters file: %v, %v; want mode 0600", fi, err)
	}
	if err := NewCounters(path).Advance(Verified{Method: MethodSSH}); err != nil {
		t.Errorf("an SSH signature: %v; want it accepted unrecorded", err)
	}
}

// Concurrent assertions of one passkey with the same counter over different statements: one is
// accepted, never both.
func TestCountersAcceptOneOfConcurrentClones(t *testing.T) {
	alice := newSoftPasskey(t, "localhost")
	reviewers := pinned(t, mustReviewers(t, alice.line(t, "alice")), inboxOrigin)
	path := filepath.Join(t.TempDir(), "counters.json")
	var vs []Verified
	for _, id := range []string{"0b7e9c1e-8a8f-4a36-9d55-2f3c1b0e6a01", "0b7e9c1e-8a8f-4a36-9d55-2f3c1b0e6a02", "0b7e9c1e-8a8f-4a36-9d55-2f3c1b0e6a03", "0b7e9c1e-8a8f-4a36-9d55-2f3c1b0e6a04"} {
		f := testFields()
		f.ApprovalID = id
		a := alice.assert(t, WebAuthnChallenge(mustStatement(t, f)), assertOpts{origin: inboxOrigin, flags: webauthnFlagUP | webauthnFlagUV, counter: 5})
		v, err := Verify(reviewers, f, Proof{WebAuthn: a}, testNow)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
	)
	for _, v := range vs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if NewCounters(path).Advance(v) == nil {
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if accepted != 1 {
		t.Errorf("%d of %d assertions with the same counter accepted; want 1", accepted, len(vs))
	}
}
